/**
 * Every built-in scenario, end to end: the real `se-shipper run` (child process, real HTTP) polls
 * the emulator; the test jumps the emulator's manual clock from one change to the next (real
 * Azure timings, no sleeping through them), waits until the shipper has polled the new state,
 * approves some events as a drain hook would, and checks the shipper's NDJSON on stdout.
 *
 * Needs the build (`npm test` builds first). SE_SHIPPER_CLI may point at another build of main.js.
 */
import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createManualClock,
  type HistoryEntry,
  type ImdsEmulator,
  LIFECYCLE_PHASE_OF_CHANGE,
  startImdsEmulator,
} from '../../../src/emulators/imds/index.js';
import { approve, getDoc, http, MD } from './http.js';

const CLI = resolve(process.env.SE_SHIPPER_CLI ?? 'dist/cli/main.js');
const POLL_MS = 200;

interface LifecycleRecord {
  recordType: string;
  recordId: string;
  phase: string;
  eventId: string;
  eventType: string;
  eventStatus: string;
  affectsThisVm: boolean | null;
  vmName: string;
  vmScaleSetName: string;
  vmInstanceId: string;
  notBefore: string | null;
  inferred: boolean;
  resources: string[];
}

const PHASE_OF = LIFECYCLE_PHASE_OF_CHANGE;

function waitFor<T>(what: string, probe: () => T | undefined, timeoutMs = 15_000): Promise<T> {
  return new Promise((resolvePromise, reject) => {
    const deadline = Date.now() + timeoutMs;
    const tick = () => {
      const v = probe();
      if (v !== undefined) return resolvePromise(v);
      if (Date.now() > deadline) return reject(new Error(`timed out waiting for ${what}`));
      setTimeout(tick, 25);
    };
    tick();
  });
}

