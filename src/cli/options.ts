import type { Command } from 'commander';
import { ConfigError } from '../config/errors.js';
import { envNameOf, type OptionSpec, SHIPPER_OPTIONS, type ShipperConfig } from '../config/options.js';
import { type ResolvedConfig, readConfigFile, resolveConfig } from '../config/resolve.js';

/** Declares the option table on a command. No commander defaults: resolveConfig applies them after env and file. */
export function addShipperOptions(command: Command, keys?: readonly (keyof ShipperConfig)[]): Command {
  const options = keys ? SHIPPER_OPTIONS.filter((o) => keys.includes(o.key)) : SHIPPER_OPTIONS;
  for (const option of options) {
    const shownDefault = option.defaultValue === '' ? 'none' : String(option.defaultValue);
    command.option(
      option.flag,
      `${option.description} [env ${envNameOf(option.key)}; default ${shownDefault}]`,
    );
  }
  command.option('--config <file>', `JSON file of option keys and values [env ${envNameOf('config')}]`);
  return command;
}

/** Resolves flags > env > config file > defaults for the options the command declared. */
export function resolveCommandConfig(
  flags: Record<string, unknown>,
  keys?: readonly (keyof ShipperConfig)[],
  env: NodeJS.ProcessEnv = process.env,
): ResolvedConfig {
  const options: readonly OptionSpec[] = keys
    ? SHIPPER_OPTIONS.filter((o) => keys.includes(o.key))
    : SHIPPER_OPTIONS;
  const configPath = (flags.config as string | undefined) ?? env[envNameOf('config')];
  const file = configPath ? readConfigFile(configPath) : undefined;
  const resolved = resolveConfig({ flags, env, ...(file ? { file } : {}) }, options);
  if (keys) {
    // Options the command does not use keep their defaults; resolveConfig only checked its own.
    for (const o of SHIPPER_OPTIONS) {
      if (!keys.includes(o.key))
        (resolved.config as unknown as Record<string, unknown>)[o.key] = o.defaultValue;
    }
  }
  return resolved;
}

export { ConfigError };
