/**
 * The emulator against the unmodified official @azure/event-hubs v6 clients over TCP.
 */
import {
  EventHubConsumerClient,
  EventHubProducerClient,
  earliestEventPosition,
  type LastEnqueuedEventProperties,
  latestEventPosition,
  type ReceivedEventData,
} from '@azure/event-hubs';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  type EmulatorEvent,
  type EventHubsEmulator,
  startEventHubsEmulator,
} from '../../../src/emulators/eventhubs/index.js';
import { errorOf, fastRetry, readPartition, until } from './helpers.js';

let hub: EventHubsEmulator;
const clients: { close(): Promise<void> }[] = [];
function producer(cs = hub.connectionString) {
  const p = new EventHubProducerClient(cs, { retryOptions: fastRetry });
  clients.push(p);
  return p;
}
function consumer(group = '$default') {
  const c = new EventHubConsumerClient(group, hub.connectionString, { retryOptions: fastRetry });
  clients.push(c);
  return c;
}

beforeAll(async () => {
  hub = await startEventHubsEmulator({ consumerGroups: ['analytics'] });
});
afterEach(async () => {
  await Promise.all(clients.splice(0).map((c) => c.close().catch(() => {})));
});
afterAll(async () => {
  await hub?.stop();
});

describe('Event Hubs emulator with @azure/event-hubs', () => {
  it('serves hub and partition properties, with emptiness and the last enqueued event', async () => {
    const p = producer();
    const props = await p.getEventHubProperties();
    expect(props.name).toBe('scheduled-events');
    expect(props.partitionIds).toEqual(['0', '1']);
    expect(props.createdOn).toBeInstanceOf(Date);
    const before = await p.getPartitionProperties('1');
    const wasEmpty = hub.events(undefined, '1').length === 0;
    expect(before.isEmpty).toBe(wasEmpty);
    await p.sendBatch([{ body: { n: 1 } }], { partitionId: '1' });
    const after = await p.getPartitionProperties('1');
    const last = hub.events(undefined, '1').at(-1);
    expect(after.isEmpty).toBe(false);
    expect(after.beginningSequenceNumber).toBe(0);
    expect(after.lastEnqueuedSequenceNumber).toBe(last?.sequenceNumber);
    expect(after.lastEnqueuedOffset).toBe(last?.offset);
    expect(after.lastEnqueuedOnUtc.getTime()).toBe(last?.enqueuedTimeUtc.getTime());
    const err = await errorOf(p.getPartitionProperties('7'));
    expect(err.code).toBe('ArgumentOutOfRangeError');
    const send = await errorOf(p.sendBatch([{ body: 'x' }], { partitionId: '7' }));
    expect(send.code).toBe('ArgumentOutOfRangeError');
  });

  it('stores single events and batches, with partition ids and partition keys', async () => {
    const p = producer();
    const start = hub.events().length;
    await p.sendBatch([{ body: { kind: 'single' } }]);
    await p.sendBatch([{ body: 'a' }, { body: 'b' }], { partitionId: '0' });
    await p.sendBatch([{ body: 'k1' }, { body: 'k2' }], { partitionKey: 'vm-42' });
    const batch = await p.createBatch({ partitionKey: 'vm-42' });
    expect(batch.tryAdd({ body: 'k3', properties: { source: 'test' } })).toBe(true);
    await p.sendBatch(batch);
    const events = hub.events().slice();
    expect(events.length - start).toBe(6);
    const keyed = hub.events().filter((e) => e.partitionKey === 'vm-42');
    expect(keyed.map((e) => e.body)).toEqual(['k1', 'k2', 'k3']);
    expect(new Set(keyed.map((e) => e.partitionId)).size).toBe(1); // a key always maps to one partition
    expect(keyed.at(-1)?.applicationProperties).toEqual({ source: 'test' });
    const p0 = hub.events(undefined, '0');
    expect(p0.map((e) => e.body)).toEqual(expect.arrayContaining(['a', 'b']));
  });

  it('spreads unkeyed batches round-robin over the partitions', async () => {
    const p = producer();
    const count = (pid: string) => hub.events(undefined, pid).length;
    const before = [count('0'), count('1')];
    for (let i = 0; i < 4; i++) await p.sendBatch([{ body: { rr: i } }]);
    expect([count('0') - (before[0] ?? 0), count('1') - (before[1] ?? 0)]).toEqual([2, 2]);
  });

  it('advertises 1 MiB and accepts a full batch of that size', async () => {
    const p = producer();
    const batch = await p.createBatch({ partitionId: '1' });
    expect(batch.maxSizeInBytes).toBe(1024 * 1024);
    const body = 'x'.repeat(1000);
    let n = 0;
    while (batch.tryAdd({ body: { n, body } })) n++;
    expect(n).toBeGreaterThan(900);
    const start = hub.events(undefined, '1').length;
    await p.sendBatch(batch);
    const stored = hub.events(undefined, '1').slice(start);
    expect(stored).toHaveLength(n);
    expect(stored.at(-1)?.body).toMatchObject({ n: n - 1 });
    // The client itself refuses a batch larger than the link allows.
    const tooBig = await errorOf(p.createBatch({ maxSizeInBytes: 2 * 1024 * 1024 }));
    expect(tooBig.message).toMatch(/max/i);
  });

  it('consumes from earliest and from an offset across two partitions, monotonically', async () => {
    const p = producer();
    for (let i = 0; i < 5; i++) {
      await p.sendBatch([{ body: { i, p: 0 } }], { partitionId: '0' });
      await p.sendBatch([{ body: { i, p: 1 } }], { partitionId: '1' });
    }
    const c = consumer();
    for (const pid of ['0', '1']) {
      const stored = hub.events(undefined, pid);
      const all = await readPartition(c, pid, earliestEventPosition, stored.length);
      expect(all.map((e) => e.sequenceNumber)).toEqual(stored.map((e) => e.sequenceNumber));
      expect(all.map((e) => e.offset)).toEqual(stored.map((e) => e.offset));
      all.slice(1).forEach((e, i) => {
        const prev = all[i] as ReceivedEventData;
        expect(e.sequenceNumber).toBe(prev.sequenceNumber + 1);
        expect(Number(e.offset)).toBeGreaterThan(Number(prev.offset));
        expect(e.enqueuedTimeUtc.getTime()).toBeGreaterThanOrEqual(prev.enqueuedTimeUtc.getTime());
      });
      expect(all.map((e) => e.body)).toEqual(stored.map((e) => e.body));
      // exclusive and inclusive offsets
      const from = stored[2] as EmulatorEvent;
      const after = await readPartition(c, pid, { offset: from.offset }, stored.length - 3);
      expect(after[0]?.sequenceNumber).toBe(from.sequenceNumber + 1);
      const incl = await readPartition(c, pid, { offset: from.offset, isInclusive: true }, stored.length - 2);
      expect(incl[0]?.sequenceNumber).toBe(from.sequenceNumber);
      // by sequence number and by enqueued time
      const bySeq = await readPartition(c, pid, { sequenceNumber: 3, isInclusive: true }, stored.length - 3);
      expect(bySeq[0]?.sequenceNumber).toBe(3);
      const last = stored.at(-1) as EmulatorEvent;
      const byTime = await readPartition(
        c,
        pid,
        { enqueuedOn: new Date(last.enqueuedTimeUtc.getTime() - 1) },
        1,
      );
      expect(byTime[0]?.enqueuedTimeUtc.getTime()).toBeGreaterThan(last.enqueuedTimeUtc.getTime() - 1);
    }
    const props = await c.getPartitionProperties('0');
    expect(props.lastEnqueuedSequenceNumber).toBe(hub.events(undefined, '0').length - 1);
  });

  it('streams new events live to a consumer that started at latest, in a configured consumer group', async () => {
    const c = consumer('analytics');
    const p = producer();
    const reading = readPartition(c, '0', latestEventPosition, 3);
    // wait until the link is attached before sending (latest = what arrives after the attach)
    await until(() => hub.stats.openConsumers > 0);
    for (let i = 0; i < 3; i++) await p.sendBatch([{ body: { live: i } }], { partitionId: '0' });
    const got = await reading;
    expect(got.map((e) => e.body)).toEqual([{ live: 0 }, { live: 1 }, { live: 2 }]);
    const unknownGroup = new EventHubConsumerClient('nope', hub.connectionString, {
      retryOptions: fastRetry,
    });
    clients.push(unknownGroup);
    const failure = new Promise<{ code?: string }>((resolve) => {
      const sub = unknownGroup.subscribe(
        '0',
        {
          processEvents: async () => {},
          processError: async (err) => {
            resolve(err as { code?: string });
            void sub.close();
          },
        },
        { startPosition: earliestEventPosition },
      );
    });
    expect((await failure).code).toBe('MessagingEntityNotFoundError');
  });

  it('respects credit: a consumer with a small batch size still gets everything, in order', async () => {
    const p = producer();
    await p.sendBatch(
      Array.from({ length: 120 }, (_, i) => ({ body: { credit: i } })),
      { partitionId: '1' },
    );
    const stored = hub.events(undefined, '1');
    const c = consumer();
    const got = await readPartition(c, '1', earliestEventPosition, stored.length, { maxBatchSize: 7 });
    expect(got.map((e) => e.sequenceNumber)).toEqual(stored.map((e) => e.sequenceNumber));
  });

  it('reports last enqueued event properties to a consumer that tracks them', async () => {
    const p = producer();
    await p.sendBatch([{ body: 't1' }, { body: 't2' }], { partitionId: '1' });
    const last = hub.events(undefined, '1').at(-1) as EmulatorEvent;
    const c = consumer();
    const tracked = await new Promise<LastEnqueuedEventProperties>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('no events')), 10_000);
      const sub = c.subscribe(
        '1',
        {
          processEvents: async (events, context) => {
            if (events.length === 0) return;
            clearTimeout(timer);
            resolve({ ...context.lastEnqueuedEventProperties });
            await sub.close();
          },
          processError: async () => {},
        },
        {
          startPosition: earliestEventPosition,
          trackLastEnqueuedEventProperties: true,
          maxWaitTimeInSeconds: 1,
        },
      );
    });
    expect(tracked.sequenceNumber).toBe(last.sequenceNumber);
    expect(tracked.offset).toBe(last.offset);
    expect(tracked.enqueuedOn?.getTime()).toBe(last.enqueuedTimeUtc.getTime());
    expect(tracked.retrievedOn).toBeInstanceOf(Date);
  });

  it('hands a partition to the higher epoch (owner level) and disconnects the older reader', async () => {
    const c1 = consumer();
    const c2 = consumer();
    const errors: { code?: string; message: string }[] = [];
    const sub1 = c1.subscribe(
      '0',
      {
        processEvents: async () => {},
        processError: async (err) => void errors.push(err),
      },
      { startPosition: latestEventPosition, ownerLevel: 1, maxWaitTimeInSeconds: 1 },
    );
    await until(() => hub.stats.openConsumers > 0);
    const sub2 = c2.subscribe(
      '0',
      { processEvents: async () => {}, processError: async () => {} },
      { startPosition: latestEventPosition, ownerLevel: 2, maxWaitTimeInSeconds: 1 },
    );
    for (let i = 0; i < 50 && errors.length === 0; i++) await new Promise((r) => setTimeout(r, 100));
    await sub1.close();
    await sub2.close();
    expect(errors[0]?.code).toBe('ReceiverDisconnectedError');
  });
});
