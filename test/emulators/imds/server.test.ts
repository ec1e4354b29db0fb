import { afterEach, describe, expect, it } from 'vitest';
import {
  createManualClock,
  type ImdsEmulator,
  type ImdsEmulatorOptions,
  startImdsEmulator,
} from '../../../src/emulators/imds/index.js';
import { approve, getDoc, http, MD, SE } from './http.js';

const T0 = Date.UTC(2026, 0, 5, 10, 0, 0);
const running: ImdsEmulator[] = [];

async function start(options: ImdsEmulatorOptions = {}) {
  const clock = createManualClock(T0);
  const emu = await startImdsEmulator({ clock, seed: 'test', ...options });
  running.push(emu);
  return { emu, clock, base: emu.url };
}

afterEach(async () => {
  await Promise.all(running.splice(0).map((e) => e.close()));
});

describe('IMDS emulator: protocol', () => {
  it('binds 127.0.0.1 on a free port by default', async () => {
    const { emu } = await start();
    expect(emu.host).toBe('127.0.0.1');
    expect(emu.port).toBeGreaterThan(0);
    expect(emu.url).toBe(`http://127.0.0.1:${emu.port}`);
  });

  it('answers 400 with an IMDS-like error without Metadata: true, on GET and POST, for both routes', async () => {
    const { base } = await start({ scenario: 'freeze' });
    for (const headers of [{}, { Metadata: 'false' }, { Metadata: '' }] as Record<string, string>[]) {
      const get = await http(`${base}${SE}`, { headers });
      expect(get.status).toBe(400);
      expect(JSON.parse(get.body)).toEqual({ error: 'Bad request. Required metadata header not specified' });
    }
    const inst = await http(`${base}/metadata/instance?api-version=2021-02-01`);
    expect(inst.status).toBe(400);
    const id = (await getDoc(base)).doc?.Events[0]?.EventId as string;
    const post = await approve(base, [id], {});
    expect(post.status).toBe(400);
    expect(JSON.parse(post.body).error).toMatch(/metadata header/);
    expect((await getDoc(base)).doc?.Events[0]?.EventStatus).toBe('Scheduled');
  });

  it('accepts the Metadata header value case-insensitively', async () => {
    const { base } = await start();
    expect((await http(`${base}${SE}`, { headers: { Metadata: 'True' } })).status).toBe(200);
  });

  it('requires a valid api-version and lists the newest ones', async () => {
    const { base } = await start();
    const missing = await http(`${base}/metadata/scheduledevents`, { headers: MD });
    expect(missing.status).toBe(400);
    expect(JSON.parse(missing.body).error).toMatch(/api-version was not specified/);
    expect(JSON.parse(missing.body)['newest-versions']).toBeInstanceOf(Array);
    for (const v of ['latest', '2020-13-01', '2016-01-01', '20200701']) {
      const bad = await http(`${base}/metadata/scheduledevents?api-version=${v}`, { headers: MD });
      expect(bad.status, v).toBe(400);
      expect(JSON.parse(bad.body).error).toMatch(/api-version is invalid/);
    }
  });

  it('rejects proxied requests (X-Forwarded-For), unknown paths and wrong methods', async () => {
    const { base } = await start();
    const proxied = await http(`${base}${SE}`, { headers: { ...MD, 'X-Forwarded-For': '10.1.2.3' } });
    expect(proxied.status).toBe(400);
    expect(
      (await http(`${base}/metadata/attested/document?api-version=2020-07-01`, { headers: MD })).status,
    ).toBe(404);
    expect((await http(`${base}/`, { headers: MD })).status).toBe(404);
    const post = await http(`${base}/metadata/instance?api-version=2021-02-01`, {
      method: 'POST',
      headers: MD,
      body: '{}',
    });
    expect(post.status).toBe(405);
    expect(post.headers.allow).toBe('GET');
    const del = await http(`${base}${SE}`, { method: 'DELETE', headers: MD });
    expect(del.status).toBe(405);
  });

  it('serves an empty document when nothing is scheduled', async () => {
    const { base } = await start();
    const res = await getDoc(base);
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    expect(res.doc).toEqual({ DocumentIncarnation: 1, Events: [] });
  });

  it('puts an ETag on every document and answers 304 to a matching If-None-Match', async () => {
    const { base, emu } = await start({ scenario: 'freeze' });
    const first = await getDoc(base);
    const etag = first.headers.etag as string;
    expect(etag).toMatch(/^".+"$/);
    const again = await getDoc(base, { 'If-None-Match': etag });
    expect(again.status).toBe(304);
    expect(again.body).toBe('');
    expect(again.headers.etag).toBe(etag);
    expect((await getDoc(base, { 'If-None-Match': `"other", W/${etag}` })).status).toBe(304);
    expect((await getDoc(base, { 'If-None-Match': '"stale"' })).status).toBe(200);
    emu.advance(900_000); // NotBefore passes: the Freeze starts
    const changed = await getDoc(base, { 'If-None-Match': etag });
    expect(changed.status).toBe(200);
    expect(changed.headers.etag).not.toBe(etag);
    const inst = await http(`${base}/metadata/instance?api-version=2021-02-01`, { headers: MD });
    expect(inst.headers.etag).toMatch(/^".+"$/);
    const inst304 = await http(`${base}/metadata/instance?api-version=2021-02-01`, {
      headers: { ...MD, 'If-None-Match': inst.headers.etag as string },
    });
    expect(inst304.status).toBe(304);
  });

  it('increments DocumentIncarnation on every change and only then', async () => {
    const { base, emu } = await start({ scenario: 'reschedule' });
    const seen: number[] = [];
    const record = async () => seen.push((await getDoc(base)).doc?.DocumentIncarnation as number);
    await record();
    await record(); // no change: same incarnation
    emu.advance(120_000); // reschedule step
    await record();
    emu.advance(60_000); // nothing due
    await record();
    emu.advanceToNext(); // starts at the new NotBefore
    await record();
    emu.advanceToNext(); // ends
    await record();
    expect(seen[0]).toBe(seen[1]);
    expect(seen[2]).toBe((seen[1] as number) + 1);
    expect(seen[3]).toBe(seen[2]);
    expect(seen[4]).toBe((seen[3] as number) + 1);
    expect(seen[5]).toBe((seen[4] as number) + 1);
    expect(emu.nextChangeAt()).toBeNull();
  });

  it('serves NotBefore in RFC 1123 by default, ISO 8601 on request, blank once Started', async () => {
    const rfc = await start({ scenario: 'freeze' });
    const ev = (await getDoc(rfc.base)).doc?.Events[0];
    expect(ev).toMatchObject({
      EventType: 'Freeze',
      EventStatus: 'Scheduled',
      ResourceType: 'VirtualMachine',
      Resources: ['vmss-se-emulated_0'],
      EventSource: 'Platform',
      DurationInSeconds: 5,
      NotBefore: new Date(T0 + 900_000).toUTCString(),
    });
    expect(ev?.NotBefore).toMatch(/^[A-Z][a-z]{2}, \d{2} [A-Z][a-z]{2} \d{4} \d{2}:\d{2}:\d{2} GMT$/);
    expect(ev?.EventId).toMatch(/^[0-9A-F]{8}-[0-9A-F]{4}-4[0-9A-F]{3}-[89AB][0-9A-F]{3}-[0-9A-F]{12}$/);
    const iso = await start({ scenario: 'freeze', notBeforeFormat: 'iso' });
    expect((await getDoc(iso.base)).doc?.Events[0]?.NotBefore).toBe('2026-01-05T10:15:00Z');
    iso.emu.advance(900_000);
    expect((await getDoc(iso.base)).doc?.Events[0]).toMatchObject({ EventStatus: 'Started', NotBefore: '' });
  });

  it('scales scenario times by the speed factor', async () => {
    const { base, emu } = await start({ scenario: 'freeze', speed: 60 });
    expect((await getDoc(base)).doc?.Events[0]?.NotBefore).toBe(new Date(T0 + 15_000).toUTCString());
    emu.advance(15_000);
    expect((await getDoc(base)).doc?.Events[0]?.EventStatus).toBe('Started');
    emu.advance(1_000); // startedFor 60 s / 60
    expect((await getDoc(base)).doc?.Events).toEqual([]);
  });

  it('drops fields that older api-versions do not have', async () => {
    const { base } = await start({ scenario: 'freeze' });
    const old = await http(`${base}/metadata/scheduledevents?api-version=2019-01-01`, { headers: MD });
    const ev = JSON.parse(old.body).Events[0];
    expect(Object.keys(ev).sort()).toEqual([
      'EventId',
      'EventStatus',
      'EventType',
      'NotBefore',
      'ResourceType',
      'Resources',
    ]);
    const mid = await http(`${base}/metadata/scheduledevents?api-version=2019-08-01`, { headers: MD });
    expect(JSON.parse(mid.body).Events[0]).toHaveProperty('EventSource');
    expect(JSON.parse(mid.body).Events[0]).not.toHaveProperty('DurationInSeconds');
  });

  it('starts a Scheduled event by itself when NotBefore passes without approval', async () => {
    const { base, emu } = await start({ scenario: 'reboot' });
    emu.advance(899_000);
    expect((await getDoc(base)).doc?.Events[0]?.EventStatus).toBe('Scheduled');
    emu.advance(1_000);
    expect((await getDoc(base)).doc?.Events[0]?.EventStatus).toBe('Started');
    expect(emu.history().map((h) => [h.change, h.cause])).toEqual([
      ['scheduled', 'scenario'],
      ['started', 'notBefore'],
    ]);
    expect(emu.approvals()).toEqual([]);
  });
});

