import { mkdir } from 'node:fs/promises';
import type { ShipperConfig } from '../config/options.js';
import { ImdsClient } from '../imds/client.js';
import type { ShipperRecord } from '../lifecycle/record.js';
import type { Logger } from '../observability/logger.js';
import { Metrics } from '../observability/metrics.js';
import { FileNdjsonSink, StreamNdjsonSink } from '../sinks/ndjson.js';
import type { Sink } from '../sinks/sink.js';
import { IdentityWatcher, shipperIdentity } from './identity.js';
import { type RecordOutput, Shipper } from './shipper.js';

export interface Daemon {
  readonly metrics: Metrics;
  /** Stops polling after the poll in progress, flushes, saves state, closes connections. */
  stop(): Promise<void>;
}

export function createSink(config: ShipperConfig): Sink {
  switch (config.sink) {
    case 'stdout':
      return new StreamNdjsonSink(process.stdout);
    case 'file':
      return new FileNdjsonSink(config.out);
  }
}

/** Hands records straight to the sink; used until the durable spool sits in between. */
class DirectOutput implements RecordOutput {
  constructor(private readonly sink: Sink) {}
  append(records: readonly ShipperRecord[]): Promise<void> {
    return this.sink.send(records);
  }
}

/** How long the first poll waits for instance metadata so the first records carry the VM identity. */
const IDENTITY_WAIT_MS = 3_000;

export async function startDaemon(config: ShipperConfig, logger: Logger): Promise<Daemon> {
  await mkdir(config.stateDir, { recursive: true, mode: 0o750 });
  const metrics = new Metrics();
  const sink = createSink(config);
  const imds = new ImdsClient({
    endpoint: config.imdsEndpoint,
    timeoutMs: config.imdsTimeout,
    logger: logger.child({ component: 'imds' }),
  });
  const identity = new IdentityWatcher({
    fetchCompute: (signal) => imds.getInstanceCompute(signal),
    logger: logger.child({ component: 'identity' }),
  });
  const shipper = await Shipper.open({
    imds,
    identity,
    output: new DirectOutput(sink),
    stateDir: config.stateDir,
    pollIntervalMs: config.pollInterval,
    scope: config.scope,
    logger,
    metrics,
    shipper: shipperIdentity(),
  });
  const identityWait = new Promise<void>((resolve) => setTimeout(resolve, IDENTITY_WAIT_MS).unref());
  await Promise.race([identity.start(), identityWait]);
  shipper.start();
  logger.info(
    {
      imdsEndpoint: config.imdsEndpoint,
      pollIntervalMs: config.pollInterval,
      scope: config.scope,
      sink: config.sink,
      stateDir: config.stateDir,
    },
    'se-shipper started',
  );
  return {
    metrics,
    async stop() {
      await shipper.stop();
      identity.stop();
      await sink.close();
      imds.close();
    },
  };
}