describe.sequential('built-in scenarios against the real shipper (scope self)', () => {
  let emu: ImdsEmulator;
  let shipper: ChildProcessWithoutNullStreams;
  let stateDir: string;
  let stdout = '';
  let stderr = '';
  const records: LifecycleRecord[] = [];
  const notBefores = new Map<string, number[]>(); // eventId → NotBefore values served while Scheduled
  let exit: Promise<number | null>;

  beforeAll(async () => {
    if (!existsSync(CLI)) throw new Error(`${CLI} is missing: run \`npm run build\` first (npm test does)`);
    emu = await startImdsEmulator({ clock: createManualClock(), seed: 'e2e', speed: 1 });
    stateDir = await mkdtemp(join(tmpdir(), 'imds-e2e-state-'));
    shipper = spawn(
      process.execPath,
      [
        CLI,
        'run',
        '--imds-endpoint',
        emu.url,
        '--poll-interval',
        String(POLL_MS),
        '--state-dir',
        stateDir,
        '--scope',
        'self',
        '--sink',
        'stdout',
        '--log-level',
        'warn',
      ],
      { stdio: ['pipe', 'pipe', 'pipe'], env: { ...process.env, NO_PROXY: '127.0.0.1' } },
    );
    exit = new Promise((r) => shipper.on('exit', (code) => r(code)));
    shipper.stdout.on('data', (c: Buffer) => {
      stdout += c.toString('utf8');
      let nl = stdout.indexOf('\n');
      while (nl >= 0) {
        const line = stdout.slice(0, nl).trim();
        stdout = stdout.slice(nl + 1);
        if (line !== '') {
          const rec = JSON.parse(line) as LifecycleRecord;
          if (rec.recordType === 'lifecycle') records.push(rec);
        }
        nl = stdout.indexOf('\n');
      }
    });
    shipper.stderr.on('data', (c: Buffer) => {
      stderr += c.toString('utf8');
    });
    // The shipper is up once it has read the identity and polled scheduled events.
    await waitFor('the shipper to poll the emulator', () =>
      emu.requests().some((r) => r.route === 'instance' && r.status === 200) &&
      emu.requests().some((r) => r.route === 'scheduledevents' && r.status === 200)
        ? true
        : undefined,
    );
  });

  afterAll(async () => {
    if (shipper && shipper.exitCode === null) {
      shipper.kill('SIGTERM');
      const code = await Promise.race([exit, new Promise((r) => setTimeout(() => r('timeout'), 10_000))]);
      if (code === 'timeout') shipper.kill('SIGKILL');
    }
    await emu?.close();
    if (stateDir) await rm(stateDir, { recursive: true, force: true });
  });

  /** Waits until the shipper has polled the current state (a poll that arrived after now). */
  async function shipperSaw(): Promise<void> {
    await emu.waitForPoll(emu.lastSeq(), 10_000);
  }

  function snapshotNotBefores() {
    for (const ev of emu.events()) {
      if (ev.status !== 'Scheduled' || ev.notBeforeMs === null) continue;
      const list = notBefores.get(ev.eventId) ?? [];
      if (list[list.length - 1] !== ev.notBeforeMs) list.push(ev.notBeforeMs);
      notBefores.set(ev.eventId, list);
    }
  }

  /**
   * Loads a scenario and walks it change by change; `approveRefs` are approved over HTTP (POST
   * StartRequests, as a drain hook does) as soon as they are Scheduled. Returns the history.
   */
  async function drive(
    name: string,
    approveRefs: string[] = [],
    betweenChanges?: () => Promise<void>,
  ): Promise<HistoryEntry[]> {
    const historyStart = emu.history().length;
    await emu.loadScenario(name, { speed: 1 });
    const approved = new Set<string>();
    for (let guard = 0; guard < 100; guard++) {
      snapshotNotBefores();
      await shipperSaw();
      if (betweenChanges) {
        await betweenChanges();
        await shipperSaw(); // a good poll again before the next change
      }
      for (const ev of emu.events()) {
        if (ev.status === 'Scheduled' && approveRefs.includes(ev.ref) && !approved.has(ev.eventId)) {
          approved.add(ev.eventId);
          const res = await approve(emu.url, [ev.eventId]);
          expect(res.status).toBe(200);
          await shipperSaw();
        }
      }
      if (emu.advanceToNext() === null) break;
    }
    expect(emu.events()).toEqual([]);
    expect(approved.size).toBe(approveRefs.length);
    return emu.history().slice(historyStart);
  }

  /** Expected phases per EventId of this VM, derived from what the emulator did. */
  function expectedFrom(history: HistoryEntry[]): Map<string, string[]> {
    const out = new Map<string, string[]>();
    for (const h of history.filter((x) => x.affectsThisVm && x.cause !== 'load')) {
      out.set(h.eventId, [...(out.get(h.eventId) ?? []), PHASE_OF[h.change]]);
    }
    return out;
  }

  async function recordsFor(history: HistoryEntry[], expected: Map<string, string[]>) {
    const ids = new Set(history.map((h) => h.eventId.toLowerCase()));
    const total = [...expected.values()].reduce((n, p) => n + p.length, 0);
    const mine = () => records.filter((r) => ids.has(r.eventId.toLowerCase()));
    await waitFor(`${total} records (have ${mine().length})`, () =>
      mine().length >= total ? true : undefined,
    );
    // A few more polls: a duplicate would show up here.
    for (let i = 0; i < 3; i++) await shipperSaw();
    return mine();
  }

  function checkRecords(history: HistoryEntry[], got: LifecycleRecord[], explicit: Record<string, string[]>) {
    const expected = expectedFrom(history);
    // The test's own statement of each event's phases (by ref) must match the emulator's history.
    const byRef = new Map(history.map((h) => [h.ref, h.eventId]));
    expect(
      Object.fromEntries([...expected].map(([id, p]) => [history.find((h) => h.eventId === id)?.ref, p])),
    ).toEqual(explicit);
    // Right phases, in order, per event; none lost, none doubled.
    const actual = new Map<string, string[]>();
    for (const r of got) actual.set(r.eventId, [...(actual.get(r.eventId) ?? []), r.phase]);
    expect(Object.fromEntries(actual)).toEqual(Object.fromEntries(expected));
    expect(new Set(got.map((r) => r.recordId)).size).toBe(got.length);
    // Only this VM's events (scope self), identity stamped, nothing inferred while watched.
    for (const r of got) {
      expect(r.affectsThisVm).toBe(true);
      expect(r.resources.map((x) => x.toLowerCase())).toContain(emu.identity.name.toLowerCase());
      expect(r.vmName).toBe(emu.identity.name);
      expect(r.vmScaleSetName).toBe(emu.identity.vmScaleSetName);
      expect(r.vmInstanceId).toBe(emu.identity.instanceId);
      expect(r.inferred).toBe(false);
      expect(r.eventType).toBe(history.find((h) => h.eventId === r.eventId)?.eventType);
      const nbs = notBefores.get(r.eventId) ?? [];
      if (r.phase === 'Scheduled')
        expect(Date.parse(r.notBefore ?? '')).toBe(Math.floor((nbs[0] ?? 0) / 1000) * 1000);
      if (r.phase === 'Rescheduled') {
        expect(Date.parse(r.notBefore ?? '')).toBe(Math.floor((nbs[nbs.length - 1] ?? 0) / 1000) * 1000);
      }
      if (r.phase === 'Started') expect(r.eventStatus).toBe('Started');
    }
    // Across events, records come in the order the emulator made the changes (ties excepted).
    const timeOf = (r: LifecycleRecord) =>
      history.find((h) => h.eventId === r.eventId && PHASE_OF[h.change] === r.phase)?.atMs ?? Number.NaN;
    const times = got.map(timeOf);
    for (let i = 1; i < times.length; i++) expect(times[i]).toBeGreaterThanOrEqual(times[i - 1] as number);
    // Peer events (not this VM) produced nothing.
    for (const h of history.filter((x) => !x.affectsThisVm))
      expect(got.some((r) => r.eventId === h.eventId)).toBe(false);
    expect(byRef.size).toBeGreaterThanOrEqual(expected.size);
  }

  function checkApprovals(history: HistoryEntry[], refs: string[]) {
    for (const ref of refs) {
      const id = history.find((h) => h.ref === ref)?.eventId;
      const started = history.find((h) => h.ref === ref && h.change === 'started');
      expect(started?.cause, `${ref} started by the approval`).toBe('approval');
      expect(
        emu
          .approvals()
          .some(
            (a) =>
              a.outcome === 'accepted' && a.effects.some((e) => e.eventId === id && e.before === 'Scheduled'),
          ),
      ).toBe(true);
    }
  }

  const SSC = ['Scheduled', 'Started', 'Completed'];
  const cases: [name: string, approveRefs: string[], expected: Record<string, string[]>][] = [
    ['freeze', [], { freeze: SSC }],
    ['reboot', ['reboot'], { reboot: SSC }],
    ['redeploy', [], { redeploy: SSC }],
    ['preempt', ['preempt'], { preempt: SSC }],
    ['terminate', ['terminate'], { terminate: SSC }],
    ['cancel', [], { reboot: ['Scheduled', 'Canceled'] }],
    ['reschedule', [], { redeploy: ['Scheduled', 'Rescheduled', 'Started', 'Completed'] }],
    ['overlap', ['reboot'], { freeze: SSC, reboot: SSC }],
    ['hardware-failure', [], { reboot: ['Started', 'Completed'] }],
    ['other-vms', [], {}],
    ['idle', [], {}],
    [
      'demo',
      ['redeploy'],
      {
        freeze: SSC,
        reboot: SSC,
        redeploy: SSC,
        'canceled-reboot': ['Scheduled', 'Canceled'],
        preempt: SSC,
        terminate: SSC,
      },
    ],
  ];

  it.each(cases)('%s', async (name, approveRefs, expected) => {
    const history = await drive(name, approveRefs);
    const got = await recordsFor(history, expectedFrom(history));
    checkRecords(history, got, expected);
    checkApprovals(history, approveRefs);
    if (name === 'other-vms') expect(history.length).toBeGreaterThan(0);
  });

  it('reschedule, with IMDS faults between every change (410, 429, 500, malformed, truncated, dropped, slow)', async () => {
    const faults = [
      { kind: 'status', status: 410, count: 2 },
      { kind: 'status', status: 429 },
      { kind: 'status', status: 500 },
      { kind: 'malformed' },
      { kind: 'wrong-shape' },
      { kind: 'truncated' },
      { kind: 'drop' },
      { kind: 'latency', ms: 300 },
    ];
    let round = 0;
    const history = await drive('reschedule', [], async () => {
      // Armed over the control API, as a user's test would; one or two kinds per round.
      for (const f of [faults[round % faults.length], faults[(round + 3) % faults.length]]) {
        const res = await http(`${emu.url}/_emulator/faults`, { method: 'POST', body: JSON.stringify(f) });
        expect(res.status).toBe(200);
      }
      round += 1;
      await waitFor('the faults to be consumed', () => (emu.model.faults().length === 0 ? true : undefined));
    });
    expect(emu.requests().filter((r) => r.fault !== null).length).toBeGreaterThanOrEqual(8);
    const got = await recordsFor(history, expectedFrom(history));
    checkRecords(history, got, { redeploy: ['Scheduled', 'Rescheduled', 'Started', 'Completed'] });
  });

  it('nothing else was shipped, and the shipper stops cleanly on SIGTERM', async () => {
    const known = new Set(emu.history().map((h) => h.eventId.toLowerCase()));
    expect(records.filter((r) => !known.has(r.eventId.toLowerCase()))).toEqual([]);
    expect(new Set(records.map((r) => r.recordId)).size).toBe(records.length);
    // freeze 3, reboot 3, redeploy 3, preempt 3, terminate 3, cancel 2, reschedule 4, overlap 6,
    // hardware-failure 2, other-vms 0, idle 0, demo 17 (5 × 3 + the canceled Reboot's 2), reschedule
    // under faults 4.
    expect(records).toHaveLength(50);
    shipper.kill('SIGTERM');
    expect(await exit, stderr).toBe(0);
  });
});