describe('IMDS emulator: approvals', () => {
  it('POST StartRequests starts a Scheduled event at once, answers 200 again for the same id, and records it', async () => {
    const { base, emu } = await start({ scenario: 'redeploy' });
    const before = (await getDoc(base)).doc;
    const id = before?.Events[0]?.EventId as string;
    const res = await approve(base, [id]);
    expect(res.status).toBe(200);
    const after = (await getDoc(base)).doc;
    expect(after?.Events[0]).toMatchObject({ EventId: id, EventStatus: 'Started', NotBefore: '' });
    expect(after?.DocumentIncarnation).toBe((before?.DocumentIncarnation as number) + 1);
    expect((await approve(base, [id.toLowerCase()])).status).toBe(200);
    expect((await getDoc(base)).doc?.DocumentIncarnation).toBe(after?.DocumentIncarnation);
    const approvals = emu.approvals();
    expect(approvals).toHaveLength(2);
    expect(approvals[0]).toMatchObject({
      outcome: 'accepted',
      client: '127.0.0.1',
      effects: [{ eventId: id, before: 'Scheduled' }],
    });
    expect(approvals[1]).toMatchObject({
      outcome: 'accepted',
      effects: [{ eventId: id, before: 'Started' }],
    });
    // The approval started the event now: it ends startedFor (600 s) later, not 600 s after NotBefore.
    emu.advance(600_000);
    expect((await getDoc(base)).doc?.Events).toEqual([]);
    // Still known after it ended: 200.
    expect((await approve(base, [id])).status).toBe(200);
    expect(emu.approvals()[2]?.effects).toEqual([{ eventId: id, before: 'ended' }]);
  });

  it('answers 400 to a malformed body or an unknown id, and applies nothing', async () => {
    const { base, emu } = await start({ scenario: 'reboot' });
    const id = (await getDoc(base)).doc?.Events[0]?.EventId as string;
    const post = (body: string) =>
      http(`${base}${SE}`, { method: 'POST', headers: { ...MD, 'Content-Type': 'application/json' }, body });
    for (const body of [
      '',
      'not json',
      '[]',
      '{}',
      '{"StartRequests":{}}',
      '{"StartRequests":[{"EventId":1}]}',
      '{"StartRequests":["x"]}',
    ]) {
      const res = await post(body);
      expect(res.status, body).toBe(400);
      expect(JSON.parse(res.body).error).toMatch(/^Bad request/);
    }
    const unknown = await approve(base, [id, '00000000-0000-4000-8000-000000000000']);
    expect(unknown.status).toBe(400);
    expect((await getDoc(base)).doc?.Events[0]?.EventStatus).toBe('Scheduled');
    expect(emu.approvals()).toEqual([expect.objectContaining({ outcome: 'rejected' })]);
  });

  it('an approval releases the event for every VM in Resources (one event, one state)', async () => {
    const { base, emu } = await start({ scenario: 'overlap' });
    emu.advance(60_000);
    const reboot = (await getDoc(base)).doc?.Events.find((e) => e.EventType === 'Reboot');
    expect(reboot?.Resources).toEqual(['vmss-se-emulated_0', 'vmss-se-emulated_1']);
    expect((await approve(base, [reboot?.EventId as string])).status).toBe(200);
    const doc = (await getDoc(base)).doc;
    expect(doc?.Events.map((e) => [e.EventType, e.EventStatus])).toEqual([
      ['Freeze', 'Scheduled'],
      ['Reboot', 'Started'],
    ]);
  });
});

