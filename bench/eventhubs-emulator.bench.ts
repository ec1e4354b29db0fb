/**
 * The Event Hubs emulator's own ceiling: events/s it accepts from the official
 * @azure/event-hubs producer in batches of 1, 100, and as many as fit in 1 MiB, with
 * record-sized (~700 byte JSON) events; in memory and with --store. Client and emulator share
 * this process (and its CPU), as in the tests, so the figures are a floor of what the emulator
 * alone could do; the "pre-built" cases resend one batch to leave out the client's per-event
 * encoding, which dominates the others. Later benchmarks of the shipper's sink should stay well below them to be
 * measuring the sink. BENCH_EH_SECONDS (default 3) sets the time per case.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { EventHubProducerClient } from '@azure/event-hubs';
import { startEventHubsEmulator } from '../src/emulators/eventhubs/index.js';

const SECONDS = Number(process.env.BENCH_EH_SECONDS ?? 3);

function recordBody(i: number): Record<string, unknown> {
  return {
    schemaVersion: 1,
    recordType: 'lifecycle',
    recordId: `rec-${i.toString(16).padStart(12, '0')}`,
    phase: 'Scheduled',
    inferred: false,
    observedAt: new Date(1_760_000_000_000 + i).toISOString(),
    eventId: '602d9444-d2cd-49c7-8624-8643e7171297',
    eventType: 'Reboot',
    eventStatus: 'Scheduled',
    eventSource: 'Platform',
    resourceType: 'VirtualMachine',
    description: 'Virtual machine is going to be restarted as requested by authorized user.',
    resources: ['vmss_vm_1'],
    affectsThisVm: true,
    notBefore: '2025-10-09T09:00:00.000Z',
    durationInSeconds: -1,
    documentIncarnation: 7,
    vmName: 'vmss_vm_1',
    vmId: '02aab8a4-74ef-476e-8182-f6d2ba4166a6',
    subscriptionId: '8d10da13-8125-4ba9-a717-bf7490507b3d',
    resourceGroup: 'rg-bench',
    location: 'westeurope',
    vmSize: 'Standard_D2s_v5',
    hostname: 'bench-host',
    shipperVersion: '0.1.0',
  };
}

interface Case {
  name: string;
  /** events per batch; 0 = as many as fit in the batch (1 MiB). */
  batch: number;
  store: boolean;
  /** Send one pre-built batch over and over: leaves out the client's per-event encoding. */
  prebuilt?: boolean;
}

async function measure(c: Case): Promise<void> {
  const dir = c.store ? mkdtempSync(join(tmpdir(), 'eh-bench-')) : undefined;
  const hub = await startEventHubsEmulator({ controlPort: false, ...(dir ? { store: dir } : {}) });
  const producer = new EventHubProducerClient(hub.connectionString);
  try {
    let i = 0;
    let sendOne = async (): Promise<number> => {
      if (c.batch === 1) {
        await producer.sendBatch([{ body: recordBody(i++) }], { partitionKey: 'vm-bench' });
        return 1;
      }
      const batch = await producer.createBatch({ partitionKey: 'vm-bench' });
      let n = 0;
      while ((c.batch === 0 || n < c.batch) && batch.tryAdd({ body: recordBody(i) })) {
        i++;
        n++;
      }
      await producer.sendBatch(batch);
      return n;
    };
    let prebuilt: Awaited<ReturnType<typeof producer.createBatch>> | undefined;
    if (c.prebuilt) {
      prebuilt = await producer.createBatch({ partitionKey: 'vm-bench' });
      while ((c.batch === 0 || prebuilt.count < c.batch) && prebuilt.tryAdd({ body: recordBody(i) })) i++;
      const built = prebuilt;
      const n = built.count;
      sendOne = async () => {
        await producer.sendBatch(built);
        return n;
      };
    }
    await sendOne(); // connect, authenticate, attach: not measured
    const stored0 = hub.events().length;
    let events = 0;
    let sends = 0;
    const t0 = performance.now();
    const deadline = t0 + SECONDS * 1000;
    while (performance.now() < deadline) {
      events += await sendOne();
      sends++;
    }
    const seconds = (performance.now() - t0) / 1000;
    const stored = hub.events().length - stored0;
    const label = `${c.batch === 0 ? 'max (1 MiB)' : c.batch} per batch${c.store ? ', --store' : ''}${c.prebuilt ? ', pre-built' : ''}`;
    console.log(
      `${label.padEnd(40)} ${Math.round(events / seconds)
        .toString()
        .padStart(
          8,
        )} events/s  ${(sends / seconds).toFixed(0).padStart(6)} sends/s  (${events} events in ${sends} sends, ${seconds.toFixed(1)} s${stored === events ? '' : `, STORED ${stored}`})`,
    );
  } finally {
    await producer.close();
    await hub.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  }
}

export async function run(): Promise<void> {
  console.log(
    `sequential sends from one EventHubProducerClient, ~${JSON.stringify(recordBody(0)).length} byte events, ${SECONDS} s per case`,
  );
  for (const c of [
    { name: '1', batch: 1, store: false },
    { name: '100', batch: 100, store: false },
    { name: 'max', batch: 0, store: false },
    { name: '1-store', batch: 1, store: true },
    { name: '100-store', batch: 100, store: true },
    { name: 'max-store', batch: 0, store: true },
    { name: '1-prebuilt', batch: 1, store: false, prebuilt: true },
    { name: '100-prebuilt', batch: 100, store: false, prebuilt: true },
    { name: 'max-prebuilt', batch: 0, store: false, prebuilt: true },
  ]) {
    await measure(c);
  }
}
