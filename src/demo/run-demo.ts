/**
 * `se-shipper demo` (what `npm start` runs): the whole data path on this machine, no Azure
 * account. The IMDS emulator plays a scenario at dev speed, the real `se-shipper run` binary
 * polls it and ships to the Event Hubs emulator over AMQP, and this process reads the hub back
 * with the official SDK consumer, showing each record as it arrives and checking that every
 * lifecycle transition the emulator made for this VM was delivered.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { createWriteStream, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { EventHubConsumerClient, earliestEventPosition, type Subscription } from '@azure/event-hubs';
import { CONNECTION_STRING_ENV } from '../config/options.js';
import { type EventHubsEmulator, startEventHubsEmulator } from '../emulators/eventhubs/index.js';
import { type ImdsEmulator, LIFECYCLE_PHASE_OF_CHANGE, startImdsEmulator } from '../emulators/imds/index.js';
import type { ShipperRecord } from '../lifecycle/record.js';
import { type ArrivedRecord, LiveView } from './view.js';

export interface DemoOptions {
  scenario?: string;
  /** Scenario speed factor (default: the scenario's own, 60 for `demo`). */
  speed?: number;
  /** Give up after this long (ms); the demo scenario needs about 35 s. */
  timeoutMs?: number;
  pollIntervalMs?: number;
  heartbeatIntervalSeconds?: number;
  out?: NodeJS.WriteStream;
  /** Keep the temp dir (state, spool, shipper log) for inspection. */
  keep?: boolean;
}

export interface DemoSummary {
  expected: number;
  delivered: number;
  duplicates: number;
  lost: string[];
  heartbeats: number;
  ok: boolean;
}

const CLI = fileURLToPath(new URL('../cli/main.js', import.meta.url));

function key(eventId: string, phase: string): string {
  return `${eventId.toLowerCase()}|${phase}`;
}

/** Every (event, phase) the emulator produced for this VM: what the shipper owes the hub. */
interface Expected {
  eventId: string;
  eventType: string;
  phase: string;
}

function expectedTransitions(imds: ImdsEmulator): Map<string, Expected> {
  const expected = new Map<string, Expected>();
  for (const h of imds.history()) {
    const phase = LIFECYCLE_PHASE_OF_CHANGE[h.change];
    if (!h.affectsThisVm) continue;
    expected.set(key(h.eventId, phase), { eventId: h.eventId, eventType: h.eventType, phase });
  }
  return expected;
}

function startShipper(
  imdsUrl: string,
  connectionString: string,
  dir: string,
  options: DemoOptions,
): ChildProcess {
  const log = createWriteStream(join(dir, 'shipper.log'));
  const child = spawn(
    process.execPath,
    [
      CLI,
      'run',
      '--imds-endpoint',
      imdsUrl,
      '--sink',
      'eventhubs',
      '--state-dir',
      join(dir, 'state'),
      '--poll-interval',
      String(options.pollIntervalMs ?? 500),
      '--heartbeat-interval',
      String(options.heartbeatIntervalSeconds ?? 10),
    ],
    {
      env: { ...process.env, [CONNECTION_STRING_ENV]: connectionString },
      stdio: ['ignore', 'ignore', 'pipe'],
    },
  );
  child.stderr?.pipe(log);
  return child;
}

