/**
 * Shared harness of the end-to-end tests: the in-process IMDS emulator → the real `se-shipper run`
 * (child process, built dist/, `--sink eventhubs`, connection string via env) → the in-process
 * Event Hubs emulator, read back with the official EventHubConsumerClient.
 *
 * Ground truth is the IMDS emulator's history (every change it made to the document); the check is
 * "every (eventId, phase) this VM went through arrived at least once, and records of one transition
 * all carry the same recordId".
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { EventHubConsumerClient, earliestEventPosition, type ReceivedEventData } from '@azure/event-hubs';
import { expect } from 'vitest';
import {
  type EmulatorEvent,
  type EventHubsEmulator,
  type EventHubsEmulatorOptions,
  startEventHubsEmulator,
} from '../../src/emulators/eventhubs/index.js';
import {
  type ImdsEmulator,
  LIFECYCLE_PHASE_OF_CHANGE,
  type ScenarioStep,
  startImdsEmulator,
} from '../../src/emulators/imds/index.js';
import { CLI, type CliRun, startCli, waitFor } from '../fixtures/child.js';
import { assertValidRecord } from '../fixtures/record-schema.js';

export const CONNECTION_STRING_ENV = 'SE_SHIPPER_EVENTHUBS_CONNECTION_STRING';
export const POLL_MS = 200;

/** What a record needs for the checks (the full body is schema-validated separately). */
export interface Shipped {
  recordType: string;
  recordId: string;
  phase: string;
  eventId: string;
  eventType: string;
  notBefore: string | null;
  vmId: string;
  inferred: boolean;
}

export interface Stack {
  imds: ImdsEmulator;
  hub: EventHubsEmulator;
  /** Temporary directory of this test (state dir and anything else lives under it). */
  tmp: string;
  stateDir: string;
  runs: CliRun[];
  close(): Promise<void>;
}

export async function startStack(
  opts: { hub?: EventHubsEmulatorOptions; seed?: string; hubStore?: boolean } = {},
): Promise<Stack> {
  if (!existsSync(CLI)) throw new Error(`${CLI} is missing: run \`npm run build\` first (npm test does)`);
  const tmp = mkdtempSync(join(tmpdir(), 'se-e2e-'));
  const imds = await startImdsEmulator({ seed: opts.seed ?? 'e2e', control: false });
  const hub = await startEventHubsEmulator({
    controlPort: false,
    ...(opts.hubStore ? { store: join(tmp, 'hub-store') } : {}),
    ...opts.hub,
  });
  const runs: CliRun[] = [];
  return {
    imds,
    hub,
    tmp,
    stateDir: join(tmp, 'state'),
    runs,
    async close() {
      for (const run of runs)
        if (run.child.exitCode === null && run.child.signalCode === null) run.child.kill('SIGKILL');
      await Promise.all(runs.map((r) => r.exited));
      await hub.stop();
      await imds.close();
      rmSync(tmp, { recursive: true, force: true });
    },
  };
}

/**
 * Starts `se-shipper run --sink eventhubs` against the stack. Short timings: 200 ms polls, no
 * heartbeats unless asked, a 2 s send timeout (the SDK's operation timeout follows it), backoff
 * capped at 1 s, a 1 s flush on SIGTERM.
 */
export function startShipper(
  stack: Stack,
  opts: { args?: string[]; connectionString?: string; env?: NodeJS.ProcessEnv } = {},
): CliRun {
  const run = startCli(
    [
      'run',
      '--imds-endpoint',
      stack.imds.url,
      '--poll-interval',
      String(POLL_MS),
      '--state-dir',
      stack.stateDir,
      '--sink',
      'eventhubs',
      '--heartbeat-interval',
      '0',
      '--flush-timeout',
      '1000',
      '--send-timeout',
      '2000',
      '--retry-max-backoff',
      '1000',
      '--log-level',
      'debug',
      ...(opts.args ?? []),
    ],
    {
      NO_PROXY: '127.0.0.1',
      [CONNECTION_STRING_ENV]: opts.connectionString ?? stack.hub.connectionString,
      ...opts.env,
    },
  );
  stack.runs.push(run);
  return run;
}

/** Resolves once the shipper logged that it started (identity read, first poll under way). */
export async function started(run: CliRun, timeoutMs = 15_000): Promise<void> {
  await waitFor(
    () => run.logs.some((l) => l.msg === 'se-shipper started') || run.child.exitCode !== null,
    'the shipper to start',
    timeoutMs,
  );
  if (run.child.exitCode !== null) throw new Error(`shipper exited early:\n${run.stderrText()}`);
}

export async function stopShipper(
  run: CliRun,
): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
  if (run.child.exitCode === null && run.child.signalCode === null) run.child.kill('SIGTERM');
  return run.exited;
}

/** Waits until a scheduled-events poll that arrived after now was answered. */
export async function polled(imds: ImdsEmulator, timeoutMs = 10_000): Promise<void> {
  await imds.waitForPoll(imds.lastSeq(), timeoutMs);
}

