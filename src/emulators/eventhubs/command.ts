/**
 * `se-shipper emulate eventhubs`: runs the local Event Hubs emulator until SIGINT/SIGTERM and
 * prints one JSON "ready" line on stdout (with a ready-to-use connection string, key included:
 * that is its purpose on a developer box). Logs go to stderr, secrets redacted.
 */
import { readFileSync } from 'node:fs';
import { Command, InvalidArgumentError, Option } from 'commander';
import { createLogger, LOG_LEVELS, type LogLevel } from '../../observability/logger.js';
import {
  DEFAULT_HUB,
  DEFAULT_KEY_NAME,
  DEFAULT_MAX_MESSAGE_SIZE,
  DEFAULT_PARTITIONS,
  startEventHubsEmulator,
} from './index.js';

function intArg(min: number, max: number) {
  return (value: string): number => {
    if (!/^\d+$/.test(value)) throw new InvalidArgumentError('must be a whole number');
    const n = Number(value);
    if (n < min || n > max) throw new InvalidArgumentError(`must be between ${min} and ${max}`);
    return n;
  };
}

function collect(value: string, previous: string[] = []): string[] {
  return [...previous, value];
}

interface Flags {
  port: number;
  hub: string[];
  partitions: number;
  consumerGroup: string[];
  keyName: string;
  key?: string;
  allowAnonymous: boolean;
  store?: string;
  controlPort: number;
  control: boolean;
  maxMessageSize: number;
  tlsCert?: string;
  tlsKey?: string;
  tlsPort: number;
  logLevel: LogLevel;
}

export function createEventHubsEmulatorCommand(): Command {
  return new Command('eventhubs')
    .description('local Azure Event Hubs emulator (AMQP 1.0 on 127.0.0.1) for tests and the demo')
    .option('--port <n>', 'AMQP port on 127.0.0.1 (0 = any free port)', intArg(0, 65535), 0)
    .option('--hub <name>', `event hub name; repeat for several (default ${DEFAULT_HUB})`, collect)
    .option('--partitions <n>', 'partitions per hub', intArg(1, 1024), DEFAULT_PARTITIONS)
    .option('--consumer-group <name>', 'extra consumer group besides $default; repeatable', collect, [])
    .option('--key-name <name>', 'SharedAccessKeyName', DEFAULT_KEY_NAME)
    .option('--key <key>', 'SharedAccessKey (default: random, shown in the ready line only)')
    .option('--allow-anonymous', 'INSECURE: accept any CBS token without verifying it', false)
    .option('--store <dir>', 'append each partition to <dir>/<hub>/<partition>.ndjson and reload it on start')
    .option('--control-port <n>', 'control HTTP API port on 127.0.0.1 (0 = any)', intArg(0, 65535), 0)
    .option('--no-control', 'do not start the control HTTP API')
    .option(
      '--max-message-size <bytes>',
      'advertised and enforced max message size',
      intArg(1024, 100 * 1024 * 1024),
      DEFAULT_MAX_MESSAGE_SIZE,
    )
    .option('--tls-cert <file>', 'PEM certificate: also listen with AMQPS (TLS) on --tls-port')
    .option('--tls-key <file>', 'PEM private key for --tls-cert')
    .option('--tls-port <n>', 'AMQPS port on 127.0.0.1 (0 = any)', intArg(0, 65535), 0)
    .addOption(new Option('--log-level <level>', 'log level (stderr)').choices(LOG_LEVELS).default('info'))
    .action(async (flags: Flags) => {
      const log = createLogger({ level: flags.logLevel, base: { name: 'se-shipper-eventhubs-emulator' } });
      if ((flags.tlsCert === undefined) !== (flags.tlsKey === undefined)) {
        throw new InvalidArgumentError('--tls-cert and --tls-key go together');
      }
      if (flags.allowAnonymous)
        log.warn('--allow-anonymous: CBS tokens are NOT verified; use only for insecure local experiments');
      const emulator = await startEventHubsEmulator({
        port: flags.port,
        hubs: flags.hub && flags.hub.length > 0 ? flags.hub : [DEFAULT_HUB],
        partitions: flags.partitions,
        consumerGroups: flags.consumerGroup,
        keyName: flags.keyName,
        ...(flags.key !== undefined ? { key: flags.key } : {}),
        allowAnonymous: flags.allowAnonymous,
        ...(flags.store !== undefined ? { store: flags.store } : {}),
        controlPort: flags.control ? flags.controlPort : false,
        maxMessageSize: flags.maxMessageSize,
        ...(flags.tlsCert && flags.tlsKey
          ? {
              tls: {
                cert: readFileSync(flags.tlsCert),
                key: readFileSync(flags.tlsKey),
                port: flags.tlsPort,
              },
            }
          : {}),
        logger: log,
      });
      const ready = {
        event: 'ready',
        emulator: 'eventhubs',
        host: emulator.host,
        port: emulator.port,
        ...(emulator.tlsPort !== undefined ? { tlsPort: emulator.tlsPort } : {}),
        controlUrl: emulator.controlUrl ?? null,
        hubs: emulator.hubNames,
        partitions: flags.partitions,
        keyName: emulator.keyName,
        store: flags.store ?? null,
        maxMessageSize: emulator.maxMessageSize,
        connectionString: emulator.connectionString,
      };
      process.stdout.write(`${JSON.stringify(ready)}\n`);
      log.info(
        { port: emulator.port, controlUrl: emulator.controlUrl, hubs: emulator.hubNames, store: flags.store },
        'eventhubs emulator ready',
      );
      await new Promise<void>((resolve) => {
        const stop = () => resolve();
        process.once('SIGINT', stop);
        process.once('SIGTERM', stop);
      });
      await emulator.stop();
      log.info('eventhubs emulator stopped');
    });
}
