import { type Command, CommanderError } from 'commander';
import { ConfigError } from '../config/errors.js';
import { redactSecrets } from '../observability/logger.js';

/** Exit codes: 0 ok, 1 runtime failure, 2 bad usage (flags, env, config). */
export const EXIT_USAGE = 2;
export const EXIT_FAILURE = 1;

/** Makes every (sub)command report usage errors on one `se-shipper: error: …` line and exit 2. */
export function applyExitPolicy(command: Command): void {
  command.exitOverride();
  command.configureOutput({ outputError: (text, write) => write(`se-shipper: ${text.trim()}\n`) });
  command.showSuggestionAfterError(true);
  for (const sub of command.commands) applyExitPolicy(sub);
}

/** Turns what a command threw into a one-line message and an exit code. */
export function exitCodeFor(err: unknown): number {
  if (err instanceof CommanderError) {
    if (
      err.code === 'commander.helpDisplayed' ||
      err.code === 'commander.version' ||
      err.code === 'commander.help'
    )
      return 0;
    return err.exitCode === 0 ? 0 : EXIT_USAGE; // commander already printed the message
  }
  if (err instanceof ConfigError) {
    process.stderr.write(`se-shipper: error: ${redactSecrets(err.message)}\n`);
    return EXIT_USAGE;
  }
  const message = err instanceof Error ? err.message : String(err);
  process.stderr.write(`se-shipper: error: ${redactSecrets(message)}\n`);
  return EXIT_FAILURE;
}