describe('IMDS emulator: instance metadata', () => {
  it('describes a uniform scale-set instance by default', async () => {
    const { base } = await start();
    const res = await http(`${base}/metadata/instance?api-version=2021-02-01`, { headers: MD });
    const compute = JSON.parse(res.body).compute;
    expect(compute).toMatchObject({
      name: 'vmss-se-emulated_0',
      vmScaleSetName: 'vmss-se-emulated',
      priority: 'Regular',
      osType: 'Linux',
      location: 'westeurope',
      zone: '1',
      resourceId: expect.stringMatching(/\/virtualMachineScaleSets\/vmss-se-emulated\/virtualMachines\/0$/),
    });
    for (const v of Object.values(compute)) if (typeof v !== 'object') expect(typeof v).toBe('string');
    const only = await http(`${base}/metadata/instance/compute?api-version=2021-02-01`, { headers: MD });
    expect(JSON.parse(only.body)).toEqual(compute);
    const leaf = await http(`${base}/metadata/instance/compute/vmId?api-version=2021-02-01&format=text`, {
      headers: MD,
    });
    expect(leaf).toMatchObject({ status: 200, body: compute.vmId });
    const leafJson = await http(`${base}/metadata/instance/compute/vmId?api-version=2021-02-01`, {
      headers: MD,
    });
    expect(leafJson.status).toBe(400);
    const missing = await http(`${base}/metadata/instance/compute/nope?api-version=2021-02-01`, {
      headers: MD,
    });
    expect(missing.status).toBe(404);
  });

  it('takes identity from options and derives the rest', async () => {
    const { base, emu } = await start({
      scenario: 'overlap',
      identity: { vmScaleSetName: 'web', instanceId: '12', priority: 'Spot', zone: '' },
    });
    const compute = JSON.parse(
      (await http(`${base}/metadata/instance?api-version=2021-02-01`, { headers: MD })).body,
    ).compute;
    expect(compute).toMatchObject({
      name: 'web_12',
      priority: 'Spot',
      evictionPolicy: 'Deallocate',
      zone: '',
    });
    expect(compute.osProfile.computerName).toBe('web00000c');
    emu.advance(60_000);
    expect((await getDoc(base)).doc?.Events[1]?.Resources).toEqual(['web_12', 'web_1']);
    const standalone = await start({ identity: { name: 'db-01' } });
    const c2 = JSON.parse(
      (await http(`${standalone.base}/metadata/instance/compute?api-version=2021-02-01`, { headers: MD }))
        .body,
    );
    expect(c2).toMatchObject({ name: 'db-01', vmScaleSetName: '' });
    expect(c2.resourceId).toMatch(/\/virtualMachines\/db-01$/);
  });
});

