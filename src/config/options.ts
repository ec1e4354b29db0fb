import { LOG_LEVELS, type LogLevel } from '../observability/logger.js';
import { httpUrl, integer, oneOf, type Parser, text } from './parsers.js';

export const SCOPES = ['self', 'all'] as const;
export type Scope = (typeof SCOPES)[number];
export const SINK_KINDS = ['stdout', 'file'] as const;
export type SinkKind = (typeof SINK_KINDS)[number];

/** Everything `se-shipper run` is configured with, after flags > env > file > defaults. */
export interface ShipperConfig {
  imdsEndpoint: string;
  pollInterval: number;
  imdsTimeout: number;
  stateDir: string;
  scope: Scope;
  sink: SinkKind;
  out: string;
  logLevel: LogLevel;
}

export interface OptionSpec<K extends keyof ShipperConfig = keyof ShipperConfig> {
  key: K;
  /** Commander flag syntax, e.g. `--poll-interval <ms>`. */
  flag: string;
  description: string;
  defaultValue: ShipperConfig[K];
  parse: Parser<ShipperConfig[K]>;
}

const spec = <K extends keyof ShipperConfig>(s: OptionSpec<K>): OptionSpec<K> => s;

export const DEFAULT_STATE_DIR =
  process.platform === 'win32'
    ? `${process.env.ProgramData ?? 'C:\\ProgramData'}\\se-shipper`
    : '/var/lib/se-shipper';

/** The option table: one place for flag, environment variable, file key, default and validation. */
export const SHIPPER_OPTIONS: readonly OptionSpec[] = [
  spec({
    key: 'imdsEndpoint',
    flag: '--imds-endpoint <url>',
    description: 'IMDS base URL (an emulator for local use)',
    defaultValue: 'http://169.254.169.254',
    parse: httpUrl(),
  }),
  spec({
    key: 'pollInterval',
    flag: '--poll-interval <ms>',
    description: 'time between scheduled events polls; IMDS allows 5 requests/s, so at least 200',
    defaultValue: 1000,
    parse: integer(200, 60_000),
  }),
  spec({
    key: 'imdsTimeout',
    flag: '--imds-timeout <ms>',
    description:
      'timeout of one IMDS request once IMDS has answered (the first call, which enrols the VM, waits up to 120 s)',
    defaultValue: 5000,
    parse: integer(100, 120_000),
  }),
  spec({
    key: 'stateDir',
    flag: '--state-dir <dir>',
    description: 'directory for tracker state and the spool (on the OS disk, not the temp disk)',
    defaultValue: DEFAULT_STATE_DIR,
    parse: text(),
  }),
  spec({
    key: 'scope',
    flag: '--scope <scope>',
    description:
      'self: only events whose Resources name this VM (or while its name is unknown); all: every event',
    defaultValue: 'self',
    parse: oneOf(SCOPES),
  }),
  spec({
    key: 'sink',
    flag: '--sink <kind>',
    description: `where records go: ${SINK_KINDS.join(', ')}`,
    defaultValue: 'stdout',
    parse: oneOf(SINK_KINDS),
  }),
  spec({
    key: 'out',
    flag: '--out <path>',
    description: 'NDJSON file the file sink appends to',
    defaultValue: '',
    parse: text({ allowEmpty: true }),
  }),
  spec({
    key: 'logLevel',
    flag: '--log-level <level>',
    description: `log level: ${LOG_LEVELS.join(', ')}`,
    defaultValue: 'info',
    parse: oneOf(LOG_LEVELS),
  }),
];

/** `pollInterval` → `SE_SHIPPER_POLL_INTERVAL`. */
export function envNameOf(key: string): string {
  return `SE_SHIPPER_${key.replace(/[A-Z]/g, (c) => `_${c}`).toUpperCase()}`;
}

/** `--poll-interval <ms>` → `--poll-interval`. */
export function flagNameOf(option: OptionSpec): string {
  return option.flag.split(/\s+/)[0] ?? option.flag;
}
