/**
 * Test helpers for the spool and the delivery loop: record builders, a log capture, temp dirs,
 * and a test-only Sink (the real Event Hubs sink is tested end to end elsewhere).
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'vitest';
import {
  EMPTY_VM_IDENTITY,
  type HeartbeatRecord,
  type LifecycleRecord,
  type ShipperRecord,
} from '../../src/lifecycle/record.js';
import { createLogger, type Logger } from '../../src/observability/logger.js';
import type { Sink } from '../../src/sinks/sink.js';

let counter = 0;

export function lifecycle(id?: string, extra: Partial<LifecycleRecord> = {}): LifecycleRecord {
  counter += 1;
  return {
    schemaVersion: 1,
    recordType: 'lifecycle',
    recordId: id ?? `lc-${counter}`,
    observedAt: new Date(Date.UTC(2026, 0, 1, 0, 0, counter % 60)).toISOString(),
    phase: 'Scheduled',
    inferred: false,
    gapSeconds: 0,
    eventId: `EVT-${counter}`,
    eventType: 'Reboot',
    eventStatus: 'Scheduled',
    eventSource: 'Platform',
    resourceType: 'VirtualMachine',
    description: 'Virtual machine is going to be restarted as requested by authorized user.',
    resources: ['vm-1'],
    affectsThisVm: true,
    notBefore: 'Mon, 11 Apr 2022 22:26:58 GMT',
    durationInSeconds: -1,
    documentIncarnation: counter,
    ...EMPTY_VM_IDENTITY,
    vmName: 'vm-1',
    vmId: '00000000-0000-0000-0000-000000000001',
    hostname: 'vm-1',
    shipperVersion: '0.1.0',
    ...extra,
  };
}

export function heartbeat(id?: string): HeartbeatRecord {
  counter += 1;
  return {
    schemaVersion: 1,
    recordType: 'heartbeat',
    recordId: id ?? `hb-${counter}`,
    observedAt: new Date(Date.UTC(2026, 0, 1, 0, 0, counter % 60)).toISOString(),
    phase: '',
    activeEvents: 0,
    spoolDepth: 0,
    pollsOk: counter,
    pollsFailed: 0,
    lastIncarnation: -1,
    uptimeSeconds: counter,
    ...EMPTY_VM_IDENTITY,
    vmName: 'vm-1',
    vmId: '00000000-0000-0000-0000-000000000001',
    hostname: 'vm-1',
    shipperVersion: '0.1.0',
  };
}

export interface LogLine {
  level: string;
  msg: string;
  [key: string]: unknown;
}

/** A real pino logger whose lines land in `lines` (parsed). */
export function captureLogger(): { logger: Logger; lines: LogLine[] } {
  const lines: LogLine[] = [];
  const logger = createLogger({
    level: 'debug',
    destination: {
      write(chunk: string) {
        lines.push(JSON.parse(chunk) as LogLine);
      },
    },
  });
  return { logger, lines };
}

export async function tempDir(prefix = 'se-spool-'): Promise<{ dir: string; cleanup: () => Promise<void> }> {
  const dir = await mkdtemp(join(tmpdir(), prefix));
  return { dir, cleanup: () => rm(dir, { recursive: true, force: true }) };
}

export type SendBehaviour = (
  batch: readonly ShipperRecord[],
  signal: AbortSignal | undefined,
  call: number,
) => void | Promise<void>;

/**
 * A test-only sink: each call runs `behaviour` (which may throw or hang); when it returns, the
 * batch counts as confirmed and is appended, as NDJSON lines, to `lines`.
 */
export class TestSink implements Sink {
  readonly name = 'test';
  readonly lines: string[] = [];
  readonly batchSizes: number[] = [];
  calls = 0;
  closed = false;
  behaviour: SendBehaviour;

  constructor(behaviour: SendBehaviour = () => undefined) {
    this.behaviour = behaviour;
  }

  async send(batch: readonly ShipperRecord[], signal?: AbortSignal): Promise<void> {
    this.calls += 1;
    await this.behaviour(batch, signal, this.calls);
    this.batchSizes.push(batch.length);
    for (const r of batch) this.lines.push(JSON.stringify(r));
  }

  get records(): ShipperRecord[] {
    return this.lines.map((l) => JSON.parse(l) as ShipperRecord);
  }

  async close(): Promise<void> {
    this.closed = true;
  }
}

/** A behaviour that hangs until the signal aborts, then rejects with its reason (wrapped if not an Error). */
export function hangUntilAborted(signal: AbortSignal | undefined): Promise<void> {
  return new Promise((_resolve, reject) => {
    signal?.addEventListener(
      'abort',
      () => {
        const reason: unknown = signal.reason;
        reject(reason instanceof Error ? reason : new Error('aborted', { cause: reason }));
      },
      { once: true },
    );
  });
}

/**
 * The at-least-once invariant: every lifecycle record in `expected` arrived at least once, and
 * all copies of one recordId are identical (duplicates only of the same record).
 */
export function expectNoLifecycleLoss(expected: readonly ShipperRecord[], sink: TestSink): void {
  const byId = new Map<string, string>();
  for (const line of sink.lines) {
    const id = (JSON.parse(line) as ShipperRecord).recordId;
    const seen = byId.get(id);
    if (seen !== undefined) expect(line, `duplicate of ${id} differs`).toBe(seen);
    byId.set(id, line);
  }
  for (const r of expected) {
    if (r.recordType !== 'lifecycle') continue;
    expect(byId.get(r.recordId), `lifecycle record ${r.recordId} was never delivered`).toBe(
      JSON.stringify(r),
    );
  }
}

/** Polls `predicate` until true (fails after `timeoutMs`). */
export async function until(predicate: () => boolean, timeoutMs = 10_000, what = 'condition'): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}
