import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  BUILTIN_SCENARIO_NAMES,
  builtinScenario,
  createManualClock,
  loadScenarioFile,
  parseScenario,
  resolveIdentity,
  ScheduledEventsModel,
  startImdsEmulator,
} from '../../../src/emulators/imds/index.js';

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'imds-scenarios-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function fileWith(name: string, content: string): Promise<string> {
  const file = join(dir, name);
  await writeFile(file, content);
  return file;
}

const minimal = (steps: unknown[]) => JSON.stringify({ name: 'x', steps });

describe('scenario files', () => {
  it.each([
    ['not JSON', '{"name": "x", steps: []}', /scenario file .*bad\.json is not valid JSON/],
    ['missing name', '{"steps": []}', /bad\.json: scenario\.name: expected a string, got nothing/],
    [
      'steps not an array',
      '{"name": "x", "steps": {}}',
      /scenario\.steps: expected an array of steps, got an object/,
    ],
    ['unknown top-level field', '{"name": "x", "steps": [], "sped": 60}', /scenario\.sped: unknown field/],
    ['bad speed', '{"name": "x", "steps": [], "speed": 0}', /scenario\.speed: must be ≥ 0\.001, got 0/],
    [
      'bad after',
      '{"name": "x", "steps": [], "after": "repeat"}',
      /scenario\.after: expected one of "stay", "loop", got "repeat"/,
    ],
    [
      'negative at',
      minimal([{ at: -1, action: 'cancel', ref: 'a' }]),
      /scenario\.steps\[0\]\.at: must be ≥ 0 seconds, got -1/,
    ],
    [
      'unknown action',
      minimal([{ at: 0, action: 'explode' }]),
      /scenario\.steps\[0\]\.action: expected one of "schedule"/,
    ],
    [
      'notBefore as text',
      minimal([{ at: 0, action: 'schedule', event: { ref: 'a', type: 'Reboot', notBefore: '15m' } }]),
      /scenario\.steps\[0\]\.event\.notBefore: expected a number of seconds of notice, got "15m"/,
    ],
    [
      'schedule without notBefore',
      minimal([{ at: 0, action: 'schedule', event: { ref: 'a', type: 'Reboot' } }]),
      /steps\[0\]\.event\.notBefore: expected a number/,
    ],
    [
      'Started event with a notBefore',
      minimal([{ at: 0, action: 'start', event: { ref: 'a', type: 'Reboot', notBefore: 5 } }]),
      /steps\[0\]\.event\.notBefore: an event that appears Started has no NotBefore/,
    ],
    [
      'ref used before it is declared',
      minimal([
        { at: 10, action: 'schedule', event: { ref: 'a', type: 'Reboot', notBefore: 60 } },
        { at: 5, action: 'cancel', ref: 'a' },
      ]),
      /scenario\.steps\[1\]\.ref: no event with ref "a" is declared by an earlier schedule\/start step/,
    ],
    [
      'ref declared twice',
      minimal([
        { at: 0, action: 'schedule', event: { ref: 'a', type: 'Reboot', notBefore: 60 } },
        { at: 1, action: 'start', event: { ref: 'a', type: 'Reboot' } },
      ]),
      /scenario\.steps\[1\]\.event\.ref: event ref "a" is declared twice/,
    ],
    [
      'bad placeholder',
      minimal([
        { at: 0, action: 'schedule', event: { ref: 'a', type: 'Reboot', notBefore: 1, resources: ['$me'] } },
      ]),
      /steps\[0\]\.event\.resources\[0\]: unknown placeholder "\$me"/,
    ],
    [
      'unknown event field',
      minimal([
        { at: 0, action: 'schedule', event: { ref: 'a', type: 'Reboot', notBefore: 1, status: 'Started' } },
      ]),
      /steps\[0\]\.event\.status: unknown field/,
    ],
    [
      'duration below -1',
      minimal([
        { at: 0, action: 'schedule', event: { ref: 'a', type: 'Reboot', notBefore: 1, duration: -5 } },
      ]),
      /steps\[0\]\.event\.duration: must be ≥ -1, got -5/,
    ],
    [
      'bad fault',
      minimal([{ at: 0, action: 'fault', fault: { kind: 'status', status: 'x' } }]),
      /steps\[0\]\.fault\.status: expected a number/,
    ],
    [
      'loopPeriod shorter than the timeline',
      JSON.stringify({
        name: 'x',
        loopPeriod: 5,
        steps: [{ at: 10, action: 'fault', fault: { kind: 'drop' } }],
      }),
      /scenario\.loopPeriod: must be ≥ the last step's time \(10 s\), got 5/,
    ],
  ])('rejects %s with an error naming the field', async (_label, content, message) => {
    const file = await fileWith('bad.json', content);
    await expect(loadScenarioFile(file)).rejects.toThrow(message);
  });

  it('names a missing file', async () => {
    await expect(loadScenarioFile(join(dir, 'missing.json'))).rejects.toThrow(
      /cannot read scenario file .*missing\.json/,
    );
  });

  it('loads a valid file, sorts steps by time, and the emulator accepts it by path', async () => {
    const file = await fileWith(
      'ok.json',
      JSON.stringify({
        name: 'mine',
        speed: 10,
        steps: [
          { at: 30, action: 'reschedule', ref: 'a', notBefore: 100 },
          {
            at: 0,
            action: 'schedule',
            event: { ref: 'a', type: 'CustomFutureType', notBefore: 60, resources: ['$self', 'other-vm'] },
          },
          { at: 5, action: 'fault', fault: { kind: 'status', status: 500, count: 2 } },
        ],
      }),
    );
    const s = await loadScenarioFile(file);
    expect(s.steps.map((x) => x.at)).toEqual([0, 5, 30]);
    const emu = await startImdsEmulator({ scenario: file, clock: createManualClock(0) });
    try {
      expect(emu.model.speed).toBe(10);
      expect(emu.document().Events[0]).toMatchObject({
        EventType: 'CustomFutureType',
        Resources: ['vmss-se-emulated_0', 'other-vm'],
      });
    } finally {
      await emu.close();
    }
  });

  it('the example in docs/imds-emulator.md loads and runs', async () => {
    const doc = await readFile(new URL('../../../docs/imds-emulator.md', import.meta.url), 'utf8');
    const block = /<!-- example-scenario -->\s*```json\n([\s\S]*?)```/.exec(doc);
    expect(
      block,
      'docs/imds-emulator.md must hold a ```json block after <!-- example-scenario -->',
    ).not.toBeNull();
    const scenario = parseScenario(JSON.parse(block?.[1] ?? ''));
    const model = new ScheduledEventsModel({
      clock: createManualClock(0),
      identity: resolveIdentity(),
      speed: 1,
    });
    model.loadScenario(scenario);
    for (let i = 0; i < 100 && model.nextChangeAt() !== null; i++) model.advanceToNext();
    expect(model.history().length).toBeGreaterThan(2);
  });
});

