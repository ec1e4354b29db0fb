import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { CONNECTION_STRING_ENV, type ShipperConfig } from '../config/options.js';
import { ImdsClient } from '../imds/client.js';
import { buildHeartbeatRecord, vmIdentityFromCompute } from '../lifecycle/enrich.js';
import { type HealthServer, startHealthServer } from '../observability/health.js';
import type { Logger } from '../observability/logger.js';
import { Metrics } from '../observability/metrics.js';
import { describeConnectionString, EventHubsSink } from '../sinks/eventhubs.js';
import { FileNdjsonSink, StreamNdjsonSink } from '../sinks/ndjson.js';
import type { Sink } from '../sinks/sink.js';
import { Spool } from '../spool/spool.js';
import { DeliveryLoop } from './delivery.js';
import { IdentityWatcher, shipperIdentity } from './identity.js';
import { Shipper } from './shipper.js';

export interface Daemon {
  readonly metrics: Metrics;
  readonly healthUrl: string | undefined;
  /** Stops polling after the poll in progress, flushes for a bounded time, saves state, closes. */
  stop(): Promise<void>;
}

export interface DaemonOptions {
  env?: NodeJS.ProcessEnv;
  /** Overrides for tests: delivery backoff bounds (ms). */
  minBackoffMs?: number;
  maxBackoffMs?: number;
}

/**
 * The SDK's own operation timeout must not outlast the delivery loop's per-send timeout: the loop
 * abandons a send at `sendTimeout` anyway, and a shorter SDK timeout lets the client give up on a
 * dead link itself instead of leaving it to the abort.
 */
function sdkRetryOptions(config: ShipperConfig): { timeoutInMs: number } {
  return { timeoutInMs: Math.min(SDK_OPERATION_TIMEOUT_MS, config.sendTimeout) };
}
const SDK_OPERATION_TIMEOUT_MS = 20_000;

/** The credential is loaded lazily: @azure/identity is large and connection-string users never need it. */
async function createEventHubsSink(
  config: ShipperConfig,
  env: NodeJS.ProcessEnv,
  logger: Logger,
): Promise<Sink> {
  const connectionString = env[CONNECTION_STRING_ENV];
  const sinkLogger = logger.child({ component: 'eventhubs' });
  if (connectionString) {
    const where = describeConnectionString(connectionString);
    sinkLogger.info(
      { endpoint: where.endpoint, eventHub: config.eventhub || where.entityPath, emulator: where.emulator },
      `Event Hubs via ${CONNECTION_STRING_ENV} (SAS)`,
    );
    return new EventHubsSink({
      target: {
        kind: 'connection-string',
        connectionString,
        ...(config.eventhub ? { eventHubName: config.eventhub } : {}),
      },
      logger: sinkLogger,
      retryOptions: sdkRetryOptions(config),
    });
  }
  const identity = await import('@azure/identity');
  const credential =
    config.credential === 'default'
      ? new identity.DefaultAzureCredential(
          config.managedIdentityClientId ? { managedIdentityClientId: config.managedIdentityClientId } : {},
        )
      : config.managedIdentityClientId
        ? new identity.ManagedIdentityCredential({ clientId: config.managedIdentityClientId })
        : new identity.ManagedIdentityCredential();
  sinkLogger.info(
    {
      namespace: config.eventhubsNamespace,
      eventHub: config.eventhub,
      credential: config.credential,
      managedIdentityClientId: config.managedIdentityClientId || undefined,
    },
    'Event Hubs via Entra ID',
  );
  return new EventHubsSink({
    target: {
      kind: 'credential',
      fullyQualifiedNamespace: config.eventhubsNamespace,
      eventHubName: config.eventhub,
      credential,
    },
    logger: sinkLogger,
    retryOptions: sdkRetryOptions(config),
  });
}

export async function createSink(
  config: ShipperConfig,
  env: NodeJS.ProcessEnv,
  logger: Logger,
): Promise<Sink> {
  switch (config.sink) {
    case 'eventhubs':
      return createEventHubsSink(config, env, logger);
    case 'stdout':
      return new StreamNdjsonSink(process.stdout);
    case 'file':
      return new FileNdjsonSink(config.out);
  }
}

/** How long the first poll waits for instance metadata so the first records carry the VM identity. */
const IDENTITY_WAIT_MS = 3_000;
/** /healthz turns 503 when no poll succeeded for this long (IMDS outage or a wedged loop). */
const HEALTH_STALE_MS = 30_000;

/**
 * Composes the daemon: IMDS poll loop → spool (durable) → delivery loop → sink, plus identity,
 * heartbeats and the health endpoint. Every sink goes through the spool, so a record is on disk
 * before any network is touched and the poll never waits on the sink.
 */