/**
 * A script that takes this VM through every phase, plus a peer event that scope `self` must not
 * ship: `a` Scheduled → Rescheduled → Started → Completed, `b` Scheduled → Canceled, `d` (a
 * hardware failure) Started → Completed. `tag` keeps refs unique across rounds. 8 records.
 */
export function lifecycleScript(tag: string): ScenarioStep[] {
  return [
    {
      at: 0,
      action: 'schedule',
      event: { ref: `${tag}a`, type: 'Reboot', notBefore: 900, startedFor: null },
    },
    {
      at: 0,
      action: 'schedule',
      event: { ref: `${tag}b`, type: 'Freeze', notBefore: 600, duration: 5, startedFor: null },
    },
    {
      at: 0,
      action: 'schedule',
      event: { ref: `${tag}peer`, type: 'Reboot', notBefore: 900, resources: ['$peer:1'], startedFor: null },
    },
    { at: 0, action: 'reschedule', ref: `${tag}a`, notBefore: 1200 },
    { at: 0, action: 'start', ref: `${tag}a` },
    { at: 0, action: 'cancel', ref: `${tag}b` },
    { at: 0, action: 'start', event: { ref: `${tag}d`, type: 'Redeploy', startedFor: null } },
    { at: 0, action: 'complete', ref: `${tag}a` },
    { at: 0, action: 'cancel', ref: `${tag}peer` },
    { at: 0, action: 'complete', ref: `${tag}d` },
  ];
}
export const SCRIPT_RECORDS = 8;

/**
 * Applies the steps one by one; after each, waits until the shipper polled the new document
 * (so every transition is observed while watched), then runs `between(i)` if given.
 */
export async function play(
  imds: ImdsEmulator,
  steps: readonly ScenarioStep[],
  between?: (i: number) => Promise<void>,
): Promise<void> {
  for (const [i, step] of steps.entries()) {
    imds.apply(step);
    await polled(imds);
    if (between) await between(i);
  }
}

const PHASE_OF = LIFECYCLE_PHASE_OF_CHANGE;

/** `eventId|phase` → how many such transitions of this VM the emulator made. */
export function expectedTransitions(imds: ImdsEmulator): Map<string, number> {
  const out = new Map<string, number>();
  for (const h of imds.history()) {
    if (!h.affectsThisVm || h.cause === 'load') continue;
    const key = `${h.eventId.toLowerCase()}|${PHASE_OF[h.change]}`;
    out.set(key, (out.get(key) ?? 0) + 1);
  }
  return out;
}

export function lifecycleOf(events: readonly EmulatorEvent[]): Shipped[] {
  return events
    .map((e) => e.body as Shipped)
    .filter((b) => typeof b === 'object' && b !== null && b.recordType === 'lifecycle');
}

/** How many distinct expected transitions have arrived at the hub so far. */
export function arrivedCount(hub: EventHubsEmulator, expected: Map<string, number>): number {
  const seen = new Map<string, Set<string>>();
  for (const r of lifecycleOf(hub.events())) {
    const key = `${r.eventId.toLowerCase()}|${r.phase}`;
    if (!expected.has(key)) continue;
    const ids = seen.get(key) ?? new Set<string>();
    ids.add(r.recordId);
    seen.set(key, ids);
  }
  let n = 0;
  for (const [key, count] of expected) n += Math.min(count, seen.get(key)?.size ?? 0);
  return n;
}

/** Waits (bounded) until every expected transition is on the hub. */
export async function allArrived(
  hub: EventHubsEmulator,
  expected: Map<string, number>,
  timeoutMs = 20_000,
): Promise<void> {
  const total = [...expected.values()].reduce((a, b) => a + b, 0);
  await waitFor(
    () => arrivedCount(hub, expected) >= total,
    `${total} lifecycle transitions on the hub (have ${arrivedCount(hub, expected)})`,
    timeoutMs,
  );
}

/**
 * The loss/duplicate verdict on records as received: every expected (eventId, phase) arrived as
 * many times as the emulator made it (Rescheduled can repeat with new NotBefores), nothing else
 * arrived, and every copy of one transition carries the same recordId (and one recordId never
 * names two transitions).
 */
export function assertNoLoss(records: readonly Shipped[], expected: Map<string, number>): void {
  const byTransition = new Map<string, Set<string>>(); // eventId|phase|notBefore? → recordIds
  const byRecordId = new Map<string, string>();
  for (const r of records) {
    const transition = `${r.eventId.toLowerCase()}|${r.phase}|${r.phase === 'Rescheduled' ? r.notBefore : ''}`;
    const ids = byTransition.get(transition) ?? new Set<string>();
    ids.add(r.recordId);
    byTransition.set(transition, ids);
    const other = byRecordId.get(r.recordId);
    expect(other ?? transition, `recordId ${r.recordId} names two transitions`).toBe(transition);
    byRecordId.set(r.recordId, transition);
  }
  for (const [transition, ids] of byTransition) {
    expect([...ids], `copies of ${transition} with different recordIds`).toHaveLength(1);
  }
  const got = new Map<string, number>();
  for (const transition of byTransition.keys()) {
    const key = transition.split('|').slice(0, 2).join('|');
    got.set(key, (got.get(key) ?? 0) + 1);
  }
  expect(Object.fromEntries([...got].sort())).toEqual(Object.fromEntries([...expected].sort()));
}

