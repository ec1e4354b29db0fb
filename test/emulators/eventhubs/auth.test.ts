/**
 * CBS with real SAS verification: unit checks of the token verifier, and the official client
 * against wrong keys, rotated keys and anonymous mode.
 */
import { EventHubProducerClient } from '@azure/event-hubs';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  type EventHubsEmulator,
  signSas,
  startEventHubsEmulator,
  verifySas,
} from '../../../src/emulators/eventhubs/index.js';
import { errorOf, fastRetry, patientRetry } from './helpers.js';

const key = { name: 'send', key: 'c2VjcmV0LWtleS1mb3ItdGVzdHM=' };
const aud = 'sb://127.0.0.1:5672/scheduled-events';
const inAnHour = Math.floor(Date.now() / 1000) + 3600;

describe('SAS verification', () => {
  it('accepts a well-formed token for the requested audience, case-insensitively', () => {
    const v = verifySas(signSas(aud, key, inAnHour), aud.toUpperCase(), [key]);
    expect(v).toMatchObject({ ok: true, status: 200, keyName: 'send', audience: aud });
  });
  it('refuses a wrong key, an unknown key name, an expired token, another audience, garbage', () => {
    const cases: [string, RegExp][] = [
      [signSas(aud, { name: 'send', key: 'wrong' }, inAnHour), /invalid signature/],
      [signSas(aud, { name: 'other', key: key.key }, inAnHour), /unknown SharedAccessKeyName/],
      [signSas(aud, key, Math.floor(Date.now() / 1000) - 1), /expired/],
      [signSas(`${aud}/Partitions/0`, key, inAnHour), /does not match/],
      ['SharedAccessSignature sr=x&sig=y', /required/],
      ['Bearer abc', /malformed/],
    ];
    for (const [token, reason] of cases) {
      const v = verifySas(token, aud, [key]);
      expect(v.ok).toBe(false);
      expect(v.status).toBe(401);
      expect(v.reason).toMatch(reason);
      expect(v.reason).not.toContain(key.key);
    }
  });
  it('refuses a tampered expiry (the signature covers it)', () => {
    const token = signSas(aud, key, inAnHour).replace(`se=${inAnHour}`, `se=${inAnHour + 1000}`);
    expect(verifySas(token, aud, [key]).reason).toMatch(/invalid signature/);
  });
});

describe('CBS with the official client', () => {
  let hub: EventHubsEmulator;
  const clients: EventHubProducerClient[] = [];
  const producer = (cs: string, retryOptions = fastRetry) => {
    const p = new EventHubProducerClient(cs, { retryOptions });
    clients.push(p);
    return p;
  };
  beforeAll(async () => {
    hub = await startEventHubsEmulator({ keyName: 'shipper', key: 'right-key' });
  });
  afterEach(async () => {
    await Promise.all(clients.splice(0).map((c) => c.close().catch(() => {})));
  });
  afterAll(async () => {
    await hub?.stop();
  });

  it('a wrong key gets 401: the send fails with UnauthorizedError and nothing is stored', async () => {
    const before = hub.events().length;
    const err = await errorOf(
      producer(hub.connectionStringFor({ key: 'wrong-key' })).sendBatch([{ body: 'nope' }]),
    );
    expect(err.code).toBe('UnauthorizedError');
    const wrongName = await errorOf(
      producer(hub.connectionStringFor({ keyName: 'nobody' })).getEventHubProperties(),
    );
    expect(wrongName.code).toBe('UnauthorizedError');
    expect(hub.events().length).toBe(before);
    expect(hub.stats.cbsRejected).toBeGreaterThanOrEqual(2);
  });

  it('a good key works; an unknown hub is MessagingEntityNotFoundError', async () => {
    await producer(hub.connectionString).sendBatch([{ body: 'yes' }]);
    expect(hub.events().map((e) => e.body)).toContain('yes');
    const err = await errorOf(
      producer(hub.connectionStringFor({ hub: 'no-such-hub' })).sendBatch([{ body: 'x' }]),
    );
    expect(err.code).toBe('MessagingEntityNotFoundError');
  });

  it('key rotation over the control API lets a client with the new key in (wrong credentials, then fixed)', async () => {
    const p = producer(hub.connectionStringFor({ key: 'rotated-key' }), patientRetry);
    expect(
      (await errorOf(producer(hub.connectionStringFor({ key: 'rotated-key' })).sendBatch([{ body: 'r0' }])))
        .code,
    ).toBe('UnauthorizedError');
    const res = await fetch(`${hub.controlUrl}/keys`, {
      method: 'PUT',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'shipper', key: 'rotated-key' }),
    });
    expect(res.status).toBe(200);
    expect(JSON.stringify(await res.json())).not.toContain('rotated-key');
    await p.sendBatch([{ body: 'after-rotation' }]);
    expect(hub.events().map((e) => e.body)).toContain('after-rotation');
    expect(hub.connectionString).toContain('SharedAccessKey=rotated-key;');
    hub.setKey('shipper', 'right-key');
  });
});

describe('anonymous mode', () => {
  it('--allow-anonymous accepts any token (explicitly insecure)', async () => {
    const hub = await startEventHubsEmulator({ allowAnonymous: true, key: 'real' });
    const p = new EventHubProducerClient(hub.connectionStringFor({ key: 'anything' }), {
      retryOptions: fastRetry,
    });
    try {
      await p.sendBatch([{ body: 'anon' }]);
      expect(hub.events().map((e) => e.body)).toEqual(['anon']);
    } finally {
      await p.close();
      await hub.stop();
    }
  });
});