export async function startDaemon(
  config: ShipperConfig,
  logger: Logger,
  options: DaemonOptions = {},
): Promise<Daemon> {
  const env = options.env ?? process.env;
  await mkdir(config.stateDir, { recursive: true, mode: 0o750 });
  const metrics = new Metrics();
  const spool = await Spool.open({
    dir: join(config.stateDir, 'spool'),
    logger,
    maxBytes: config.spoolMaxBytes,
    maxRecords: config.spoolMaxRecords,
  });
  if (spool.depth > 0)
    logger.info({ records: spool.depth }, 'delivering what the spool kept from the last run first');
  const sink = await createSink(config, env, logger);
  const delivery = new DeliveryLoop({
    spool,
    sink,
    logger,
    sendTimeoutMs: config.sendTimeout,
    ...(options.minBackoffMs !== undefined ? { minBackoffMs: options.minBackoffMs } : {}),
    maxBackoffMs: options.maxBackoffMs ?? config.retryMaxBackoff,
  });
  const imds = new ImdsClient({
    endpoint: config.imdsEndpoint,
    timeoutMs: config.imdsTimeout,
    logger: logger.child({ component: 'imds' }),
  });
  const identity = new IdentityWatcher({
    fetchCompute: (signal) => imds.getInstanceCompute(signal),
    logger: logger.child({ component: 'identity' }),
  });
  const self = shipperIdentity();
  const shipper = await Shipper.open({
    imds,
    identity,
    output: { append: (records) => spool.append(records), isDurable: () => spool.stats().memoryHeld === 0 },
    stateDir: config.stateDir,
    pollIntervalMs: config.pollInterval,
    imdsTimeoutMs: config.imdsTimeout,
    scope: config.scope,
    logger,
    metrics,
    shipper: self,
  });

  const refreshMetrics = () => {
    const s = spool.stats();
    const d = delivery.stats();
    metrics.set('spoolDepth', s.depth);
    metrics.set('spoolBytes', s.bytes);
    metrics.set('spoolMemoryHeld', s.memoryHeld);
    metrics.set('spoolDrops', s.dropped.heartbeat + s.dropped.lifecycle);
    metrics.set('recordsRejected', s.rejected);
    metrics.set('recordsSent', d.recordsSent);
    metrics.set('sendFailures', d.sendFailures);
    metrics.set('sendRetries', d.retries);
    if (d.lastSuccessAt) metrics.set('lastSendOkTimestampSeconds', Math.floor(d.lastSuccessAt / 1000));
  };

  const heartbeat = async () => {
    refreshMetrics();
    const compute = identity.current;
    const v = metrics.values;
    const record = buildHeartbeatRecord(
      {
        activeEvents: v.activeEvents,
        spoolDepth: v.spoolDepth,
        pollsOk: v.pollsOk,
        pollsFailed: v.pollsFailed,
        lastIncarnation: v.lastIncarnation,
        uptimeSeconds: metrics.uptimeSeconds(),
      },
      Date.now(),
      compute ? vmIdentityFromCompute(compute) : null,
      self,
    );
    try {
      await spool.append([record]);
    } catch (err) {
      logger.warn({ err }, 'could not spool a heartbeat');
    }
  };

  let health: HealthServer | undefined;
  try {
    if (config.healthPort > 0) {
      health = await startHealthServer({
        port: config.healthPort,
        metrics,
        refresh: refreshMetrics,
        staleAfterMs: Math.max(HEALTH_STALE_MS, 5 * config.pollInterval),
        logger,
      });
    }
  } catch (err) {
    await spool.close();
    await sink.close();
    imds.close();
    throw new Error(
      `cannot serve the health endpoint on 127.0.0.1:${config.healthPort}: ${(err as Error).message}`,
      { cause: err },
    );
  }

  delivery.start();
  const identityWait = new Promise<void>((resolve) => setTimeout(resolve, IDENTITY_WAIT_MS).unref());
  await Promise.race([identity.start(), identityWait]);
  shipper.start();
  let heartbeatTimer: NodeJS.Timeout | undefined;
  let firstHeartbeat: NodeJS.Timeout | undefined;
  if (config.heartbeatInterval > 0) {
    // One soon after start (after the first poll) says "alive, this version", then one per interval.
    firstHeartbeat = setTimeout(() => void heartbeat(), config.pollInterval + 250);
    heartbeatTimer = setInterval(() => void heartbeat(), config.heartbeatInterval * 1000);
  }
  logger.info(
    {
      version: self.shipperVersion,
      imdsEndpoint: config.imdsEndpoint,
      pollIntervalMs: config.pollInterval,
      scope: config.scope,
      sink: config.sink,
      stateDir: config.stateDir,
      heartbeatIntervalSeconds: config.heartbeatInterval,
      healthUrl: health?.url,
    },
    'se-shipper started',
  );
  return {
    metrics,
    healthUrl: health?.url,
    async stop() {
      clearTimeout(firstHeartbeat);
      clearInterval(heartbeatTimer);
      await shipper.stop();
      identity.stop();
      await delivery.stop({ flushTimeoutMs: config.flushTimeout });
      refreshMetrics();
      if (spool.depth > 0) logger.info({ records: spool.depth }, 'left in the spool for the next start');
      await spool.close();
      await sink.close();
      await health?.close();
      imds.close();
    },
  };
}
