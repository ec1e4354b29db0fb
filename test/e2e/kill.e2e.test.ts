/**
 * `kill -9` of the shipper at pseudo-random points, restarted each time with the same state
 * directory: nothing lost, duplicates only with the same recordId.
 *
 * Kill points (chosen by a seeded PRNG, so a failure is reproducible: SE_E2E_KILL_SEED=<n>):
 * - `poll`: while a scheduled-events poll is in flight (the IMDS emulator holds it with a `hang`
 *   fault), the document unchanged since the last poll;
 * - `spool-write`: right after (0–30 ms, seeded) a new record file appeared in the spool directory
 *   (inotify), i.e. around the tracker's state commit and the first send;
 * - `mid-send`: while a send hangs in the Event Hubs emulator (hangSends), before any ack.
 * Five kills, then a last run plays the rest of the script. IMDS changes are only made while a
 * shipper runs and has polled, so every transition is observable (none falls into a restart gap).
 */
import { existsSync, readdirSync, watch } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { CliRun } from '../fixtures/child.js';
import {
  allArrived,
  assertNoLoss,
  expectedTransitions,
  lifecycleOf,
  lifecycleScript,
  play,
  polled,
  prng,
  readBackAndCheck,
  SCRIPT_RECORDS,
  type Stack,
  started,
  startShipper,
  startStack,
  stopShipper,
  waitFor,
} from './harness.js';

const SEED = Number(process.env.SE_E2E_KILL_SEED ?? 20261122);
const KILLS = 5;
const POINTS = ['poll', 'spool-write', 'mid-send'] as const;
type Point = (typeof POINTS)[number];

let stack: Stack | undefined;
afterEach(async () => {
  await stack?.close();
  stack = undefined;
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Resolves when a new record file (`*.rec`, renamed into place) appears in `dir`. inotify also
 * reports unlinks (acks of replayed records) as renames: only a name that exists now and did not
 * before counts.
 */
function nextSpoolFile(dir: string): { seen: Promise<string>; close(): void } {
  const before = new Set(readdirSync(dir));
  let close = () => {};
  const seen = new Promise<string>((resolve) => {
    const watcher = watch(dir, (_event, name) => {
      if (name?.endsWith('.rec') && !before.has(name) && existsSync(join(dir, name))) {
        watcher.close();
        resolve(name);
      }
    });
    close = () => watcher.close();
  });
  return { seen, close };
}

async function kill9(run: CliRun): Promise<void> {
  run.child.kill('SIGKILL');
  const { signal } = await run.exited;
  expect(signal).toBe('SIGKILL');
}

describe('kill -9 at random points, restart with the same state dir', () => {
  it(`loses nothing over ${KILLS} kills (seed ${SEED})`, async () => {
    stack = await startStack({ seed: `kill-${SEED}` });
    const s = stack;
    const rand = prng(SEED);
    const script = lifecycleScript('k');
    const stepAt = (i: number) => script[i] as (typeof script)[number];
    const producesRecord = (i: number) => !JSON.stringify(script[i]).includes('peer');
    const spoolDir = join(s.stateDir, 'spool');
    let next = 0;
    const points: string[] = [];
    for (let k = 0; k < KILLS; k++) {
      const run = startShipper(s);
      await started(run);
      await polled(s.imds);
      // Steps that concern only a peer VM are just played (watched): nothing to kill around.
      while (next < script.length && !producesRecord(next)) await play(s.imds, [stepAt(next++)]);
      const point: Point =
        next < script.length ? (POINTS[Math.floor(rand() * POINTS.length)] as Point) : 'poll';
      const jitter = Math.floor(rand() * 30);
      points.push(`${point}+${jitter}ms`);
      if (point === 'poll') {
        s.imds.addFault({ kind: 'hang' });
        const seq = s.imds.lastSeq();
        await waitFor(() => s.imds.lastSeq() > seq, 'a poll in flight', 5_000);
        await sleep(jitter);
        await kill9(run);
        s.imds.clearFaults();
      } else if (point === 'spool-write') {
        const file = nextSpoolFile(spoolDir);
        s.imds.apply(stepAt(next++));
        await Promise.race([file.seen, sleep(5_000).then(() => Promise.reject(new Error('no spool write')))]);
        file.close();
        await sleep(jitter);
        await kill9(run);
      } else {
        s.hub.hangSends();
        s.imds.apply(stepAt(next++));
        await waitFor(() => s.hub.faults.hungDeliveries > 0, 'a hung send', 5_000);
        await sleep(jitter);
        await kill9(run);
        s.hub.stopHanging();
      }
    }
    const last = startShipper(s);
    await started(last);
    await polled(s.imds);
    await play(s.imds, script.slice(next));
    const expected = expectedTransitions(s.imds);
    expect([...expected.values()].reduce((a, b) => a + b, 0)).toBe(SCRIPT_RECORDS);
    try {
      await allArrived(s.hub, expected);
      expect(await stopShipper(last)).toEqual({ code: 0, signal: null });
      const records = await readBackAndCheck(s.hub, s.imds.identity.vmId);
      // Strict: a kill between the spool write and the state save must not add a second,
      // inferred ending (the state file's write-ahead of pending records prevents it).
      assertNoLoss(records, expected);
    } catch (err) {
      const got = lifecycleOf(s.hub.events()).map(
        (r) => `${r.eventId.slice(0, 8)} ${r.phase}${r.inferred ? ' (inferred)' : ''} ${r.recordId}`,
      );
      throw new Error(
        `${(err as Error).message}\nkill points: ${points.join(', ')}\non the hub:\n${got.join('\n')}`,
        { cause: err },
      );
    }
  });
});
