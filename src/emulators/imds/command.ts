import { readFile } from 'node:fs/promises';
import { Command, InvalidArgumentError, Option } from 'commander';
import { createLogger, LOG_LEVELS, type Logger, type LogLevel } from '../../observability/logger.js';
import { builtinScenarioSummaries, TERMINATE_NOTICE_RANGE } from './builtins.js';
import type { VmIdentityInput } from './identity.js';
import { type ImdsEmulator, type ImdsEmulatorOptions, startImdsEmulator } from './server.js';
import {
  expectObject,
  optionalBoolean,
  optionalNumber,
  optionalString,
  rejectUnknownKeys,
  ValidationError,
} from './validate.js';

export const DEFAULT_EMULATOR_PORT = 8169;
const ENV = 'SE_IMDS_EMULATOR_';

/** Identity flags: CLI option name → VmIdentity field. */
const IDENTITY_FLAGS: [flag: string, field: keyof VmIdentityInput, help: string][] = [
  ['vm-name', 'name', 'VM name (default {scale-set}_{instance-id})'],
  ['vm-id', 'vmId', 'vmId GUID'],
  ['resource-id', 'resourceId', 'ARM resource id (default derived)'],
  ['scale-set', 'vmScaleSetName', 'scale set name ("" for a standalone VM)'],
  ['instance-id', 'instanceId', 'instance id inside the scale set'],
  ['computer-name', 'computerName', 'osProfile.computerName'],
  ['subscription-id', 'subscriptionId', 'subscription id'],
  ['resource-group', 'resourceGroupName', 'resource group'],
  ['location', 'location', 'region'],
  ['zone', 'zone', 'availability zone ("" for none)'],
  ['vm-size', 'vmSize', 'VM size'],
  ['os-type', 'osType', 'Linux or Windows'],
  ['priority', 'priority', 'Regular or Spot'],
  ['eviction-policy', 'evictionPolicy', 'Deallocate or Delete (Spot)'],
];

const CONFIG_KEYS = [
  'host',
  'port',
  'scenario',
  'speed',
  'after',
  'terminateNoticeSeconds',
  'notBeforeFormat',
  'rateLimit',
  'enrolmentDelaySeconds',
  'control',
  'seed',
  'identity',
  'logLevel',
] as const;

function number(name: string, opts: { min?: number; max?: number; integer?: boolean } = {}) {
  return (raw: string): number => {
    const n = Number(raw);
    if (raw.trim() === '' || !Number.isFinite(n)) throw new InvalidArgumentError(`${name} must be a number`);
    if (opts.integer && !Number.isInteger(n)) throw new InvalidArgumentError(`${name} must be an integer`);
    if (opts.min !== undefined && n < opts.min)
      throw new InvalidArgumentError(`${name} must be ≥ ${opts.min}`);
    if (opts.max !== undefined && n > opts.max)
      throw new InvalidArgumentError(`${name} must be ≤ ${opts.max}`);
    return n;
  };
}

