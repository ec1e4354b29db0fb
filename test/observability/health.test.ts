import { afterEach, describe, expect, it } from 'vitest';
import { type HealthServer, startHealthServer } from '../../src/observability/health.js';
import { createLogger } from '../../src/observability/logger.js';
import { Metrics } from '../../src/observability/metrics.js';

let server: HealthServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

async function get(path: string): Promise<{ status: number; body: string; type: string | null }> {
  const res = await fetch(`${server?.url}${path}`);
  return { status: res.status, body: await res.text(), type: res.headers.get('content-type') };
}

describe('health endpoint', () => {
  it('binds 127.0.0.1 and answers 200 while polls are fresh, 503 once stale', async () => {
    let now = 1_000_000;
    const metrics = new Metrics(now);
    server = await startHealthServer({
      port: 0,
      metrics,
      staleAfterMs: 30_000,
      logger: createLogger({ level: 'silent' }),
      now: () => now,
    });
    expect(server.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    // Just started, no poll yet: not stale until staleAfterMs has passed.
    expect((await get('/healthz')).status).toBe(200);
    metrics.inc('pollsOk');
    metrics.set('lastPollOkTimestampSeconds', now / 1000);
    now += 10_000;
    const fresh = await get('/healthz');
    expect(fresh.status).toBe(200);
    expect(JSON.parse(fresh.body)).toMatchObject({ status: 'ok', lastPollOkSecondsAgo: 10, pollsOk: 1 });
    now += 60_000;
    const stale = await get('/healthz');
    expect(stale.status).toBe(503);
    expect(JSON.parse(stale.body)).toMatchObject({ status: 'stale', lastPollOkSecondsAgo: 70 });
  });

  it('serves every counter in Prometheus text format, refreshed on scrape', async () => {
    const metrics = new Metrics();
    let depth = 0;
    server = await startHealthServer({
      port: 0,
      metrics,
      staleAfterMs: 30_000,
      logger: createLogger({ level: 'silent' }),
      refresh: () => metrics.set('spoolDepth', ++depth),
    });
    metrics.inc('pollsOk', 3);
    metrics.inc('recordsSent', 2);
    const { status, body, type } = await get('/metrics');
    expect(status).toBe(200);
    expect(type).toMatch(/^text\/plain/);
    expect(body).toMatch(/^# TYPE se_shipper_polls_ok_total counter$/m);
    expect(body).toMatch(/^se_shipper_polls_ok_total 3$/m);
    expect(body).toMatch(/^se_shipper_records_sent_total 2$/m);
    expect(body).toMatch(/^se_shipper_spool_depth 1$/m);
    expect(body).toMatch(/^se_shipper_uptime_seconds \d+$/m);
    expect((await get('/nope')).status).toBe(404);
  });
});
