/**
 * --store: partitions appended to NDJSON files that survive a restart and read with plain tools.
 */
import { appendFileSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { EventHubConsumerClient, EventHubProducerClient, earliestEventPosition } from '@azure/event-hubs';
import { afterEach, describe, expect, it } from 'vitest';
import { startEventHubsEmulator } from '../../../src/emulators/eventhubs/index.js';
import { fastRetry, readPartition } from './helpers.js';

const patientRetry = { maxRetries: 8, retryDelayInMs: 50, maxRetryDelayInMs: 100, timeoutInMs: 1_000 };

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});
function tempDir() {
  const d = mkdtempSync(join(tmpdir(), 'eh-store-'));
  dirs.push(d);
  return d;
}

describe('store', () => {
  it('appends NDJSON per partition and reloads it on a new emulator on the same port', async () => {
    const dir = tempDir();
    const first = await startEventHubsEmulator({ store: dir, key: 'k' });
    const port = first.port;
    const p = new EventHubProducerClient(first.connectionString, { retryOptions: fastRetry });
    await p.sendBatch([{ body: { n: 1 } }, { body: { n: 2 } }], { partitionId: '0' });
    await p.sendBatch([{ body: 'text' }], { partitionKey: 'vm-a' });
    await p.close();
    const before = first.events();
    await first.stop();

    const lines = readFileSync(join(dir, 'scheduled-events', '0.ndjson'), 'utf8')
      .trim()
      .split('\n');
    const parsed = lines.map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(parsed[0]).toMatchObject({
      hub: 'scheduled-events',
      partition: '0',
      sequenceNumber: 0,
      offset: '0',
      body: { n: 1 },
    });
    expect(typeof parsed[0]?.enqueuedTime).toBe('string');
    expect(typeof parsed[0]?.message).toBe('string');

    const second = await startEventHubsEmulator({ store: dir, key: 'k', port });
    try {
      expect(second.port).toBe(port);
      expect(second.events().map(({ bodyBytes: _b, ...e }) => e)).toEqual(
        before.map(({ bodyBytes: _b, ...e }) => e),
      );
      const c = new EventHubConsumerClient('$default', second.connectionString, { retryOptions: fastRetry });
      const before0 = before.filter((e) => e.partitionId === '0');
      const got = await readPartition(c, '0', earliestEventPosition, before0.length);
      expect(got.map((e) => e.body)).toEqual(before0.map((e) => e.body));
      expect(got.map((e) => e.offset)).toEqual(before0.map((e) => e.offset));
      const q = new EventHubProducerClient(second.connectionString, { retryOptions: fastRetry });
      await q.sendBatch([{ body: { n: 3 } }], { partitionId: '0' });
      await q.close();
      await c.close();
      const p0 = second.events(undefined, '0');
      expect(p0.map((e) => e.sequenceNumber)).toEqual([
        ...before0.map((e) => e.sequenceNumber),
        before0.length,
      ]);
      expect(Number(p0.at(-1)?.offset)).toBeGreaterThan(Number(p0.at(-2)?.offset));
    } finally {
      await second.stop();
    }
  });

  it('restart() drops clients and reloads from disk; a torn last line is discarded', async () => {
    const dir = tempDir();
    const hub = await startEventHubsEmulator({ store: dir, key: 'k' });
    const p = new EventHubProducerClient(hub.connectionString, { retryOptions: patientRetry });
    try {
      await p.sendBatch([{ body: 'one' }], { partitionId: '1' });
      appendFileSync(
        join(dir, 'scheduled-events', '1.ndjson'),
        '{"hub":"scheduled-events","partition":"1","seq',
      );
      const port = hub.port;
      await hub.restart();
      expect(hub.port).toBe(port);
      expect(hub.events(undefined, '1').map((e) => e.body)).toEqual(['one']);
      await p.sendBatch([{ body: 'two' }], { partitionId: '1' });
      expect(hub.events(undefined, '1').map((e) => [e.sequenceNumber, e.body])).toEqual([
        [0, 'one'],
        [1, 'two'],
      ]);
      const text = readFileSync(join(dir, 'scheduled-events', '1.ndjson'), 'utf8');
      expect(
        text
          .trim()
          .split('\n')
          .map((l) => (JSON.parse(l) as { body: unknown }).body),
      ).toEqual(['one', 'two']);
    } finally {
      await p.close();
      await hub.stop();
    }
  });

  it('without a store, restart() keeps the events in memory', async () => {
    const hub = await startEventHubsEmulator();
    const p = new EventHubProducerClient(hub.connectionString, { retryOptions: patientRetry });
    try {
      await p.sendBatch([{ body: 'kept' }]);
      await hub.restart();
      await p.sendBatch([{ body: 'after' }]);
      expect(
        hub
          .events()
          .map((e) => e.body)
          .sort(),
      ).toEqual(['after', 'kept']);
    } finally {
      await p.close();
      await hub.stop();
    }
  });
});
