import {
  EventHubConsumerClient,
  EventHubProducerClient,
  earliestEventPosition,
  type ReceivedEventData,
} from '@azure/event-hubs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type EventHubsEmulator, startEventHubsEmulator } from '../../../src/emulators/eventhubs/index.js';

const retryOptions = { maxRetries: 1, retryDelayInMs: 50, maxRetryDelayInMs: 100, timeoutInMs: 5_000 };

let hub: EventHubsEmulator;
beforeAll(async () => {
  hub = await startEventHubsEmulator();
});
afterAll(async () => {
  await hub?.stop();
});

describe('smoke', () => {
  it('sends and reads properties', async () => {
    const producer = new EventHubProducerClient(hub.connectionString, { retryOptions });
    try {
      const props = await producer.getEventHubProperties();
      expect(props.partitionIds).toEqual(['0', '1']);
      await producer.sendBatch([{ body: { a: 1 } }, { body: { a: 2 } }]);
      const batch = await producer.createBatch({ partitionKey: 'vm-1' });
      batch.tryAdd({ body: 'x' });
      await producer.sendBatch(batch);
      const p0 = await producer.getPartitionProperties('0');
      const p1 = await producer.getPartitionProperties('1');
      console.log(p0, p1, hub.events());
    } finally {
      await producer.close();
    }
  });
});