describe('built-in scenarios', () => {
  const run = (name: string, opts: { speed?: number; terminateNoticeSeconds?: number } = {}) => {
    const clock = createManualClock(0);
    const model = new ScheduledEventsModel({ clock, identity: resolveIdentity(), speed: 1 });
    const scenario = builtinScenario(
      name,
      opts.terminateNoticeSeconds ? { terminateNoticeSeconds: opts.terminateNoticeSeconds } : {},
    );
    model.loadScenario(scenario, opts.speed ? { speed: opts.speed } : {});
    for (let i = 0; i < 1000 && model.nextChangeAt() !== null; i++) model.advanceToNext();
    return { model, clock, history: model.history() };
  };
  const summary = (h: ReturnType<typeof run>['history']) =>
    h.map((e) => `${e.ref}:${e.change}${e.affectsThisVm ? '' : '(peer)'}`);

  it('every built-in is valid and every event of it ends', () => {
    for (const name of BUILTIN_SCENARIO_NAMES) {
      const { model } = run(name);
      expect(model.currentEvents(), name).toEqual([]);
    }
  });

  it.each([
    ['freeze', ['freeze:scheduled', 'freeze:started', 'freeze:completed']],
    ['reboot', ['reboot:scheduled', 'reboot:started', 'reboot:completed']],
    ['redeploy', ['redeploy:scheduled', 'redeploy:started', 'redeploy:completed']],
    ['preempt', ['preempt:scheduled', 'preempt:started', 'preempt:completed']],
    ['terminate', ['terminate:scheduled', 'terminate:started', 'terminate:completed']],
    ['cancel', ['reboot:scheduled', 'reboot:canceled']],
    ['reschedule', ['redeploy:scheduled', 'redeploy:rescheduled', 'redeploy:started', 'redeploy:completed']],
    ['hardware-failure', ['reboot:started', 'reboot:completed']],
    [
      'overlap',
      [
        'freeze:scheduled',
        'reboot:scheduled',
        'freeze:started',
        'reboot:started',
        'freeze:completed',
        'reboot:completed',
      ],
    ],
    [
      'other-vms',
      [
        'peer-reboot:scheduled(peer)',
        'peer-freeze:scheduled(peer)',
        'peer-freeze:canceled(peer)',
        'peer-reboot:started(peer)',
        'peer-reboot:completed(peer)',
      ],
    ],
  ])('%s follows its documented timeline', (name, expected) => {
    expect(summary(run(name).history)).toEqual(expected);
  });

  it('uses real notice times', () => {
    const notice = (name: string, opts = {}) => {
      const h = run(name, opts).history;
      return ((h[1]?.atMs ?? 0) - (h[0]?.atMs ?? 0)) / 1000;
    };
    expect(notice('freeze')).toBe(900);
    expect(notice('reboot')).toBe(900);
    expect(notice('redeploy')).toBe(600);
    expect(notice('preempt')).toBe(30);
    expect(notice('terminate')).toBe(300);
    expect(notice('terminate', { terminateNoticeSeconds: 900 })).toBe(900);
    expect(() => builtinScenario('terminate', { terminateNoticeSeconds: 60 })).toThrow(/between 300 and 900/);
    expect(() => builtinScenario('nope')).toThrow(/unknown built-in scenario "nope"/);
  });

  it('demo covers every event type, a cancellation and a peer event, and ends within 40 s at its default speed', () => {
    const scenario = builtinScenario('demo');
    expect(scenario.speed).toBe(60);
    const { history } = run('demo', { speed: 60 });
    const self = history.filter((h) => h.affectsThisVm);
    expect(new Set(self.map((h) => h.eventType))).toEqual(
      new Set(['Freeze', 'Reboot', 'Redeploy', 'Preempt', 'Terminate']),
    );
    expect(self.filter((h) => h.change === 'canceled')).toHaveLength(1);
    expect(history.some((h) => !h.affectsThisVm)).toBe(true);
    const last = history[history.length - 1]?.atMs ?? Number.POSITIVE_INFINITY;
    expect(last).toBeLessThanOrEqual(40_000);
    // Every state lasts at least two 1 Hz polls (2 s) before the previous one of the same event.
    const byEvent = new Map<string, number[]>();
    for (const h of history) byEvent.set(h.eventId, [...(byEvent.get(h.eventId) ?? []), h.atMs]);
    for (const times of byEvent.values())
      for (let i = 1; i < times.length; i++)
        expect((times[i] ?? 0) - (times[i - 1] ?? 0)).toBeGreaterThanOrEqual(2_000);
  });
});
