/**
 * The emulator's control API: plain HTTP on 127.0.0.1 (never another interface), JSON in and
 * out. It can read events back, inject faults and rotate keys; it has no authentication, so it
 * must stay on loopback. Routes are listed in docs/eventhubs-emulator.md.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Logger } from '../../observability/logger.js';
import type { EventHubsEmulatorServer } from './emulator.js';

export interface ControlServer {
  url: string;
  close(): Promise<void>;
}

class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

async function readJson(req: IncomingMessage): Promise<Record<string, unknown>> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > 64 * 1024) throw new HttpError(413, 'body too large');
    chunks.push(chunk as Buffer);
  }
  const text = Buffer.concat(chunks).toString('utf8').trim();
  if (text === '') return {};
  try {
    const v = JSON.parse(text) as unknown;
    if (!v || typeof v !== 'object' || Array.isArray(v)) throw new Error('not an object');
    return v as Record<string, unknown>;
  } catch {
    throw new HttpError(400, 'body must be a JSON object');
  }
}

function num(body: Record<string, unknown>, name: string, fallback?: number): number | undefined {
  const v = body[name];
  if (v === undefined || v === null) return fallback;
  if (typeof v !== 'number' || !Number.isFinite(v) || v < 0)
    throw new HttpError(400, `${name} must be a non-negative number`);
  return v;
}

function str(body: Record<string, unknown>, name: string): string | undefined {
  const v = body[name];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'string' || v === '') throw new HttpError(400, `${name} must be a non-empty string`);
  return v;
}

function send(res: ServerResponse, status: number, body: unknown): void {
  const text = `${JSON.stringify(body, (_k, v: unknown) => (Buffer.isBuffer(v) ? v.toString('base64') : v))}\n`;
  res.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store' });
  res.end(text);
}

export async function startControlServer(
  emulator: EventHubsEmulatorServer,
  port: number,
  log: Logger,
  restart: () => Promise<void>,
): Promise<ControlServer> {
  const route = async (
    method: string,
    path: string,
    query: URLSearchParams,
    req: IncomingMessage,
  ): Promise<[number, unknown]> => {
    const body = method === 'POST' || method === 'PUT' ? await readJson(req) : {};
    const key = `${method} ${path}`;
    switch (key) {
      case 'GET /health':
        return [200, { ok: true, listening: emulator.isListening }];
      case 'GET /state':
        return [
          200,
          {
            port: emulator.amqpPort,
            tlsPort: emulator.amqpsPort ?? null,
            listening: emulator.isListening,
            faults: emulator.faults,
            stats: emulator.stats,
            keyNames: emulator.keyNames(),
            hubs: [...emulator.hubs.values()].map((h) => ({
              name: h.name,
              consumerGroups: [...h.consumerGroups],
              partitions: h.partitions.map((p) => emulator.partitionInfo(h.name, p.id)),
            })),
          },
        ];
      case 'GET /events': {
        const hub = query.get('hub') ?? undefined;
        const partition = query.get('partition') ?? undefined;
        if (hub && !emulator.hub(hub)) throw new HttpError(404, `unknown event hub "${hub}"`);
        return [200, emulator.events(hub, partition).map(({ bodyBytes: _b, ...e }) => e)];
      }
      case 'POST /faults/server-busy':
      case 'POST /faults/reject': {
        const count = num(body, 'count', 1) as number;
        const condition = str(body, 'condition');
        const description = str(body, 'description');
        emulator.rejectNextSends(count, {
          ...(condition ? { condition } : {}),
          ...(description ? { description } : {}),
        });
        return [200, { rejectNext: emulator.faults.rejectNext, condition: emulator.faults.rejectCondition }];
      }
      case 'POST /faults/hang':
        emulator.hangSends(num(body, 'count') ?? Number.POSITIVE_INFINITY);
        return [
          200,
          { hangNext: Number.isFinite(emulator.faults.hangNext) ? emulator.faults.hangNext : 'all' },
        ];
      case 'DELETE /faults/hang':
        emulator.stopHanging();
        return [200, { hangNext: 0 }];
      case 'POST /faults/detach': {
        const condition = str(body, 'condition');
        const which = str(body, 'which');
        if (which && which !== 'all' && which !== 'producers' && which !== 'consumers') {
          throw new HttpError(400, 'which must be all, producers or consumers');
        }
        const n = emulator.detachLinks({
          ...(condition ? { condition } : {}),
          ...(which ? { which: which as 'all' | 'producers' | 'consumers' } : {}),
        });
        return [200, { detached: n }];
      }
      case 'POST /faults/drop-connections':
        return [200, { dropped: emulator.dropConnections() }];
      case 'POST /faults/offline': {
        const durationMs = num(body, 'durationMs');
        const drop = body.dropConnections;
        await emulator.stopListening({
          ...(durationMs !== undefined ? { durationMs } : {}),
          ...(typeof drop === 'boolean' ? { dropConnections: drop } : {}),
        });
        return [200, { listening: false, durationMs: durationMs ?? null }];
      }
      case 'POST /faults/online':
      case 'DELETE /faults/offline':
        await emulator.listen();
        return [200, { listening: true, port: emulator.amqpPort }];
      case 'POST /faults/slow-accept':
        emulator.setAcceptDelay(num(body, 'delayMs', 0) as number);
        return [200, { acceptDelayMs: emulator.faults.acceptDelayMs }];
      case 'DELETE /faults':
        emulator.clearFaults();
        if (!emulator.isListening) await emulator.listen();
        return [200, { faults: emulator.faults }];
      case 'PUT /keys': {
        const name = str(body, 'name');
        const value = str(body, 'key');
        if (!name || !value) throw new HttpError(400, 'name and key are required');
        emulator.setKey(name, value);
        if (body.dropConnections === true) emulator.dropConnections();
        return [200, { keyNames: emulator.keyNames() }];
      }
      case 'POST /restart':
        await restart();
        return [200, { port: emulator.amqpPort }];
      default:
        if (method === 'DELETE' && path.startsWith('/keys/')) {
          const name = decodeURIComponent(path.slice('/keys/'.length));
          if (!emulator.removeKey(name)) throw new HttpError(404, `unknown key name "${name}"`);
          return [200, { keyNames: emulator.keyNames() }];
        }
        throw new HttpError(404, `no route ${method} ${path}`);
    }
  };

  const server: Server = createServer((req, res) => {
    // Loopback only, and only under a loopback name: a web page cannot reach this API through
    // DNS rebinding (its requests would carry the attacker's host name).
    const host = (req.headers.host ?? '').replace(/:\d+$/, '').toLowerCase();
    if (host !== '' && host !== '127.0.0.1' && host !== 'localhost') {
      send(res, 403, { error: 'the control API only answers to 127.0.0.1 or localhost' });
      return;
    }
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    const method = req.method ?? 'GET';
    route(method, url.pathname.replace(/\/+$/, '') || '/', url.searchParams, req)
      .then(([status, body]) => send(res, status, body))
      .catch((err: unknown) => {
        const status = err instanceof HttpError ? err.status : 500;
        if (status === 500) log.error({ err }, 'eventhubs emulator: control API error');
        send(res, status, { error: (err as Error).message });
      });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen({ host: '127.0.0.1', port }, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const addr = server.address();
  const actual = typeof addr === 'object' && addr ? addr.port : port;
  return {
    url: `http://127.0.0.1:${actual}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