export async function runDemo(options: DemoOptions = {}): Promise<DemoSummary> {
  const out = options.out ?? process.stdout;
  const tty = out.isTTY === true;
  const view = new LiveView(out, tty, tty && !process.env.NO_COLOR);
  const dir = mkdtempSync(join(tmpdir(), 'se-shipper-demo-'));
  let imds: ImdsEmulator | undefined;
  let hub: EventHubsEmulator | undefined;
  let shipper: ChildProcess | undefined;
  let consumer: EventHubConsumerClient | undefined;
  let subscription: Subscription | undefined;
  try {
    imds = await startImdsEmulator({
      scenario: options.scenario ?? 'demo',
      ...(options.speed ? { speed: options.speed } : {}),
    });
    hub = await startEventHubsEmulator();
    view.heading('se-shipper demo: IMDS emulator → se-shipper run → Event Hubs emulator → SDK consumer');
    view.note(
      `IMDS emulator   ${imds.url}  (scenario "${options.scenario ?? 'demo'}": Freeze, Reboot, Redeploy,`,
    );
    view.note('                a canceled Reboot, a peer VM event, Preempt and Terminate at 60× speed)');
    view.note(
      `Event Hubs      amqp://127.0.0.1:${hub.port}  hub "${hub.hubNames[0]}" (partition key = vmId)`,
    );
    view.note(
      `this VM         ${imds.identity.name} in scale set ${imds.identity.vmScaleSetName || '(none)'}`,
    );
    view.note(`shipper logs    ${join(dir, 'shipper.log')}`);
    view.line();

    shipper = startShipper(imds.url, hub.connectionString, dir, options);
    const shipperExit = new Promise<number | null>((resolve) => shipper?.on('exit', (code) => resolve(code)));

    const seen = new Map<string, string>();
    const received = new Set<string>();
    let duplicates = 0;
    let heartbeats = 0;
    view.tableHeader();
    consumer = new EventHubConsumerClient('$default', hub.connectionString);
    subscription = consumer.subscribe(
      {
        // The SDK wants a promise back; the view is synchronous.
        processEvents: (events, context) => {
          for (const e of events) {
            const record = e.body as ShipperRecord;
            const duplicate = seen.has(record.recordId);
            seen.set(record.recordId, record.phase);
            if (duplicate) duplicates++;
            if (record.recordType === 'heartbeat') heartbeats++;
            else received.add(key(record.eventId, record.phase));
            const arrived: ArrivedRecord = {
              record,
              partitionId: context.partitionId,
              sequenceNumber: e.sequenceNumber,
              duplicate,
            };
            view.arrived(arrived);
          }
          return Promise.resolve();
        },
        // The consumer retries by itself; a transient error here needs no action.
        processError: () => Promise.resolve(),
      },
      { startPosition: earliestEventPosition, maxWaitTimeInSeconds: 1 },
    );

    const deadline = Date.now() + (options.timeoutMs ?? 90_000);
    const scenarioDone = () => imds?.nextChangeAt() === null && imds.events().length === 0;
    const allDelivered = () =>
      [...expectedTransitions(imds as ImdsEmulator).keys()].every((k) => received.has(k));
    let exitedEarly: number | null | undefined;
    void shipperExit.then((code) => {
      exitedEarly = code;
    });
    while (Date.now() < deadline && exitedEarly === undefined && !(scenarioDone() && allDelivered())) {
      await new Promise((r) => setTimeout(r, 250));
    }
    if (exitedEarly !== undefined) {
      const tail = readFileSync(join(dir, 'shipper.log'), 'utf8').trim().split('\n').slice(-5).join('\n');
      throw new Error(`the shipper exited early with code ${exitedEarly}; last log lines:\n${tail}`);
    }
    shipper.kill('SIGTERM');
    await shipperExit;
    // Let the consumer see anything the shutdown flushed.
    await new Promise((r) => setTimeout(r, 1_500));

    const expected = expectedTransitions(imds);
    const lost = [...expected.entries()]
      .filter(([k]) => !received.has(k))
      .map(([k, v]) => `${v.eventType} ${v.phase} (${k.split('|')[0]})`);
    const summary: DemoSummary = {
      expected: expected.size,
      delivered: [...expected.keys()].filter((k) => received.has(k)).length,
      duplicates,
      lost,
      heartbeats,
      ok: lost.length === 0,
    };
    printSummary(view, tty, summary, expected, received);
    return summary;
  } finally {
    await subscription?.close().catch(() => {});
    await consumer?.close().catch(() => {});
    if (shipper && shipper.exitCode === null) shipper.kill('SIGKILL');
    await hub?.stop().catch(() => {});
    await imds?.close().catch(() => {});
    if (!options.keep) rmSync(dir, { recursive: true, force: true });
  }
}

function printSummary(
  view: LiveView,
  tty: boolean,
  s: DemoSummary,
  expected: Map<string, Expected>,
  received: Set<string>,
): void {
  if (!tty) {
    // Non-TTY: the records went to stdout as NDJSON; the summary goes to stderr as one JSON line.
    process.stderr.write(`${JSON.stringify({ summary: s })}\n`);
    return;
  }
  const byEvent = new Map<string, string[]>();
  for (const [k, v] of expected) {
    const label = `${v.eventType.padEnd(10)} ${v.eventId.slice(0, 8)}`;
    const list = byEvent.get(label) ?? [];
    list.push(`${v.phase}${received.has(k) ? '' : ' (LOST)'}`);
    byEvent.set(label, list);
  }
  view.line();
  view.heading('Summary');
  for (const [label, phases] of byEvent) view.line(`  ${label}  ${phases.join(' → ')}`);
  view.line();
  view.line(
    `  lifecycle transitions for this VM: ${s.expected} expected, ${s.delivered} delivered, ${s.lost.length} lost; ` +
      `${s.duplicates} duplicate deliveries (same recordId); ${s.heartbeats} heartbeats`,
  );
  view.line(
    s.ok
      ? '  every transition reached Event Hubs. Point the same binary at Azure: see "Run it on Azure" in README.md.'
      : `  LOST: ${s.lost.join(', ')}`,
  );
}
