import { afterEach, describe, expect, it } from 'vitest';
import {
  createManualClock,
  type ImdsEmulator,
  type ImdsEmulatorOptions,
  startImdsEmulator,
} from '../../../src/emulators/imds/index.js';
import { getDoc, http, MD, SE } from './http.js';

const running: ImdsEmulator[] = [];
async function start(options: ImdsEmulatorOptions = {}) {
  const clock = createManualClock(Date.UTC(2026, 0, 5, 10, 0, 0));
  const emu = await startImdsEmulator({ clock, seed: 'faults', scenario: 'freeze', ...options });
  running.push(emu);
  return { emu, clock, base: emu.url };
}
afterEach(async () => {
  await Promise.all(running.splice(0).map((e) => e.close()));
});

describe('IMDS emulator: faults', () => {
  it.each([410, 429, 500])('answers %i for exactly N requests, then recovers', async (status) => {
    const { base, emu } = await start();
    emu.addFault({ kind: 'status', status, count: 2 });
    const a = await getDoc(base);
    const b = await getDoc(base);
    const c = await getDoc(base);
    expect([a.status, b.status, c.status]).toEqual([status, status, 200]);
    expect(JSON.parse(a.body)).toHaveProperty('error');
    expect(emu.requests().map((r) => r.fault)).toEqual(['status', 'status', null]);
  });

  it('a fault for one route leaves the other alone; route any hits both', async () => {
    const { base, emu } = await start();
    emu.addFault({ kind: 'status', status: 500, route: 'instance' });
    expect((await getDoc(base)).status).toBe(200);
    expect((await http(`${base}/metadata/instance?api-version=2021-02-01`, { headers: MD })).status).toBe(
      500,
    );
    emu.addFault({ kind: 'status', status: 503, route: 'any', count: 2 });
    expect((await http(`${base}/metadata/instance?api-version=2021-02-01`, { headers: MD })).status).toBe(
      503,
    );
    expect((await getDoc(base)).status).toBe(503);
    expect((await getDoc(base)).status).toBe(200);
  });

  it('header and api-version errors do not consume faults', async () => {
    const { base, emu } = await start();
    emu.addFault({ kind: 'status', status: 500 });
    expect((await http(`${base}${SE}`)).status).toBe(400);
    expect((await getDoc(base)).status).toBe(500);
  });

  it('adds latency and then answers normally', async () => {
    const { base, emu } = await start();
    emu.addFault({ kind: 'latency', ms: 150 });
    const res = await getDoc(base);
    expect(res.status).toBe(200);
    expect(res.doc?.Events).toHaveLength(1);
    expect(emu.requests()[0]?.fault).toBe('latency');
  });

  it('latency combines with the fault behind it', async () => {
    const { base, emu } = await start();
    emu.addFault({ kind: 'latency', ms: 50 });
    emu.addFault({ kind: 'status', status: 410 });
    expect((await getDoc(base)).status).toBe(410);
    expect(emu.requests()[0]?.fault).toBe('latency+status');
  });

  it('hangs a response until the client gives up, then serves the next one', async () => {
    const { base, emu } = await start();
    emu.addFault({ kind: 'hang' });
    await expect(http(`${base}${SE}`, { headers: MD, timeoutMs: 300 })).rejects.toThrow(/client timeout/);
    expect((await getDoc(base)).status).toBe(200);
    expect(emu.requests()[0]).toMatchObject({ fault: 'hang', status: 0, done: false });
  });

  it('close() does not wait for hanging responses', async () => {
    const { base, emu } = await start();
    emu.addFault({ kind: 'hang', count: 3 });
    const pending = http(`${base}${SE}`, { headers: MD, timeoutMs: 20_000 }).catch((e: Error) => e);
    for (let i = 0; i < 100 && emu.requests().length === 0; i++) await new Promise((r) => setTimeout(r, 10));
    await emu.close();
    expect(await pending).toBeInstanceOf(Error);
  });

  it('drops the connection without an answer', async () => {
    const { base, emu } = await start();
    emu.addFault({ kind: 'drop' });
    await expect(getDoc(base)).rejects.toThrow(/socket hang up|ECONNRESET/);
    expect((await getDoc(base)).status).toBe(200);
  });

  it('serves malformed JSON and a valid document of the wrong shape', async () => {
    const { base, emu } = await start();
    emu.addFault({ kind: 'malformed' });
    emu.addFault({ kind: 'wrong-shape' });
    const bad = await http(`${base}${SE}`, { headers: MD });
    expect(bad.status).toBe(200);
    expect(() => JSON.parse(bad.body)).toThrow();
    const shape = await http(`${base}${SE}`, { headers: MD });
    expect(typeof JSON.parse(shape.body).DocumentIncarnation).toBe('string');
    expect((await getDoc(base)).doc?.Events).toHaveLength(1);
  });

  it('truncates a body below its announced Content-Length', async () => {
    const { base, emu } = await start();
    emu.addFault({ kind: 'truncated' });
    await expect(getDoc(base)).rejects.toThrow(/aborted|incomplete|ECONNRESET|socket hang up/);
    expect((await getDoc(base)).status).toBe(200);
  });

  it('delays the first call by the enrolment delay scaled by the speed factor, once', async () => {
    const { base, emu } = await start({ enrolmentDelaySeconds: 120, speed: 1200 }); // 100 ms of wall time
    expect((await getDoc(base)).status).toBe(200);
    expect((await getDoc(base)).status).toBe(200);
    expect(emu.requests().map((r) => r.fault)).toEqual(['enrolment', null]);
    emu.addFault({ kind: 'enrolment', seconds: 60 });
    expect((await getDoc(base)).status).toBe(200);
    expect(emu.requests()[2]?.fault).toBe('enrolment');
  });

  it('arms a fault from a scenario step at its time (scaled by the speed factor)', async () => {
    const { base, emu } = await start({
      speed: 10,
      scenario: {
        name: 'flaky',
        description: '',
        steps: [{ at: 60, action: 'fault', fault: { kind: 'status', status: 410, count: 2 } }],
      },
    });
    expect((await getDoc(base)).status).toBe(200);
    emu.advance(5_999);
    expect((await getDoc(base)).status).toBe(200);
    emu.advance(1);
    expect((await getDoc(base)).status).toBe(410);
    expect((await getDoc(base)).status).toBe(410);
    expect((await getDoc(base)).status).toBe(200);
  });

  it('validates fault specs', () => {
    return start().then(({ emu }) => {
      expect(() => emu.addFault({ kind: 'status' } as never)).toThrow(/fault\.status: expected a number/);
      expect(() => emu.addFault({ kind: 'enrolment', seconds: 500 })).toThrow(
        /fault\.seconds: must be ≤ 120/,
      );
      expect(() => emu.addFault({ kind: 'explode' } as never)).toThrow(/fault\.kind: expected one of/);
      expect(() => emu.addFault({ kind: 'drop', ms: 3 } as never)).toThrow(/fault\.ms: unknown field/);
    });
  });
});

describe('IMDS emulator: rate limit', () => {
  it('allows N requests per second per client, then 429, and recovers after a second', async () => {
    const { base, emu } = await start({ rateLimit: 5 });
    const statuses: number[] = [];
    for (let i = 0; i < 8; i++) statuses.push((await getDoc(base)).status);
    expect(statuses).toEqual([200, 200, 200, 200, 200, 429, 429, 429]);
    // Another client address (the loopback net is a /8) has its own budget.
    const other = await http(`${base}${SE}`, { headers: MD, localAddress: '127.0.0.2' });
    expect(other.status).toBe(200);
    emu.advance(1_000);
    expect((await getDoc(base)).status).toBe(200);
    expect(emu.requests().filter((r) => r.fault === 'rate-limit')).toHaveLength(3);
  });

  it('is off by default', async () => {
    const { base } = await start();
    for (let i = 0; i < 12; i++) expect((await getDoc(base)).status).toBe(200);
  });
});
