import { afterEach, describe, expect, it } from 'vitest';
import {
  createManualClock,
  type ImdsEmulator,
  startImdsEmulator,
} from '../../../src/emulators/imds/index.js';
import { approve, control, getDoc, http } from './http.js';

const running: ImdsEmulator[] = [];
async function start(options: Parameters<typeof startImdsEmulator>[0] = {}) {
  const emu = await startImdsEmulator({
    clock: createManualClock(Date.UTC(2026, 0, 5, 10, 0, 0)),
    seed: 'ctl',
    ...options,
  });
  running.push(emu);
  return { emu, base: emu.url };
}
afterEach(async () => {
  await Promise.all(running.splice(0).map((e) => e.close()));
});

describe('IMDS emulator: control API', () => {
  it('loads a scenario, advances time, and reports state, history and requests', async () => {
    const { base } = await start();
    const loaded = await control(base, 'POST', 'scenario', { name: 'reboot', speed: 60 });
    expect(loaded).toMatchObject({ status: 200, json: { scenario: 'reboot', speed: 60 } });
    const state = await control(base, 'GET', 'state');
    expect(state.json).toMatchObject({
      scenario: 'reboot',
      speed: 60,
      nextChangeAt: '2026-01-05T10:00:15.000Z',
    });
    expect((await getDoc(base)).doc?.Events[0]?.EventStatus).toBe('Scheduled');
    const adv = await control(base, 'POST', 'advance', { toNext: true });
    expect(adv.json).toMatchObject({
      now: '2026-01-05T10:00:15.000Z',
      nextChangeAt: '2026-01-05T10:00:20.000Z',
    });
    expect((await getDoc(base)).doc?.Events[0]?.EventStatus).toBe('Started');
    await control(base, 'POST', 'advance', { scenarioSeconds: 300 });
    expect((await getDoc(base)).doc?.Events).toEqual([]);
    const history = await control(base, 'GET', 'history');
    expect(history.json.map((h: { change: string }) => h.change)).toEqual([
      'scheduled',
      'started',
      'completed',
    ]);
    const requests = await control(base, 'GET', 'requests');
    expect(requests.json).toHaveLength(3);
    expect(
      requests.json.every(
        (r: { route: string; status: number }) => r.route === 'scheduledevents' && r.status === 200,
      ),
    ).toBe(true);
    const since = await control(base, 'GET', 'requests?since=2');
    expect(since.json).toHaveLength(1);
  });

  it('loads an inline scenario and reports the offending field of a bad one', async () => {
    const { base } = await start();
    const ok = await control(base, 'POST', 'scenario', {
      scenario: {
        name: 'inline',
        steps: [{ at: 0, action: 'schedule', event: { ref: 'x', type: 'Reboot', notBefore: 60 } }],
      },
    });
    expect(ok.status).toBe(200);
    const bad = await control(base, 'POST', 'scenario', {
      scenario: {
        name: 'inline',
        steps: [{ at: 0, action: 'schedule', event: { ref: 'x', type: 'Reboot', notBefore: '1m' } }],
      },
    });
    expect(bad).toMatchObject({
      status: 400,
      json: { error: 'scenario.steps[0].event.notBefore: expected a number of seconds of notice, got "1m"' },
    });
    const unknown = await control(base, 'POST', 'scenario', { name: 'nope' });
    expect(unknown.status).toBe(400);
    expect(unknown.json.error).toMatch(/unknown scenario "nope"/);
  });

  it('injects events and steps, arms and clears faults, records approvals', async () => {
    const { base } = await start();
    const injected = await control(base, 'POST', 'events', {
      ref: 'hw',
      type: 'Reboot',
      status: 'Started',
      startedFor: 30,
    });
    expect(injected.status).toBe(200);
    const hwId = injected.json.eventId as string;
    const sched = await control(base, 'POST', 'events', {
      ref: 'p',
      type: 'Preempt',
      notBefore: 30,
      eventId: 'MY-ID-1',
    });
    expect(sched.json.eventId).toBe('MY-ID-1');
    let doc = (await getDoc(base)).doc;
    expect(doc?.Events.map((e) => [e.EventId, e.EventStatus])).toEqual([
      [hwId, 'Started'],
      ['MY-ID-1', 'Scheduled'],
    ]);
    const steps = await control(base, 'POST', 'steps', [
      { action: 'reschedule', ref: 'p', notBefore: 60 },
      { action: 'complete', ref: hwId },
    ]);
    expect(steps.json.eventIds).toEqual(['MY-ID-1', hwId]);
    doc = (await getDoc(base)).doc;
    expect(doc?.Events.map((e) => e.EventId)).toEqual(['MY-ID-1']);
    expect(doc?.Events[0]?.NotBefore).toBe(new Date(Date.UTC(2026, 0, 5, 10, 1, 0)).toUTCString());

    const fault = await control(base, 'POST', 'faults', { kind: 'status', status: 429, count: 5 });
    expect(fault.json).toMatchObject({
      remaining: 5,
      spec: { kind: 'status', status: 429, route: 'scheduledevents' },
    });
    expect((await getDoc(base)).status).toBe(429);
    expect((await control(base, 'GET', 'faults')).json).toHaveLength(1);
    await control(base, 'DELETE', 'faults');
    expect((await getDoc(base)).status).toBe(200);

    expect((await approve(base, ['my-id-1'])).status).toBe(200);
    const approvals = await control(base, 'GET', 'approvals');
    expect(approvals.json).toEqual([
      expect.objectContaining({
        outcome: 'accepted',
        eventIds: ['my-id-1'],
        effects: [{ eventId: 'MY-ID-1', before: 'Scheduled' }],
      }),
    ]);
  });

  it('rejects bad control input with 400 and a field path', async () => {
    const { base } = await start();
    expect((await control(base, 'POST', 'events', { ref: 'x' })).json.error).toBe(
      'body.type: expected a string, got nothing',
    );
    expect((await control(base, 'POST', 'steps', { action: 'explode' })).json.error).toMatch(
      /^body\.action: expected one of/,
    );
    expect((await control(base, 'POST', 'faults', { kind: 'status', status: 200 })).json.error).toBe(
      'body.status: must be ≥ 400, got 200',
    );
    expect((await control(base, 'POST', 'advance', { ms: -1 })).status).toBe(400);
    const notJson = await http(`${base}/_emulator/advance`, { method: 'POST', body: '{' });
    expect(notJson.status).toBe(400);
    expect((await control(base, 'GET', 'nothing')).status).toBe(404);
  });

  it('reset restarts the scenario and forgets logs', async () => {
    const { base, emu } = await start({ scenario: 'freeze' });
    const first = (await getDoc(base)).doc?.Events[0]?.EventId as string;
    await approve(base, [first]);
    await control(base, 'POST', 'reset');
    expect(emu.approvals()).toEqual([]);
    expect(emu.requests()).toEqual([]);
    const doc = (await getDoc(base)).doc;
    expect(doc?.Events).toHaveLength(1);
    expect(doc?.Events[0]?.EventId).not.toBe(first);
    expect(doc?.Events[0]?.EventStatus).toBe('Scheduled');
  });

  it('can be switched off', async () => {
    const { base } = await start({ control: false });
    expect((await http(`${base}/_emulator/state`)).status).toBe(404);
  });

  it('waitForPoll resolves on the first scheduled-events answer after a given request', async () => {
    const { base, emu } = await start();
    await getDoc(base);
    const seq = emu.lastSeq();
    const waiting = emu.waitForPoll(seq);
    await getDoc(base);
    expect((await waiting).seq).toBe(seq + 1);
    const never = emu.waitForPoll(emu.lastSeq());
    await emu.close();
    await expect(never).rejects.toThrow(/closed/);
  });
});
