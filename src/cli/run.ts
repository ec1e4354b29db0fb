import { Command } from 'commander';
import { createLogger } from '../observability/logger.js';
import { startDaemon } from '../pipeline/daemon.js';
import { addShipperOptions, resolveCommandConfig } from './options.js';

export function createRunCommand(): Command {
  const command = new Command('run').description(
    'poll IMDS scheduled events and ship lifecycle records until SIGTERM/SIGINT',
  );
  addShipperOptions(command);
  command.action(async (flags: Record<string, unknown>) => {
    const { config, sources } = resolveCommandConfig(flags);
    const logger = createLogger({ level: config.logLevel });
    logger.debug({ sources }, 'configuration sources');
    const daemon = await startDaemon(config, logger);
    let exitCode = 0;
    await new Promise<void>((resolve) => {
      let stopping = false;
      const onSignal = (signal: NodeJS.Signals) => {
        if (stopping) {
          logger.warn({ signal }, 'second signal: exiting now');
          process.exit(1);
        }
        stopping = true;
        logger.info({ signal }, 'stopping: finishing the current poll, flushing, saving state');
        daemon.stop().then(
          () => {
            logger.info('stopped');
            resolve();
          },
          (err: unknown) => {
            logger.error({ err }, 'error while stopping');
            exitCode = 1;
            resolve();
          },
        );
      };
      process.on('SIGTERM', onSignal);
      process.on('SIGINT', onSignal);
    });
    // Everything is flushed and saved. Exit explicitly: @azure/event-hubs 6.0.4 leaks a token
    // renewal timer each time the service detaches a link, which would otherwise keep the
    // process alive for up to 45 minutes and make systemd wait for its stop timeout.
    process.exit(exitCode);
  });
  return command;
}
