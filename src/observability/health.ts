import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from './logger.js';
import type { Metrics } from './metrics.js';

export interface HealthServerOptions {
  port: number;
  /** 127.0.0.1 unless told otherwise: the endpoint is for the VM's own monitoring agent. */
  host?: string;
  metrics: Metrics;
  /** Called before answering, to copy live figures (spool depth, sends) into `metrics`. */
  refresh?: () => void;
  /** A poll older than this makes /healthz answer 503. */
  staleAfterMs: number;
  logger: Logger;
  now?: () => number;
}

export interface HealthServer {
  readonly url: string;
  close(): Promise<void>;
}

/**
 * `/healthz`: 200 while IMDS polls succeed, 503 once the last good poll is older than
 * `staleAfterMs` (JSON body says why). `/metrics`: Prometheus text of every counter.
 */
export async function startHealthServer(options: HealthServerOptions): Promise<HealthServer> {
  const now = options.now ?? Date.now;
  const server = http.createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { Allow: 'GET, HEAD' }).end();
      return;
    }
    options.refresh?.();
    if (path === '/healthz') {
      const values = options.metrics.values;
      const lastPollMs = values.lastPollOkTimestampSeconds * 1000;
      const sinceMs = lastPollMs > 0 ? now() - lastPollMs : Number.POSITIVE_INFINITY;
      const startedLongAgo = now() - options.metrics.startedAt > options.staleAfterMs;
      const ok = sinceMs <= options.staleAfterMs || (lastPollMs === 0 && !startedLongAgo);
      const body = {
        status: ok ? 'ok' : 'stale',
        lastPollOkSecondsAgo: Number.isFinite(sinceMs) ? Math.round(sinceMs / 1000) : null,
        pollsOk: values.pollsOk,
        pollsFailed: values.pollsFailed,
        spoolDepth: values.spoolDepth,
        uptimeSeconds: options.metrics.uptimeSeconds(now()),
      };
      res.writeHead(ok ? 200 : 503, { 'Content-Type': 'application/json' });
      res.end(req.method === 'HEAD' ? undefined : JSON.stringify(body));
      return;
    }
    if (path === '/metrics') {
      res.writeHead(200, { 'Content-Type': 'text/plain; version=0.0.4' });
      res.end(req.method === 'HEAD' ? undefined : options.metrics.toPrometheus(now()));
      return;
    }
    res.writeHead(404, { 'Content-Type': 'text/plain' }).end('not found: try /healthz or /metrics\n');
  });
  const host = options.host ?? '127.0.0.1';
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;
  const url = `http://${host}:${port}`;
  options.logger.info({ url }, 'health endpoint listening');
  return {
    url,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
