import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { EmittedKeys } from '../../src/lifecycle/emitted-keys.js';
import {
  type PersistedState,
  parseStateFile,
  STATE_FILE_NAME,
  StateStore,
} from '../../src/lifecycle/state-store.js';
import { initialTrackerState } from '../../src/lifecycle/tracker.js';
import type { LifecycleRecord } from '../../src/lifecycle/record.js';
import { doc, ev, Harness, observe, T0 } from './helpers.js';

function sample(): PersistedState {
  const tracker = observe(
    initialTrackerState(),
    doc(2, ev(), ev({ EventId: 'B', EventStatus: 'Started' })),
    T0,
  ).state;
  const keys = new EmittedKeys({ now: () => T0 });
  keys.add('c7061bac-afdc-4513-b24b-aa5f13a16123|Scheduled');
  return { tracker, emittedKeys: keys.dump() };
}

function recordingLogger() {
  const lines: { fields: Record<string, unknown>; msg: string }[] = [];
  return {
    lines,
    logger: { warn: (fields: Record<string, unknown>, msg: string) => lines.push({ fields, msg }) },
  };
}

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'se-state-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('StateStore', () => {
  it('a missing file loads as null, quietly', async () => {
    const { lines, logger } = recordingLogger();
    expect(await new StateStore(join(dir, 'not-yet'), { logger: logger as never }).load()).toBeNull();
    expect(lines).toEqual([]);
  });

  it('save then load round-trips, creates the directory, leaves no temporary files', async () => {
    const stateDir = join(dir, 'nested', 'state');
    const store = new StateStore(stateDir);
    const state = sample();
    await store.save(state);
    expect(await readdir(stateDir)).toEqual([STATE_FILE_NAME]);
    expect(await new StateStore(stateDir).load()).toEqual(state);
    const onDisk = JSON.parse(await readFile(join(stateDir, STATE_FILE_NAME), 'utf8'));
    expect(onDisk.version).toBe(1);
  });

  it('consecutive saves replace the file; the last save called wins even when not awaited in between', async () => {
    const store = new StateStore(dir);
    const states = [1, 2, 3, 4, 5].map((i) => ({
      tracker: { ...initialTrackerState(), lastObservedAt: T0 + i, lastIncarnation: i },
      emittedKeys: { version: 1 as const, entries: [] },
    }));
    await Promise.all(states.map((s) => store.save(s)));
    expect((await store.load())?.tracker.lastIncarnation).toBe(5);
    expect(await readdir(dir)).toEqual([STATE_FILE_NAME]);
  });

  it('a corrupt file is logged at warn, moved aside with a timestamp, and loads as null', async () => {
    await writeFile(join(dir, STATE_FILE_NAME), '{"version":1,"tracker":{"vers');
    const { lines, logger } = recordingLogger();
    const store = new StateStore(dir, { logger: logger as never, now: () => T0 });
    expect(await store.load()).toBeNull();
    expect(lines.map((l) => l.msg)).toEqual([
      'state file corrupt; starting with empty lifecycle state',
      'moved the unusable state file aside',
    ]);
    expect(await readdir(dir)).toEqual([`${STATE_FILE_NAME}.corrupt-2022-04-11T22-10-00-000Z`]);
    // The daemon carries on: the next save writes a fresh file.
    await store.save(sample());
    expect(await store.load()).toEqual(sample());
  });

  it('valid JSON of the wrong shape counts as corrupt too', async () => {
    for (const text of [
      'null',
      '[]',
      '{"version":2}',
      JSON.stringify({ version: 1, tracker: {}, emittedKeys: {} }),
    ]) {
      expect(parseStateFile(text), text).toBeNull();
    }
    await writeFile(join(dir, STATE_FILE_NAME), JSON.stringify({ version: 1, tracker: { version: 1 } }));
    expect(await new StateStore(dir).load()).toBeNull();
    expect((await readdir(dir)).filter((n) => n.includes('.corrupt-'))).toHaveLength(1);
  });

  it('an unreadable state path (a directory) is logged, moved aside, and loads as null', async () => {
    await mkdir(join(dir, STATE_FILE_NAME));
    const { lines, logger } = recordingLogger();
    expect(await new StateStore(dir, { logger: logger as never, now: () => T0 }).load()).toBeNull();
    expect(lines[0]?.msg).toBe('state file unreadable; starting with empty lifecycle state');
    expect(await readdir(dir)).toEqual([`${STATE_FILE_NAME}.corrupt-2022-04-11T22-10-00-000Z`]);
  });

  it('temporary files left by a crash mid-write are removed on load; the old state is intact', async () => {
    const store = new StateStore(dir);
    await store.save(sample());
    await writeFile(join(dir, `${STATE_FILE_NAME}.tmp-999-1`), '{"half":');
    expect(await store.load()).toEqual(sample());
    expect(await readdir(dir)).toEqual([STATE_FILE_NAME]);
  });

  it('a failed save rejects and leaves the previous file in place', async () => {
    const store = new StateStore(dir);
    await store.save(sample());
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    await expect(
      store.save({ tracker: cyclic as never, emittedKeys: { version: 1, entries: [] } }),
    ).rejects.toThrow();
    expect(await store.load()).toEqual(sample());
    // And the store keeps working afterwards.
    await store.save(sample());
  });
});

describe('pending records (write-ahead of the spool)', () => {
  const pendingRecord = () => {
    const h = new Harness();
    return h.feed(doc(1, ev()), T0)[0] as LifecycleRecord;
  };

  it('round-trip with the state, and are left out of the file when empty', async () => {
    const store = new StateStore(dir);
    const record = pendingRecord();
    await store.save({ ...sample(), pending: [record] });
    expect((await store.load())?.pending).toEqual([record]);
    await store.save({ ...sample(), pending: [] });
    const text = await readFile(join(dir, STATE_FILE_NAME), 'utf8');
    expect(text).not.toContain('"pending"');
    expect((await store.load())?.pending).toBeUndefined();
  });

  it('a pending list that is not lifecycle records makes the file corrupt', () => {
    const base = { version: 1, ...sample() };
    expect(parseStateFile(JSON.stringify({ ...base, pending: 'x' }))).toBeNull();
    expect(
      parseStateFile(JSON.stringify({ ...base, pending: [{ recordType: 'heartbeat', recordId: 'a' }] })),
    ).toBeNull();
    expect(parseStateFile(JSON.stringify({ ...base, pending: [{ recordType: 'lifecycle' }] }))).toBeNull();
    expect(parseStateFile(JSON.stringify(base))).not.toBeNull();
  });
});
