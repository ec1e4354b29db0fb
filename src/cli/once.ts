import { Command } from 'commander';
import { ImdsClient } from '../imds/client.js';
import { buildLifecycleRecord, inScope, vmIdentityFromCompute } from '../lifecycle/enrich.js';
import { initialTrackerState, observeDocument } from '../lifecycle/tracker.js';
import { createLogger } from '../observability/logger.js';
import { shipperIdentity } from '../pipeline/identity.js';
import { addShipperOptions, resolveCommandConfig } from './options.js';

const ONCE_KEYS = ['imdsEndpoint', 'scope', 'logLevel'] as const;

export function createOnceCommand(): Command {
  const command = new Command('once').description(
    'poll IMDS once and print the current events as lifecycle records (NDJSON on stdout); touches no state',
  );
  addShipperOptions(command, ONCE_KEYS);
  command.action(async (flags: Record<string, unknown>) => {
    const { config } = resolveCommandConfig(flags, ONCE_KEYS);
    const logger = createLogger({ level: config.logLevel });
    const imds = new ImdsClient({ endpoint: config.imdsEndpoint, logger });
    try {
      const compute = await imds.getInstanceCompute().catch((err: unknown) => {
        logger.warn({ err }, 'instance metadata unavailable: records carry empty identity fields');
        return null;
      });
      const { document } = await imds.getScheduledEvents();
      const now = Date.now();
      // A fresh tracker sees each current event for the first time: Scheduled or Started.
      const { transitions } = observeDocument(initialTrackerState(), document, now, {
        gapThresholdMs: Number.POSITIVE_INFINITY,
      });
      const vm = compute ? vmIdentityFromCompute(compute) : null;
      const shipper = shipperIdentity();
      let out = '';
      for (const t of transitions) {
        const record = buildLifecycleRecord(t, vm, shipper);
        if (inScope(record, config.scope)) out += `${JSON.stringify(record)}\n`;
      }
      await new Promise<void>((resolve, reject) =>
        process.stdout.write(out, (err) => (err ? reject(err) : resolve())),
      );
    } finally {
      imds.close();
    }
  });
  return command;
}
