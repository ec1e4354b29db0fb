/**
 * Each injected fault gives the official client the error the real service would, and the
 * client recovers once the fault ends.
 */
import { EventHubProducerClient } from '@azure/event-hubs';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type EventHubsEmulator, startEventHubsEmulator } from '../../../src/emulators/eventhubs/index.js';
import { errorOf, fastRetry, patientRetry, until } from './helpers.js';

let hub: EventHubsEmulator;
const clients: EventHubProducerClient[] = [];
function producer(retryOptions = fastRetry, cs = hub.connectionString) {
  const p = new EventHubProducerClient(cs, { retryOptions });
  clients.push(p);
  return p;
}
const bodies = () => hub.events().map((e) => e.body);

beforeAll(async () => {
  hub = await startEventHubsEmulator();
});
afterEach(async () => {
  hub.clearFaults();
  if (!hub.faults.listening) await hub.resumeListening();
  await Promise.all(clients.splice(0).map((c) => c.close().catch(() => {})));
});
afterAll(async () => {
  await hub?.stop();
});

describe('fault injection', () => {
  it('server busy: the send fails with ServerBusyError, then a retrying client gets through', async () => {
    hub.rejectNextSends(1);
    const err = await errorOf(producer().sendBatch([{ body: 'busy-1' }]));
    expect(err.code).toBe('ServerBusyError');
    expect(err.retryable).toBe(true);
    expect(bodies()).not.toContain('busy-1');
    hub.rejectNextSends(3);
    await producer(patientRetry).sendBatch([{ body: 'busy-2' }]);
    expect(bodies().filter((b) => b === 'busy-2')).toHaveLength(1);
    expect(hub.faults.rejectNext).toBe(0);
  });

  it('other rejection conditions map to their client errors', async () => {
    hub.rejectNextSends(1, { condition: 'amqp:resource-limit-exceeded', description: 'quota' });
    const err = await errorOf(producer().sendBatch([{ body: 'quota' }]));
    expect(err.code).toBe('QuotaExceededError');
  });

  it('hang: an unsettled send times out (OperationTimeoutError); a retry after the hang is stored', async () => {
    hub.hangSends(1);
    const p = producer({ ...fastRetry, timeoutInMs: 800 });
    const err = await errorOf(p.sendBatch([{ body: 'hung' }]));
    expect(err.code).toBe('OperationTimeoutError');
    expect(bodies()).not.toContain('hung');
    hub.hangSends(1);
    await producer({ ...patientRetry, timeoutInMs: 800 }).sendBatch([{ body: 'after-hang' }]);
    expect(bodies()).toContain('after-hang');
    hub.hangSends();
    const hungBefore = hub.faults.hungDeliveries;
    const pending = errorOf(p.sendBatch([{ body: 'hung-2' }]));
    await until(() => hub.faults.hungDeliveries > hungBefore);
    hub.stopHanging();
    expect((await pending).code).toBe('OperationTimeoutError');
    await p.sendBatch([{ body: 'unhung' }]);
    expect(bodies()).toContain('unhung');
  });

  it('detach: an in-flight send is never settled (the client times out); the next send re-attaches', async () => {
    const p = producer();
    await p.sendBatch([{ body: 'before-detach' }]);
    hub.hangSends(1);
    const pending = errorOf(p.sendBatch([{ body: 'in-flight' }]));
    await until(() => hub.faults.hungDeliveries > 0);
    expect(hub.detachLinks()).toBeGreaterThan(0);
    // Like the service, the emulator does not settle a delivery of a detached link; the SDK leaves
    // link recovery to itself and so reports the in-flight send as timed out (retryable).
    const err = await pending;
    expect(err.code).toBe('OperationTimeoutError');
    expect(err.retryable).toBe(true);
    await p.sendBatch([{ body: 'after-detach' }]);
    expect(bodies()).toContain('after-detach');
  });

  it('dropped connection: an in-flight send fails; the client reconnects', async () => {
    const p = producer();
    await p.sendBatch([{ body: 'before-drop' }]);
    hub.hangSends(1);
    const pending = errorOf(p.sendBatch([{ body: 'in-flight-drop' }]));
    await until(() => hub.faults.hungDeliveries > 0);
    expect(hub.dropConnections()).toBeGreaterThan(0);
    const err = await pending;
    expect(err.retryable).toBe(true);
    await producer(patientRetry).sendBatch([{ body: 'after-drop' }]);
    await p.sendBatch([{ body: 'after-drop-same-client' }]);
    expect(bodies()).toEqual(expect.arrayContaining(['after-drop', 'after-drop-same-client']));
  });

  it('offline: connections are refused, then the same port serves again', async () => {
    const port = hub.port;
    const p = producer();
    await p.sendBatch([{ body: 'before-outage' }]);
    await hub.stopListening();
    expect(hub.faults.listening).toBe(false);
    // A fresh client cannot connect at all; an existing one loses its connection and times out.
    const fresh = await errorOf(producer().sendBatch([{ body: 'during-outage' }]));
    expect(`${fresh.code} ${fresh.message}`).toMatch(/ECONNREFUSED/);
    const existing = await errorOf(p.sendBatch([{ body: 'during-outage' }]));
    expect(existing.code).toMatch(/OperationTimeoutError|ECONNREFUSED|ServiceCommunicationError/);
    await hub.resumeListening();
    expect(hub.port).toBe(port);
    await producer(patientRetry).sendBatch([{ body: 'after-outage' }]);
    await p.sendBatch([{ body: 'after-outage-same-client' }]);
    expect(bodies()).toEqual(expect.arrayContaining(['after-outage', 'after-outage-same-client']));
    expect(bodies()).not.toContain('during-outage');
  });

  it('offline for a while: a patient client rides it out', async () => {
    await hub.stopListening({ durationMs: 400 });
    await producer({
      maxRetries: 20,
      retryDelayInMs: 100,
      maxRetryDelayInMs: 100,
      timeoutInMs: 2_000,
    }).sendBatch([{ body: 'rode-out' }]);
    expect(hub.faults.listening).toBe(true);
    expect(bodies()).toContain('rode-out');
  });

  it('slow accepts: beyond the client timeout the connection fails; shorter delays only slow it', async () => {
    hub.setAcceptDelay(1_500);
    const err = await errorOf(producer({ ...fastRetry, timeoutInMs: 500 }).sendBatch([{ body: 'too-slow' }]));
    expect(err.code ?? err.name).toMatch(/OperationTimeoutError|ServiceCommunicationError|ConnectionLost/);
    hub.setAcceptDelay(100);
    const accepted = hub.stats.connectionsAccepted;
    await producer().sendBatch([{ body: 'slow-but-ok' }]);
    expect(hub.stats.connectionsAccepted).toBeGreaterThan(accepted);
    expect(bodies()).toContain('slow-but-ok');
  });
});