/** Reads a JSON config file holding the same settings as the flags (camelCase, `identity` object). */
export async function loadEmulatorConfigFile(
  file: string,
): Promise<ImdsEmulatorOptions & { logLevel?: LogLevel }> {
  let json: unknown;
  try {
    json = JSON.parse(await readFile(file, 'utf8'));
  } catch (err) {
    throw new Error(`cannot read config file ${file}: ${(err as Error).message}`, { cause: err });
  }
  try {
    const obj = expectObject(json, 'config');
    rejectUnknownKeys(obj, CONFIG_KEYS, 'config');
    const out: ImdsEmulatorOptions & { logLevel?: LogLevel } = {};
    const host = optionalString(obj.host, 'config.host', { nonEmpty: true });
    if (host !== undefined) out.host = host;
    const port = optionalNumber(obj.port, 'config.port', { integer: true, min: 0, max: 65535 });
    if (port !== undefined) out.port = port;
    const scenario = optionalString(obj.scenario, 'config.scenario', { nonEmpty: true });
    if (scenario !== undefined) out.scenario = scenario;
    const speed = optionalNumber(obj.speed, 'config.speed', { min: 0.001 });
    if (speed !== undefined) out.speed = speed;
    if (obj.after !== undefined) {
      if (obj.after !== 'stay' && obj.after !== 'loop')
        throw new ValidationError('config.after', 'expected "stay" or "loop"');
      out.after = obj.after;
    }
    const notice = optionalNumber(
      obj.terminateNoticeSeconds,
      'config.terminateNoticeSeconds',
      TERMINATE_NOTICE_RANGE,
    );
    if (notice !== undefined) out.terminateNoticeSeconds = notice;
    if (obj.notBeforeFormat !== undefined) {
      if (obj.notBeforeFormat !== 'rfc1123' && obj.notBeforeFormat !== 'iso') {
        throw new ValidationError('config.notBeforeFormat', 'expected "rfc1123" or "iso"');
      }
      out.notBeforeFormat = obj.notBeforeFormat;
    }
    const rateLimit = optionalNumber(obj.rateLimit, 'config.rateLimit', { min: 0 });
    if (rateLimit !== undefined) out.rateLimit = rateLimit;
    const enrol = optionalNumber(obj.enrolmentDelaySeconds, 'config.enrolmentDelaySeconds', {
      min: 0,
      max: 120,
    });
    if (enrol !== undefined) out.enrolmentDelaySeconds = enrol;
    const control = optionalBoolean(obj.control, 'config.control');
    if (control !== undefined) out.control = control;
    const seed = optionalString(obj.seed, 'config.seed');
    if (seed !== undefined) out.seed = seed;
    if (obj.logLevel !== undefined) {
      if (!(LOG_LEVELS as readonly unknown[]).includes(obj.logLevel)) {
        throw new ValidationError('config.logLevel', `expected one of ${LOG_LEVELS.join(', ')}`);
      }
      out.logLevel = obj.logLevel as LogLevel;
    }
    if (obj.identity !== undefined) {
      const id = expectObject(obj.identity, 'config.identity');
      const fields = IDENTITY_FLAGS.map(([, f]) => f as string);
      rejectUnknownKeys(
        id,
        [...fields, 'platformFaultDomain', 'platformUpdateDomain', 'privateIpAddress', 'tags'],
        'config.identity',
      );
      const identity: Record<string, unknown> = {};
      for (const [k, v] of Object.entries(id)) {
        if (k === 'tags') {
          const tags = expectObject(v, 'config.identity.tags');
          for (const [tk, tv] of Object.entries(tags)) optionalString(tv, `config.identity.tags.${tk}`);
          identity.tags = tags;
        } else identity[k] = optionalString(v, `config.identity.${k}`);
      }
      out.identity = identity;
    }
    return out;
  } catch (err) {
    if (err instanceof ValidationError)
      throw new Error(`config file ${file}: ${err.message}`, { cause: err });
    throw err;
  }
}

export interface ImdsEmulatorCommandIo {
  /** Where the ready line goes (default process.stdout). */
  stdout?: NodeJS.WritableStream;
  /** Logger to use instead of one on stderr. */
  logger?: Logger;
  /** Called once the server listens (tests use it to get the handle). */
  onStarted?: (emulator: ImdsEmulator) => void;
  /** Close on SIGINT/SIGTERM and exit 0 (default true). */
  handleSignals?: boolean;
}

