/**
 * Protocol paths the official JS client does not take on its own: single (non-batch) messages
 * and oversized transfers, driven with a bare rhea client.
 */
import rhea, { type Connection, type EventContext } from 'rhea';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type EventHubsEmulator,
  signSas,
  startEventHubsEmulator,
} from '../../../src/emulators/eventhubs/index.js';

let hub: EventHubsEmulator;
beforeAll(async () => {
  hub = await startEventHubsEmulator({ key: 'k' });
});
afterAll(async () => {
  await hub?.stop();
});

/** Opens an AMQP connection, puts a token for `audience` on $cbs, and returns the CBS status. */
async function connectWithToken(
  audience: string,
  keyValue: string,
): Promise<{ conn: Connection; status: number }> {
  const container = rhea.create_container();
  const conn = container.connect({
    host: '127.0.0.1',
    port: hub.port,
    reconnect: false,
    username: 'test',
  });
  const replyTo = 'cbs-reply';
  const status = await new Promise<number>((resolve, reject) => {
    const receiver = conn.open_receiver({ source: { address: '$cbs' }, name: replyTo });
    receiver.on('message', (ctx: EventContext) => {
      const props = (ctx.message?.application_properties ?? {}) as Record<string, unknown>;
      resolve(Number(props['status-code']));
    });
    const sender = conn.open_sender({ target: { address: '$cbs' } });
    sender.once('sendable', () => {
      sender.send({
        message_id: 'req-1',
        reply_to: replyTo,
        body: signSas(audience, { name: hub.keyName, key: keyValue }, Math.floor(Date.now() / 1000) + 600),
        application_properties: {
          operation: 'put-token',
          name: audience,
          type: 'servicebus.windows.net:sastoken',
        },
      });
    });
    conn.once('connection_error', reject);
    setTimeout(() => reject(new Error('no CBS reply')), 5_000);
  });
  return { conn, status };
}

function sendOne(conn: Connection, address: string, body: Buffer | string, partitionKey?: string) {
  return new Promise<{ outcome: string; condition?: string; maxMessageSize?: number }>((resolve, reject) => {
    const sender = conn.open_sender({ target: { address } });
    sender.once('sendable', () => {
      sender.send({
        body: typeof body === 'string' ? body : rhea.message.data_section(body),
        ...(partitionKey ? { message_annotations: { 'x-opt-partition-key': partitionKey } } : {}),
      });
    });
    const max = () => Number(sender.max_message_size);
    sender.once('accepted', () => resolve({ outcome: 'accepted', maxMessageSize: max() }));
    sender.once('rejected', (ctx: EventContext) =>
      resolve({
        outcome: 'rejected',
        condition: ctx.delivery?.remote_state?.error?.condition,
        maxMessageSize: max(),
      }),
    );
    sender.once('sender_close', (ctx: EventContext) =>
      resolve({
        outcome: 'detached',
        condition: (ctx.sender?.error as { condition?: string } | undefined)?.condition,
      }),
    );
    setTimeout(() => reject(new Error('no outcome')), 5_000);
  });
}

describe('raw AMQP', () => {
  it('stores a single (non-batch) message and honours its partition key', async () => {
    const aud = `sb://127.0.0.1:${hub.port}/scheduled-events`;
    const { conn, status } = await connectWithToken(aud, 'k');
    expect(status).toBe(202);
    const r = await sendOne(conn, 'scheduled-events', Buffer.from('{"single":true}'), 'pk-1');
    expect(r).toMatchObject({ outcome: 'accepted', maxMessageSize: 1024 * 1024 });
    const e = hub.events().find((x) => x.partitionKey === 'pk-1');
    expect(e?.body).toEqual({ single: true });
    conn.close();
  });

  it('rejects a transfer above 1 MiB with amqp:link:message-size-exceeded', async () => {
    const { conn } = await connectWithToken(`sb://127.0.0.1:${hub.port}/scheduled-events`, 'k');
    const r = await sendOne(conn, 'scheduled-events/Partitions/1', Buffer.alloc(1024 * 1024 + 10, 0x61));
    expect(r).toMatchObject({ outcome: 'rejected', condition: 'amqp:link:message-size-exceeded' });
    conn.close();
  });

  it('refuses links without a token, and tokens for another entity', async () => {
    const { conn, status } = await connectWithToken(
      `sb://127.0.0.1:${hub.port}/scheduled-events/Partitions/0`,
      'k',
    );
    expect(status).toBe(202);
    expect(await sendOne(conn, 'scheduled-events/Partitions/0', 'ok')).toMatchObject({ outcome: 'accepted' });
    expect(await sendOne(conn, 'scheduled-events/Partitions/1', 'no')).toMatchObject({
      outcome: 'detached',
      condition: 'amqp:unauthorized-access',
    });
    expect(await sendOne(conn, 'scheduled-events', 'no')).toMatchObject({
      outcome: 'detached',
      condition: 'amqp:unauthorized-access',
    });
    conn.close();
    const bad = await connectWithToken(`sb://127.0.0.1:${hub.port}/scheduled-events`, 'bad');
    expect(bad.status).toBe(401);
    bad.conn.close();
  });
});