/** Subscribes to one partition from the earliest event until `count` events arrived (bounded). */
function readPartitionFromEarliest(
  consumer: EventHubConsumerClient,
  partitionId: string,
  count: number,
  timeoutMs = 10_000,
): Promise<ReceivedEventData[]> {
  return new Promise((resolve, reject) => {
    const got: ReceivedEventData[] = [];
    let settled = false;
    const settle = (err?: Error) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      const done = () => (err ? reject(err) : resolve(got));
      subscription.close().then(done, done);
    };
    const timer = setTimeout(
      () => settle(new Error(`read ${got.length}/${count} events of partition ${partitionId} in time`)),
      timeoutMs,
    );
    const subscription = consumer.subscribe(
      partitionId,
      {
        processEvents: async (events) => {
          got.push(...events);
          if (got.length >= count) settle();
        },
        processError: async () => {
          // Transient receive errors are retried by the client; the timeout bounds the read.
        },
      },
      { startPosition: earliestEventPosition, maxBatchSize: 500, maxWaitTimeInSeconds: 1 },
    );
  });
}

/** Reads every event of the hub back with the official consumer client, from the earliest position. */
export async function readBack(hub: EventHubsEmulator): Promise<ReceivedEventData[][]> {
  const consumer = new EventHubConsumerClient('$default', hub.connectionString, {
    retryOptions: { maxRetries: 3, retryDelayInMs: 50, maxRetryDelayInMs: 200, timeoutInMs: 5_000 },
  });
  try {
    const ids = await consumer.getPartitionIds();
    const out: ReceivedEventData[][] = [];
    for (const id of ids) {
      const count = hub.events(undefined, id).length;
      out.push(count === 0 ? [] : await readPartitionFromEarliest(consumer, id, count));
    }
    return out;
  } finally {
    await consumer.close();
  }
}

/**
 * Reads the hub back with the SDK and checks what a consumer relies on: schema-valid JSON bodies,
 * content type, application properties, partition key = vmId with all of one VM's records on one
 * partition. Returns the lifecycle records, in partition order.
 */
export async function readBackAndCheck(hub: EventHubsEmulator, vmId: string): Promise<Shipped[]> {
  const partitions = await readBack(hub);
  const lifecycle: Shipped[] = [];
  const partitionsOfVm = new Set<number>();
  partitions.forEach((events, p) => {
    for (const e of events) {
      const body = e.body as Shipped;
      assertValidRecord(body);
      expect(e.contentType).toBe('application/json');
      expect(e.messageId).toBe(body.recordId);
      const props = e.properties ?? {};
      expect(props.recordType).toBe(body.recordType);
      if (body.recordType === 'lifecycle') {
        expect(props.phase).toBe(body.phase);
        expect(props.eventType).toBe(body.eventType);
        lifecycle.push(body);
      }
      expect(body.vmId).toBe(vmId);
      expect(e.partitionKey).toBe(vmId);
      partitionsOfVm.add(p);
    }
  });
  expect(partitionsOfVm.size).toBeLessThanOrEqual(1);
  return lifecycle;
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const total = (expected: Map<string, number>) => [...expected.values()].reduce((a, b) => a + b, 0);

/** The whole script arrived, the SDK read-back passes every check and nothing is lost (fault tests). */
export async function verdict(s: Stack): Promise<void> {
  const expected = expectedTransitions(s.imds);
  expect(total(expected)).toBe(SCRIPT_RECORDS);
  try {
    await allArrived(s.hub, expected);
  } catch (err) {
    const tail = s.runs
      .flatMap((r) => r.logs)
      .filter((l) => l.level !== 'debug' && l.msg !== 'lifecycle transition')
      .slice(-25)
      .map((l) => JSON.stringify(l).slice(0, 600));
    throw new Error(`${(err as Error).message}; last log lines:\n${tail.join('\n')}`, { cause: err });
  }
  const records = await readBackAndCheck(s.hub, s.imds.identity.vmId);
  assertNoLoss(records, expected);
}

/** Waits (bounded) for a log line; on timeout the error carries the shipper's last log lines. */
export async function waitForLog(s: Stack, msg: RegExp, level?: string, timeoutMs = 15_000): Promise<void> {
  try {
    await waitFor(() => logsWith(s, msg, level).length > 0, `a log line ${msg}`, timeoutMs);
  } catch (err) {
    const tail = allStderr(s).split('\n').slice(-30).join('\n');
    throw new Error(`${(err as Error).message}; last log lines:\n${tail}`, { cause: err });
  }
}

export function logsWith(s: Stack, msg: RegExp, level?: string) {
  return s.runs
    .flatMap((r) => r.logs)
    .filter((l) => msg.test(String(l.msg)) && (!level || l.level === level));
}

/** stderr of every run of a test, for the secret and log checks. */
export function allStderr(stack: Stack): string {
  return stack.runs.map((r) => r.stderrText()).join('');
}

/** Deterministic PRNG (mulberry32) so that "random" kill points are reproducible from a seed. */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export { waitFor };