/** `se-shipper emulate imds`: the IMDS emulator as a command. */
export function createImdsEmulatorCommand(io: ImdsEmulatorCommandIo = {}): Command {
  const cmd = new Command('imds')
    .description(
      'local Azure Instance Metadata Service (scheduled events + instance metadata) driven by scenarios; prints one JSON "ready" line with its URL on stdout, logs on stderr',
    )
    .addOption(new Option('--host <address>', 'interface to bind').default('127.0.0.1').env(`${ENV}HOST`))
    .addOption(
      new Option('--port <port>', 'TCP port; 0 picks a free one (printed in the ready line)')
        .argParser(number('--port', { integer: true, min: 0, max: 65535 }))
        .default(DEFAULT_EMULATOR_PORT)
        .env(`${ENV}PORT`),
    )
    .addOption(
      new Option(
        '--scenario <name|file>',
        'built-in scenario name or scenario JSON file (see --list-scenarios)',
      )
        .default('idle')
        .env(`${ENV}SCENARIO`),
    )
    .addOption(
      new Option(
        '--speed <factor>',
        "divide every scenario time by this factor (60 = dev timing); default: the scenario's, else 1",
      )
        .argParser(number('--speed', { min: 0.001, max: 1_000_000 }))
        .env(`${ENV}SPEED`),
    )
    .addOption(
      new Option('--after <mode>', 'after the last step: stay or loop')
        .choices(['stay', 'loop'])
        .env(`${ENV}AFTER`),
    )
    .addOption(
      new Option(
        '--terminate-notice <seconds>',
        'Terminate notice of built-in scenarios (notBeforeTimeout, 300..900)',
      )
        .argParser(number('--terminate-notice', TERMINATE_NOTICE_RANGE))
        .env(`${ENV}TERMINATE_NOTICE`),
    )
    .addOption(
      new Option('--not-before-format <format>', 'NotBefore format')
        .choices(['rfc1123', 'iso'])
        .env(`${ENV}NOT_BEFORE_FORMAT`),
    )
    .addOption(
      new Option(
        '--rate-limit <n>',
        'requests per second per client on /metadata (IMDS: 5); 0 = off (default)',
      )
        .argParser(number('--rate-limit', { min: 0 }))
        .env(`${ENV}RATE_LIMIT`),
    )
    .addOption(
      new Option(
        '--enrolment-delay <seconds>',
        'delay of the first scheduled-events call (≤ 120 s, divided by --speed)',
      )
        .argParser(number('--enrolment-delay', { min: 0, max: 120 }))
        .env(`${ENV}ENROLMENT_DELAY`),
    )
    .addOption(new Option('--no-control', 'do not serve the /_emulator/ control API'))
    .addOption(new Option('--seed <text>', 'seed of generated EventIds (default random)').env(`${ENV}SEED`))
    .addOption(
      new Option('--config <file>', 'JSON file with the same settings (flags > env > file > defaults)').env(
        `${ENV}CONFIG`,
      ),
    )
    .addOption(
      new Option('--log-level <level>', 'log level (logs go to stderr)')
        .choices(LOG_LEVELS)
        .env(`${ENV}LOG_LEVEL`),
    )
    .option('--list-scenarios', 'print the built-in scenarios as JSON lines and exit');
  for (const [flag, , help] of IDENTITY_FLAGS) {
    cmd.addOption(
      new Option(`--${flag} <value>`, help).env(`${ENV}${flag.toUpperCase().replaceAll('-', '_')}`),
    );
  }

  cmd.action(async () => {
    const stdout = io.stdout ?? process.stdout;
    const opts = cmd.opts<Record<string, unknown>>();
    if (opts.listScenarios) {
      for (const s of builtinScenarioSummaries()) stdout.write(`${JSON.stringify(s)}\n`);
      return;
    }
    const fromCli = (name: string) => {
      const src = cmd.getOptionValueSource(name);
      return src === 'cli' || src === 'env';
    };
    const file = typeof opts.config === 'string' ? await loadEmulatorConfigFile(opts.config) : {};
    const pick = <T>(name: string, fileValue: T | undefined): T | undefined =>
      fromCli(name) || fileValue === undefined ? (opts[name] as T | undefined) : fileValue;

    const identity: VmIdentityInput = { ...(file.identity ?? {}) };
    for (const [flag, field] of IDENTITY_FLAGS) {
      const key = flag.replace(/-([a-z])/g, (_, c: string) => c.toUpperCase());
      if (opts[key] !== undefined) (identity as Record<string, unknown>)[field] = opts[key];
    }
    const logLevel = pick<LogLevel>('logLevel', file.logLevel) ?? 'info';
    const logger = io.logger ?? createLogger({ level: logLevel, base: { name: 'se-shipper-imds-emulator' } });
    const options: ImdsEmulatorOptions = { identity, logger };
    const set = <K extends keyof ImdsEmulatorOptions>(key: K, value: ImdsEmulatorOptions[K] | undefined) => {
      if (value !== undefined) options[key] = value;
    };
    set('host', pick('host', file.host));
    set('port', pick('port', file.port));
    set('scenario', pick('scenario', file.scenario as string | undefined));
    set('speed', pick('speed', file.speed));
    set('after', pick('after', file.after));
    set('terminateNoticeSeconds', pick('terminateNotice', file.terminateNoticeSeconds));
    set('notBeforeFormat', pick('notBeforeFormat', file.notBeforeFormat));
    set('rateLimit', pick('rateLimit', file.rateLimit));
    set('enrolmentDelaySeconds', pick('enrolmentDelay', file.enrolmentDelaySeconds));
    set('control', cmd.getOptionValueSource('control') === 'cli' ? false : (file.control ?? true));
    set('seed', pick('seed', file.seed));

    let emulator: ImdsEmulator;
    try {
      emulator = await startImdsEmulator(options);
    } catch (err) {
      // User errors (bad scenario file, port in use): the message says it all, no stack.
      logger.error({ reason: (err as Error).message }, 'imds emulator failed to start');
      process.stderr.write(`se-shipper emulate imds: ${(err as Error).message}\n`);
      process.exitCode = 2;
      return;
    }
    stdout.write(
      `${JSON.stringify({
        event: 'ready',
        service: 'imds-emulator',
        url: emulator.url,
        host: emulator.host,
        port: emulator.port,
        scenario: emulator.model.scenarioName,
        speed: emulator.model.speed,
        vmName: emulator.identity.name,
        control: options.control !== false ? `${emulator.url}/_emulator/` : null,
      })}\n`,
    );
    io.onStarted?.(emulator);
    if (io.handleSignals !== false) {
      const stop = (signal: string) => {
        logger.info({ signal }, 'imds emulator stopping');
        emulator.close().then(
          () => process.exit(0),
          () => process.exit(1),
        );
      };
      process.once('SIGINT', () => stop('SIGINT'));
      process.once('SIGTERM', () => stop('SIGTERM'));
    }
  });
  return cmd;
}
