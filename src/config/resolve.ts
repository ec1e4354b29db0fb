import { readFileSync } from 'node:fs';
import { ConfigError } from './errors.js';
import {
  CONNECTION_STRING_ENV,
  envNameOf,
  flagNameOf,
  type OptionSpec,
  SHIPPER_OPTIONS,
  type ShipperConfig,
} from './options.js';

export interface ConfigSources {
  /** Values given as flags (commander's opts(), keyed by option key; absent when not given). */
  flags: Record<string, unknown>;
  env: NodeJS.ProcessEnv;
  /** Parsed config file, keyed by option key. */
  file?: Record<string, unknown>;
}

export type ConfigSource = 'flag' | 'env' | 'file' | 'default';

export interface ResolvedConfig {
  config: ShipperConfig;
  /** Where each value came from, for the start-up log line. */
  sources: Record<keyof ShipperConfig, ConfigSource>;
}

/** Reads a JSON config file whose keys are option keys (camelCase). Unknown keys are errors. */
export function readConfigFile(
  path: string,
  options: readonly OptionSpec[] = SHIPPER_OPTIONS,
): Record<string, unknown> {
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(path, 'utf8'));
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    throw new ConfigError(`cannot read config file ${path}: ${e.code ?? e.message}`);
  }
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) {
    throw new ConfigError(`config file ${path} must hold a JSON object`);
  }
  const known = new Set(options.map((o) => o.key as string));
  for (const key of Object.keys(raw)) {
    if (!known.has(key)) {
      throw new ConfigError(`config file ${path}: unknown key "${key}" (known: ${[...known].join(', ')})`);
    }
  }
  return raw as Record<string, unknown>;
}

/** Applies precedence flags > env > file > defaults and validates every value. */
export function resolveConfig(
  sources: ConfigSources,
  options: readonly OptionSpec[] = SHIPPER_OPTIONS,
): ResolvedConfig {
  const config: Record<string, unknown> = {};
  const from: Record<string, ConfigSource> = {};
  for (const option of options) {
    const envName = envNameOf(option.key);
    const candidates: [ConfigSource, unknown, string][] = [
      ['flag', sources.flags[option.key], flagNameOf(option)],
      ['env', sources.env[envName], envName],
      ['file', sources.file?.[option.key], `config file key "${option.key}"`],
    ];
    const hit = candidates.find(([, value]) => value !== undefined);
    if (!hit) {
      config[option.key] = option.defaultValue;
      from[option.key] = 'default';
      continue;
    }
    const [source, value, label] = hit;
    try {
      config[option.key] = option.parse(value);
    } catch (err) {
      const shown = typeof value === 'string' ? `"${value}"` : JSON.stringify(value);
      throw new ConfigError(`invalid ${label} ${shown}: ${(err as Error).message}`);
    }
    from[option.key] = source;
  }
  const resolved = config as unknown as ShipperConfig;
  if (resolved.sink === 'file' && !resolved.out) {
    throw new ConfigError(`--sink file needs --out <path> (or ${envNameOf('out')})`);
  }
  if (resolved.sink === 'eventhubs') {
    // Empty counts as unset (a systemd `Environment=` may clear it), as in the daemon.
    const connectionString = sources.env[CONNECTION_STRING_ENV] || undefined;
    if (connectionString !== undefined && !/(^|;)\s*Endpoint=/i.test(connectionString)) {
      throw new ConfigError(`${CONNECTION_STRING_ENV} is not an Event Hubs connection string (no Endpoint=)`);
    }
    if (connectionString && !resolved.eventhub && !/(^|;)\s*EntityPath=[^;]+/i.test(connectionString)) {
      throw new ConfigError(`${CONNECTION_STRING_ENV} has no EntityPath=; give the hub with --eventhub`);
    }
    if (!connectionString && !(resolved.eventhubsNamespace && resolved.eventhub)) {
      throw new ConfigError(
        `--sink eventhubs needs --eventhubs-namespace and --eventhub (managed identity), or ${CONNECTION_STRING_ENV}`,
      );
    }
  }
  return { config: resolved, sources: from };
}