describe('IMDS emulator: scenarios over time', () => {
  it('loops with fresh EventIds when asked, or stays', async () => {
    const { base, emu } = await start({ scenario: 'cancel', after: 'loop' });
    const first = (await getDoc(base)).doc?.Events[0]?.EventId;
    emu.advance(300_000); // canceled
    expect((await getDoc(base)).doc?.Events).toEqual([]);
    emu.advance(60_000); // loop period = last step (300) + 60
    const second = (await getDoc(base)).doc?.Events[0]?.EventId;
    expect(second).toBeDefined();
    expect(second).not.toBe(first);
    const stay = await start({ scenario: 'cancel' });
    stay.emu.advance(3_600_000);
    expect((await getDoc(stay.base)).doc?.Events).toEqual([]);
    expect(stay.emu.nextChangeAt()).toBeNull();
  });

  it('applies everything that happened during a long jump, in order', async () => {
    const { emu } = await start({ scenario: 'demo', speed: 1 });
    emu.advance(24 * 3_600_000);
    expect(emu.events()).toEqual([]);
    const h = emu.history();
    for (let i = 1; i < h.length; i++)
      expect((h[i] as { atMs: number }).atMs).toBeGreaterThanOrEqual((h[i - 1] as { atMs: number }).atMs);
    expect(h.map((e) => e.incarnation)).toEqual(h.map((_, i) => i + 2));
  });
});
