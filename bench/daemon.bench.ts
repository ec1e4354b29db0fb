/**
 * Whole-daemon figures, measured on the real binary (`dist/cli/main.js run`) as a child process:
 * - RSS and CPU of `run` polling a local IMDS stand-in at 1 Hz with the stdout sink, and with
 *   the Event Hubs sink connected to the emulator (targets: < 1% of one core, < 80/100 MB);
 * - latency from an IMDS document change to Event Hubs acceptance, split into the wait for the
 *   next poll (set by --poll-interval) and the pipeline after the poll (target p99 < 50 ms);
 * - backlog drain: 10k spooled records through the Event Hubs sink (target > 5k records/s).
 * BENCH_IDLE_SECONDS (default 60) and BENCH_TRANSITIONS (default 120) shorten or lengthen runs.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { CONNECTION_STRING_ENV } from '../src/config/options.js';
import { type EventHubsEmulator, startEventHubsEmulator } from '../src/emulators/eventhubs/index.js';
import { parseInstanceCompute } from '../src/imds/validate.js';
import { buildLifecycleRecord, vmIdentityFromCompute } from '../src/lifecycle/enrich.js';
import type { ShipperRecord } from '../src/lifecycle/record.js';
import { createLogger } from '../src/observability/logger.js';
import { DeliveryLoop } from '../src/pipeline/delivery.js';
import { EventHubsSink } from '../src/sinks/eventhubs.js';
import { Spool } from '../src/spool/spool.js';
import {
  event,
  eventsDoc,
  FIXTURE_COMPUTE,
  type ImdsFixture,
  startImdsFixture,
} from '../test/fixtures/imds-fixture.js';

const CLI = fileURLToPath(new URL('../../dist/cli/main.js', import.meta.url));
const IDLE_SECONDS = Number(process.env.BENCH_IDLE_SECONDS ?? 60);
const TRANSITIONS = Number(process.env.BENCH_TRANSITIONS ?? 120);
const CLK_TCK = Number(execFileSync('getconf', ['CLK_TCK']).toString().trim()) || 100;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function cpuTicks(pid: number): number {
  // /proc/<pid>/stat: fields after the ")" of the command name; utime and stime are 14 and 15.
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return Number(fields[11]) + Number(fields[12]);
}

function rssMb(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) / 1024 : Number.NaN;
}

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] as number;
}

function startShipper(args: string[], env: NodeJS.ProcessEnv): ChildProcess {
  return spawn(process.execPath, [CLI, 'run', ...args], {
    env: { PATH: process.env.PATH, ...env },
    stdio: ['ignore', 'ignore', 'ignore'],
  });
}

async function waitFor(predicate: () => boolean, what: string, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error(`bench: timed out waiting for ${what}`);
    await sleep(10);
  }
}

async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return;
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGTERM');
  await exited;
}

async function idle(
  label: string,
  fixture: ImdsFixture,
  extraArgs: string[],
  env: NodeJS.ProcessEnv,
): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'se-bench-idle-'));
  fixture.setDocument(eventsDoc(1, [event({ EventId: 'idle-1' })]));
  const child = startShipper(
    ['--imds-endpoint', fixture.url, '--state-dir', dir, '--poll-interval', '1000', ...extraArgs],
    env,
  );
  const pid = child.pid as number;
  try {
    await sleep(5_000); // start-up (module loading, first poll, AMQP connect) is not idle
    const polls0 = fixture.requests.length;
    const ticks0 = cpuTicks(pid);
    const t0 = performance.now();
    let rssMax = 0;
    let rssSum = 0;
    for (let i = 0; i < IDLE_SECONDS; i++) {
      await sleep(1_000);
      const rss = rssMb(pid);
      rssMax = Math.max(rssMax, rss);
      rssSum += rss;
    }
    const seconds = (performance.now() - t0) / 1000;
    const cpuSeconds = (cpuTicks(pid) - ticks0) / CLK_TCK;
    const polls = fixture.requests.length - polls0;
    console.log(
      `${label}: ${seconds.toFixed(0)} s at 1 Hz, ${polls} polls; CPU ${((cpuSeconds / seconds) * 100).toFixed(2)}% of one core ` +
        `(${(cpuSeconds * 1000).toFixed(0)} ms CPU); RSS avg ${(rssSum / IDLE_SECONDS).toFixed(1)} MB, max ${rssMax.toFixed(1)} MB`,
    );
  } finally {
    await stopChild(child);
    rmSync(dir, { recursive: true, force: true });
  }
}

async function latency(fixture: ImdsFixture, hub: EventHubsEmulator): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'se-bench-latency-'));
  const pollMs = 200;
  fixture.setDocument(eventsDoc(1, []));
  const child = startShipper(
    [
      '--imds-endpoint',
      fixture.url,
      '--state-dir',
      dir,
      '--poll-interval',
      String(pollMs),
      '--sink',
      'eventhubs',
      '--heartbeat-interval',
      '0',
    ],
    { [CONNECTION_STRING_ENV]: hub.connectionString },
  );
  const pollWait: number[] = [];
  const pipeline: number[] = [];
  try {
    await sleep(3_000);
    let incarnation = 1;
    const phases = ['Scheduled', 'Started', 'Completed'] as const;
    for (let i = 0; i < TRANSITIONS; i++) {
      const n = Math.floor(i / 3);
      const phase = phases[i % 3] as (typeof phases)[number];
      const id = `lat-${n}`;
      incarnation++;
      const events =
        phase === 'Scheduled'
          ? [event({ EventId: id })]
          : phase === 'Started'
            ? [event({ EventId: id, EventStatus: 'Started', NotBefore: '' })]
            : [];
      const changedAt = Date.now();
      fixture.setDocument(eventsDoc(incarnation, events));
      const found = await hub.waitForEvents(
        (evs) =>
          evs.some(
            (e) =>
              (e.body as ShipperRecord).recordType === 'lifecycle' &&
              (e.body as { eventId: string }).eventId === id &&
              (e.body as { phase: string }).phase === phase,
          ),
        { timeoutMs: 10_000 },
      );
      const accepted = found.find(
        (e) =>
          (e.body as { eventId: string }).eventId === id && (e.body as { phase: string }).phase === phase,
      );
      const served = fixture.requests.find((r) => r.servedIncarnation === incarnation && r.at >= changedAt);
      if (!accepted || !served) throw new Error(`bench: transition ${id} ${phase} not traced`);
      pollWait.push(served.at - changedAt);
      pipeline.push(accepted.enqueuedTimeUtc.getTime() - served.at);
      await sleep(Math.random() * pollMs); // de-phase the next change from the poll cadence
    }
  } finally {
    await stopChild(child);
    rmSync(dir, { recursive: true, force: true });
  }
  const show = (xs: number[]) => {
    const s = [...xs].sort((a, b) => a - b);
    return `p50 ${percentile(s, 50).toFixed(0)} ms, p99 ${percentile(s, 99).toFixed(0)} ms, max ${percentile(s, 100).toFixed(0)} ms`;
  };
  console.log(
    `end-to-end latency over ${TRANSITIONS} transitions (IMDS change → Event Hubs acceptance, loopback):`,
  );
  console.log(`  wait for the next poll (--poll-interval ${pollMs} ms): ${show(pollWait)}`);
  console.log(`  pipeline after the poll (tracker, spool fsync, AMQP send): ${show(pipeline)}`);
  console.log(`  total: ${show(pollWait.map((w, i) => w + (pipeline[i] as number)))}`);
}

async function backlogDrain(hub: EventHubsEmulator, count = 10_000): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'se-bench-drain-'));
  const logger = createLogger({ level: 'silent' });
  const spool = await Spool.open({ dir, logger, maxRecords: count * 2, maxBytes: 256 * 1024 * 1024 });
  const vm = vmIdentityFromCompute(parseInstanceCompute(JSON.stringify({ compute: FIXTURE_COMPUTE })));
  const shipper = { hostname: 'bench', shipperVersion: '0.0.0' };
  const records = Array.from({ length: count }, (_, i) =>
    buildLifecycleRecord(
      {
        phase: 'Scheduled',
        inferred: false,
        gapSeconds: 0,
        event: {
          EventId: `drain-${i}`,
          EventType: 'Reboot',
          ResourceType: 'VirtualMachine',
          Resources: [vm.vmName],
          EventStatus: 'Scheduled',
          NotBefore: '',
          Description: 'bench',
          EventSource: 'Platform',
          DurationInSeconds: -1,
        },
        notBefore: null,
        observedAt: Date.now(),
        documentIncarnation: i,
      },
      vm,
      shipper,
    ),
  );
  for (let i = 0; i < records.length; i += 500) await spool.append(records.slice(i, i + 500));
  const before = hub.events().length;
  const sink = new EventHubsSink({
    target: { kind: 'connection-string', connectionString: hub.connectionString },
    logger,
  });
  const delivery = new DeliveryLoop({ spool, sink, logger });
  const t0 = performance.now();
  delivery.start();
  await waitFor(() => spool.depth === 0, 'drain', 120_000);
  const seconds = (performance.now() - t0) / 1000;
  await delivery.stop();
  await spool.close();
  await sink.close();
  rmSync(dir, { recursive: true, force: true });
  const delivered = hub.events().length - before;
  console.log(
    `backlog drain: ${count} spooled records → Event Hubs emulator in ${seconds.toFixed(2)} s = ${(count / seconds).toFixed(0)} records/s ` +
      `(${delivered} events stored; fsynced acks; batches of up to 256)`,
  );
}

export async function run(): Promise<void> {
  const fixture = await startImdsFixture();
  const hub = await startEventHubsEmulator();
  try {
    await idle('se-shipper run, stdout sink', fixture, ['--sink', 'stdout'], {});
    await idle('se-shipper run, Event Hubs sink connected', fixture, ['--sink', 'eventhubs'], {
      [CONNECTION_STRING_ENV]: hub.connectionString,
    });
    await latency(fixture, hub);
    await backlogDrain(hub);
  } finally {
    await hub.stop();
    await fixture.close();
  }
}
