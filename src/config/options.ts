import { LOG_LEVELS, type LogLevel } from '../observability/logger.js';
import { bytesSize, httpUrl, integer, oneOf, type Parser, port, text } from './parsers.js';

export const SCOPES = ['self', 'all'] as const;
export type Scope = (typeof SCOPES)[number];
export const SINK_KINDS = ['eventhubs', 'stdout', 'file'] as const;
export type SinkKind = (typeof SINK_KINDS)[number];
export const CREDENTIAL_KINDS = ['managed-identity', 'default'] as const;
export type CredentialKind = (typeof CREDENTIAL_KINDS)[number];
/** The only way to give a connection string: an environment variable never shows in `ps`. */
export const CONNECTION_STRING_ENV = 'SE_SHIPPER_EVENTHUBS_CONNECTION_STRING';

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
  eventhubsNamespace: string;
  eventhub: string;
  credential: CredentialKind;
  managedIdentityClientId: string;
  heartbeatInterval: number;
  healthPort: number;
  spoolMaxBytes: number;
  spoolMaxRecords: number;
  flushTimeout: number;
  sendTimeout: number;
  retryMaxBackoff: number;
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
    description: 'IMDS base URL (an emulator for local use); plain http, as IMDS itself',
    defaultValue: 'http://169.254.169.254',
    parse: httpUrl(['http:']),
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
    key: 'eventhubsNamespace',
    flag: '--eventhubs-namespace <fqdn>',
    description: `Event Hubs namespace, e.g. contoso-se.servicebus.windows.net (or ${CONNECTION_STRING_ENV})`,
    defaultValue: '',
    parse: (raw) =>
      text({ allowEmpty: true })(raw)
        .replace(/^sb:\/\//i, '')
        .replace(/\/+$/, ''),
  }),
  spec({
    key: 'eventhub',
    flag: '--eventhub <name>',
    description: 'event hub name (optional when the connection string has EntityPath)',
    defaultValue: '',
    parse: text({ allowEmpty: true }),
  }),
  spec({
    key: 'credential',
    flag: '--credential <kind>',
    description: 'managed-identity (VMs) or default (DefaultAzureCredential, for developer machines)',
    defaultValue: 'managed-identity',
    parse: oneOf(CREDENTIAL_KINDS),
  }),
  spec({
    key: 'managedIdentityClientId',
    flag: '--managed-identity-client-id <id>',
    description: 'client id of the user-assigned identity to use (system-assigned when empty)',
    defaultValue: '',
    parse: text({ allowEmpty: true }),
  }),
  spec({
    key: 'heartbeatInterval',
    flag: '--heartbeat-interval <seconds>',
    description: 'seconds between heartbeat records; 0 disables them',
    defaultValue: 300,
    parse: integer(0, 86_400),
  }),
  spec({
    key: 'healthPort',
    flag: '--health-port <port>',
    description: 'serve /healthz and /metrics on 127.0.0.1:<port>; 0 = off',
    defaultValue: 0,
    parse: port(),
  }),
  spec({
    key: 'spoolMaxBytes',
    flag: '--spool-max-bytes <size>',
    description: 'bound of the on-disk spool (e.g. 32MiB); heartbeats are dropped first when full',
    defaultValue: 32 * 1024 * 1024,
    parse: bytesSize(64 * 1024),
  }),
  spec({
    key: 'spoolMaxRecords',
    flag: '--spool-max-records <n>',
    description: 'bound of the number of spooled records',
    defaultValue: 20_000,
    parse: integer(100),
  }),
  spec({
    key: 'flushTimeout',
    flag: '--flush-timeout <ms>',
    description: 'on SIGTERM, how long to keep sending before leaving the rest in the spool',
    defaultValue: 5_000,
    parse: integer(0, 120_000),
  }),
  spec({
    key: 'sendTimeout',
    flag: '--send-timeout <ms>',
    description:
      'a send to the sink not confirmed by then is abandoned and retried (also bounds the Event Hubs client operation timeout)',
    defaultValue: 60_000,
    parse: integer(500, 600_000),
  }),
  spec({
    key: 'retryMaxBackoff',
    flag: '--retry-max-backoff <ms>',
    description: 'cap of the jittered exponential backoff between failed sends (retried forever)',
    defaultValue: 30_000,
    parse: integer(500, 600_000),
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
