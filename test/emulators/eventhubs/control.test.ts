/**
 * The control HTTP API and the `se-shipper emulate eventhubs` command (needs `npm run build`).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { request } from 'node:http';
import { createInterface } from 'node:readline';
import { EventHubProducerClient } from '@azure/event-hubs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type EventHubsEmulator, startEventHubsEmulator } from '../../../src/emulators/eventhubs/index.js';
import { errorOf, fastRetry } from './helpers.js';

async function call(base: string, method: string, path: string, body?: unknown) {
  const res = await fetch(`${base}${path}`, {
    method,
    ...(body !== undefined
      ? { headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }
      : {}),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> & unknown[] };
}

describe('control API', () => {
  let hub: EventHubsEmulator;
  beforeAll(async () => {
    hub = await startEventHubsEmulator({
      hubs: [{ name: 'h1', partitions: 3 }, 'h2'],
      key: 'control-secret',
    });
  });
  afterAll(async () => {
    await hub?.stop();
  });

  it('binds 127.0.0.1 and reports state without secrets', async () => {
    expect(hub.controlUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    const base = hub.controlUrl as string;
    expect((await call(base, 'GET', '/health')).body).toEqual({ ok: true, listening: true });
    const state = await call(base, 'GET', '/state');
    expect(state.status).toBe(200);
    expect(JSON.stringify(state.body)).not.toContain('control-secret');
    expect(
      (state.body.hubs as { name: string; partitions: unknown[] }[]).map((h) => [
        h.name,
        h.partitions.length,
      ]),
    ).toEqual([
      ['h1', 3],
      ['h2', 2],
    ]);
    expect((await call(base, 'GET', '/nope')).status).toBe(404);
    const rebound = await new Promise<number>((resolve, reject) => {
      const req = request(`${base}/state`, { headers: { host: 'evil.example:80' } }, (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      });
      req.on('error', reject);
      req.end();
    });
    expect(rebound).toBe(403);
    expect((await call(base, 'POST', '/faults/server-busy', { count: -1 })).status).toBe(400);
  });

  it('injects and clears faults, and reads events back', async () => {
    const base = hub.controlUrl as string;
    const p = new EventHubProducerClient(hub.connectionStringFor({ hub: 'h1' }), { retryOptions: fastRetry });
    try {
      expect((await call(base, 'POST', '/faults/server-busy', { count: 1 })).body).toMatchObject({
        rejectNext: 1,
      });
      expect((await errorOf(p.sendBatch([{ body: 'x' }]))).code).toBe('ServerBusyError');
      await p.sendBatch([{ body: { via: 'control' } }], { partitionId: '2' });
      const events = await call(base, 'GET', '/events?hub=h1&partition=2');
      expect(events.body).toEqual([
        expect.objectContaining({ hub: 'h1', partitionId: '2', sequenceNumber: 0, body: { via: 'control' } }),
      ]);
      expect((await call(base, 'GET', '/events?hub=zzz')).status).toBe(404);

      expect((await call(base, 'POST', '/faults/offline', {})).body).toMatchObject({ listening: false });
      expect(
        (
          await errorOf(
            new EventHubProducerClient(hub.connectionString, { retryOptions: fastRetry }).sendBatch([
              { body: 'y' },
            ]),
          )
        ).message,
      ).toMatch(/ECONNREFUSED/);
      expect((await call(base, 'POST', '/faults/online')).body).toMatchObject({
        listening: true,
        port: hub.port,
      });
      expect((await call(base, 'POST', '/faults/hang', { count: 2 })).body).toEqual({ hangNext: 2 });
      expect((await call(base, 'POST', '/faults/slow-accept', { delayMs: 10 })).body).toEqual({
        acceptDelayMs: 10,
      });
      expect((await call(base, 'DELETE', '/faults')).body).toMatchObject({
        faults: { rejectNext: 0, hangNext: 0, acceptDelayMs: 0 },
      });
      expect((await call(base, 'POST', '/faults/detach', { which: 'producers' })).status).toBe(200);
      expect((await call(base, 'POST', '/faults/drop-connections')).status).toBe(200);
      await p.sendBatch([{ body: 'recovered' }]);
      expect(hub.events('h1').map((e) => e.body)).toContain('recovered');
      expect((await call(base, 'PUT', '/keys', { name: 'second', key: 'k2' })).body).toEqual({
        keyNames: [hub.keyName, 'second'],
      });
      expect((await call(base, 'DELETE', '/keys/second')).status).toBe(200);
    } finally {
      await p.close();
    }
  });
});

describe('se-shipper emulate eventhubs', () => {
  const cli = new URL('../../../dist/cli/main.js', import.meta.url).pathname;
  let child: ChildProcess | undefined;
  afterAll(() => {
    child?.kill('SIGTERM');
  });

  it.runIf(existsSync(cli))(
    'prints one JSON ready line with a working connection string, and no key in its logs',
    async () => {
      child = spawn(
        process.execPath,
        [
          cli,
          'emulate',
          'eventhubs',
          '--port',
          '0',
          '--hub',
          'cli-hub',
          '--partitions',
          '3',
          '--key',
          'cli-secret-key',
        ],
        {
          stdio: ['ignore', 'pipe', 'pipe'],
        },
      );
      let stderr = '';
      child.stderr?.on('data', (d: Buffer) => {
        stderr += d.toString();
      });
      const line = await new Promise<string>((resolve, reject) => {
        const rl = createInterface({ input: child?.stdout as NodeJS.ReadableStream });
        rl.once('line', resolve);
        child?.once('exit', (code) => reject(new Error(`exited ${code}: ${stderr}`)));
        setTimeout(() => reject(new Error(`no ready line: ${stderr}`)), 15_000);
      });
      const ready = JSON.parse(line) as {
        event: string;
        port: number;
        connectionString: string;
        controlUrl: string;
        hubs: string[];
      };
      expect(ready).toMatchObject({ event: 'ready', hubs: ['cli-hub'], partitions: 3 });
      expect(ready.connectionString).toBe(
        `Endpoint=sb://127.0.0.1:${ready.port};SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=cli-secret-key;EntityPath=cli-hub;UseDevelopmentEmulator=true`,
      );
      const p = new EventHubProducerClient(ready.connectionString, { retryOptions: fastRetry });
      await p.sendBatch([{ body: 'via-cli' }], { partitionId: '2' });
      expect((await p.getEventHubProperties()).partitionIds).toEqual(['0', '1', '2']);
      await p.close();
      const events = (await (await fetch(`${ready.controlUrl}/events?hub=cli-hub`)).json()) as {
        body: unknown;
      }[];
      expect(events.map((e) => e.body)).toEqual(['via-cli']);
      const exited = new Promise((r) => child?.once('exit', r));
      child.kill('SIGTERM');
      await exited;
      expect(stderr).toContain('eventhubs emulator ready');
      expect(stderr).not.toContain('cli-secret-key');
    },
  );
});
