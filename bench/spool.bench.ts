/**
 * Spool and delivery loop figures on the real filesystem of the temp dir (with fsync):
 * - append throughput, one record per append (each: file fsync + rename + directory fsync),
 * - append throughput, batched appends (one directory fsync per append call),
 * - open (replay scan) of a 10k backlog,
 * - drain of that 10k backlog through a fast in-process sink (batch reads, batched unlinks,
 *   one directory fsync per batch).
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { EMPTY_VM_IDENTITY, type ShipperRecord } from '../src/lifecycle/record.js';
import { createLogger } from '../src/observability/logger.js';
import { DeliveryLoop } from '../src/pipeline/delivery.js';
import type { Sink } from '../src/sinks/sink.js';
import { Spool } from '../src/spool/spool.js';

function record(i: number): ShipperRecord {
  const identity = {
    ...EMPTY_VM_IDENTITY,
    vmName: 'bench-vm-0001',
    vmId: '6f1a7c4e-0b1d-4a47-9a55-3c1f2f0e9d21',
    vmResourceId:
      '/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/bench-vm-0001',
    subscriptionId: '00000000-0000-0000-0000-000000000000',
    resourceGroup: 'rg',
    location: 'westeurope',
    vmSize: 'Standard_D2s_v5',
    priority: 'Regular',
    osType: 'Linux',
    hostname: 'bench-vm-0001',
    shipperVersion: '0.1.0',
  };
  if (i % 4 === 3) {
    return {
      schemaVersion: 1,
      recordType: 'heartbeat',
      recordId: `hb-${i}`,
      observedAt: new Date().toISOString(),
      phase: '',
      activeEvents: 1,
      spoolDepth: i,
      pollsOk: i,
      pollsFailed: 0,
      lastIncarnation: 7,
      uptimeSeconds: i,
      ...identity,
    };
  }
  return {
    schemaVersion: 1,
    recordType: 'lifecycle',
    recordId: `lc-${i}-0123456789abcdef0123456789abcdef`,
    observedAt: new Date().toISOString(),
    phase: 'Scheduled',
    inferred: false,
    gapSeconds: 0,
    eventId: `C7061BAC-AFDC-4513-B24B-${String(i).padStart(12, '0')}`,
    eventType: 'Freeze',
    eventStatus: 'Scheduled',
    eventSource: 'Platform',
    resourceType: 'VirtualMachine',
    description: 'Host server is undergoing maintenance.',
    resources: ['bench-vm-0001'],
    affectsThisVm: true,
    notBefore: '2026-01-01T00:15:00.000Z',
    durationInSeconds: 9,
    documentIncarnation: i,
    ...identity,
  };
}

function rate(n: number, ms: number): string {
  return `${Math.round((n / ms) * 1000).toLocaleString('en-US')} records/s (${n} in ${ms.toFixed(0)} ms)`;
}

class FastSink implements Sink {
  readonly name = 'bench-fast';
  received = 0;
  bytes = 0;
  async send(batch: readonly ShipperRecord[]): Promise<void> {
    for (const r of batch) this.bytes += JSON.stringify(r).length;
    this.received += batch.length;
  }
  async close(): Promise<void> {}
}

export async function run(): Promise<void> {
  const logger = createLogger({ level: 'warn' });
  const root = await mkdtemp(join(tmpdir(), 'se-spool-bench-'));
  try {
    // 1. One record per append.
    {
      const spool = await Spool.open({ dir: join(root, 'single'), logger });
      const n = 300;
      const t0 = performance.now();
      for (let i = 0; i < n; i++) await spool.append([record(i)]);
      console.log(`append, 1 record per call (fsync file + dir): ${rate(n, performance.now() - t0)}`);
      console.log(`  encoded record size ≈ ${Math.round(spool.bytes / spool.depth)} bytes`);
      await spool.close();
    }
    // 2. Batched appends.
    for (const batch of [10, 100]) {
      const spool = await Spool.open({ dir: join(root, `batched-${batch}`), logger });
      const n = 3000;
      const t0 = performance.now();
      for (let i = 0; i < n; i += batch) {
        await spool.append(Array.from({ length: batch }, (_, k) => record(i + k)));
      }
      console.log(`append, ${batch} records per call: ${rate(n, performance.now() - t0)}`);
      await spool.close();
    }
    // 3. A 10k backlog: reopen (scan + verify) and drain through a fast sink.
    {
      const dir = join(root, 'backlog');
      const n = 10_000;
      const filler = await Spool.open({ dir, logger });
      for (let i = 0; i < n; i += 500) {
        await filler.append(Array.from({ length: 500 }, (_, k) => record(i + k)));
      }
      await filler.close();

      let t0 = performance.now();
      const spool = await Spool.open({ dir, logger });
      console.log(
        `open with a backlog of ${spool.depth} records (read + verify): ${rate(spool.depth, performance.now() - t0)}`,
      );

      for (const maxBatch of [256]) {
        const sink = new FastSink();
        const loop = new DeliveryLoop({ spool, sink, logger, maxBatch });
        t0 = performance.now();
        loop.start();
        await loop.stop({ flushTimeoutMs: 600_000 });
        const ms = performance.now() - t0;
        console.log(
          `drain ${sink.received} spooled records through a fast sink (maxBatch ${maxBatch}): ${rate(sink.received, ms)}`,
        );
        console.log(`  spool depth after: ${spool.depth}`);
      }
      await spool.close();
    }
  } finally {
    await rm(root, { recursive: true, force: true });
  }
}