describe('se-shipper emulate imds (child process)', () => {
  it('prints the ready line on stdout only, serves, and exits 0 on SIGTERM', async () => {
    if (!existsSync(CLI)) throw new Error(`${CLI} is missing: run \`npm run build\` first (npm test does)`);
    const child = spawn(
      process.execPath,
      [CLI, 'emulate', 'imds', '--port', '0', '--scenario', 'demo', '--log-level', 'info'],
      {
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
    let out = '';
    let err = '';
    child.stdout.on('data', (c: Buffer) => {
      out += c.toString('utf8');
    });
    child.stderr.on('data', (c: Buffer) => {
      err += c.toString('utf8');
    });
    try {
      const line = await waitFor('the ready line', () =>
        out.includes('\n') ? out.slice(0, out.indexOf('\n')) : undefined,
      );
      const ready = JSON.parse(line);
      expect(ready).toMatchObject({ event: 'ready', scenario: 'demo', speed: 60, host: '127.0.0.1' });
      const doc = await getDoc(ready.url);
      expect(doc.doc?.Events[0]?.EventType).toBe('Freeze');
      expect(
        (await http(`${ready.url}/metadata/instance?api-version=2021-02-01`, { headers: MD })).status,
      ).toBe(200);
      child.kill('SIGTERM');
      expect(await exited).toBe(0);
      expect(out.trim().split('\n')).toHaveLength(1);
      expect(err).toMatch(/"msg":"imds emulator listening"/);
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
    }
  });
});
