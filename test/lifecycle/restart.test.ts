/**
 * Restarts through the real state store: what a daemon does across a stop/start, including a
 * deleted or corrupt state file and a crash between spooling records and committing state.
 */
import { mkdtemp, readdir, rm, unlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { ScheduledEventsDocument } from '../../src/imds/types.js';
import { EmittedKeys } from '../../src/lifecycle/emitted-keys.js';
import type { LifecycleRecord } from '../../src/lifecycle/record.js';
import { STATE_FILE_NAME, StateStore } from '../../src/lifecycle/state-store.js';
import { doc, ev, Harness, T0 } from './helpers.js';

/** One run of the daemon: loads state at start, persists after every document it processes. */
class Daemon {
  readonly harness: Harness;
  readonly store: StateStore;

  private constructor(harness: Harness, store: StateStore) {
    this.harness = harness;
    this.store = store;
  }

  static async start(stateDir: string, now: number): Promise<Daemon> {
    const store = new StateStore(stateDir, { now: () => now });
    const saved = await store.load();
    const keys = new EmittedKeys({ now: () => now });
    if (saved !== null) keys.load(saved.emittedKeys);
    return new Daemon(new Harness(saved?.tracker, keys), store);
  }

  /** Processes a document; `commit: false` is a crash after spooling, before the state is saved. */
  async poll(d: ScheduledEventsDocument, at: number, commit = true): Promise<LifecycleRecord[]> {
    const before = this.harness.state;
    const records = this.harness.feed(d, at);
    if (commit) await this.store.save({ tracker: this.harness.state, emittedKeys: this.harness.keys.dump() });
    else this.harness.state = before;
    return records;
  }
}

const E1 = ev({ EventId: 'E1', EventType: 'Freeze', Resources: ['WestNO_0'] });
const E2 = ev({ EventId: 'E2', EventType: 'Reboot', Resources: ['WestNO_0'] });
const E3 = ev({ EventId: 'E3', EventType: 'Redeploy', Resources: ['WestNO_0'] });
const started = (e: typeof E1) => ({ ...e, EventStatus: 'Started', NotBefore: '' });
const summary = (rs: LifecycleRecord[]) => rs.map((r) => [r.phase, r.eventId, r.inferred, r.gapSeconds]);

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'se-restart-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('restart with persisted state', () => {
  it('re-emits nothing already emitted, and reports what ended while down as inferred Completed', async () => {
    const a = await Daemon.start(dir, T0);
    expect(summary(await a.poll(doc(1, E1, E2), T0))).toEqual([
      ['Scheduled', 'E1', false, 0],
      ['Scheduled', 'E2', false, 0],
    ]);
    expect(summary(await a.poll(doc(2, started(E1), E2), T0 + 1000))).toEqual([['Started', 'E1', false, 0]]);
    // Stopped at T0+1s. The same document right after the restart: nothing is new.
    const b = await Daemon.start(dir, T0 + 3000);
    expect(await b.poll(doc(2, started(E1), E2), T0 + 3000)).toEqual([]);
    // Down again for two minutes; meanwhile E1 finished, E2 went away, E3 was scheduled.
    const c = await Daemon.start(dir, T0 + 123_000);
    expect(summary(await c.poll(doc(5, E3), T0 + 123_000))).toEqual([
      ['Completed', 'E1', true, 120],
      ['Completed', 'E2', true, 120],
      ['Scheduled', 'E3', false, 0],
    ]);
    expect(c.harness.records.every((r) => r.eventStatus === '' || r.phase === 'Scheduled')).toBe(true);
  });

  it('a crash after spooling but before committing state re-derives the same record (same recordId)', async () => {
    const a = await Daemon.start(dir, T0);
    await a.poll(doc(1, E1), T0);
    const spooled = await a.poll(doc(2, started(E1)), T0 + 1000, false);
    expect(summary(spooled)).toEqual([['Started', 'E1', false, 0]]);
    const b = await Daemon.start(dir, T0 + 30_000);
    const again = await b.poll(doc(2, started(E1)), T0 + 30_000);
    expect(summary(again)).toEqual([['Started', 'E1', false, 0]]);
    expect(again[0]?.recordId).toBe(spooled[0]?.recordId);
  });
});

describe('restart without usable state', () => {
  it('after the state file was deleted, repeats carry the same recordIds (deduplicated downstream)', async () => {
    const a = await Daemon.start(dir, T0);
    const first = [
      ...(await a.poll(doc(1, E1, E2), T0)),
      ...(await a.poll(doc(2, started(E1), E2), T0 + 1000)),
    ];
    await unlink(join(dir, STATE_FILE_NAME));
    const b = await Daemon.start(dir, T0 + 60_000);
    const repeat = await b.poll(doc(2, started(E1), E2), T0 + 60_000);
    // E1 is now first seen as Started, E2 as Scheduled: both repeats of records already sent.
    expect(summary(repeat)).toEqual([
      ['Started', 'E1', false, 0],
      ['Scheduled', 'E2', false, 0],
    ]);
    const idOf = (rs: LifecycleRecord[], phase: string, id: string) =>
      rs.find((r) => r.phase === phase && r.eventId === id)?.recordId;
    expect(idOf(repeat, 'Started', 'E1')).toBe(idOf(first, 'Started', 'E1'));
    expect(idOf(repeat, 'Scheduled', 'E2')).toBe(idOf(first, 'Scheduled', 'E2'));
    expect(new Set(repeat.map((r) => r.recordId)).size).toBe(2);
    // From there on it is tracked again: nothing more until something changes.
    expect(await b.poll(doc(2, started(E1), E2), T0 + 61_000)).toEqual([]);
    expect(summary(await b.poll(doc(3, E2), T0 + 62_000))).toEqual([['Completed', 'E1', false, 0]]);
  });

  it('a corrupt state file is moved aside and the daemon starts afresh', async () => {
    const a = await Daemon.start(dir, T0);
    const first = await a.poll(doc(1, E1), T0);
    await writeFile(join(dir, STATE_FILE_NAME), '\u0000\u0000garbage');
    const b = await Daemon.start(dir, T0 + 5000);
    const repeat = await b.poll(doc(1, E1), T0 + 5000);
    expect(repeat.map((r) => r.recordId)).toEqual(first.map((r) => r.recordId));
    expect((await readdir(dir)).sort()).toEqual([
      STATE_FILE_NAME,
      expect.stringMatching(/^state\.json\.corrupt-/),
    ]);
  });
});
