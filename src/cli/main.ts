#!/usr/bin/env node
import { Command } from 'commander';
import { createEventHubsEmulatorCommand } from '../emulators/eventhubs/command.js';
import { createImdsEmulatorCommand } from '../emulators/imds/command.js';
import { SHIPPER_VERSION } from '../version.js';
import { createDemoCommand } from './demo.js';
import { applyExitPolicy, exitCodeFor } from './exit.js';
import { createOnceCommand } from './once.js';
import { createRunCommand } from './run.js';

const program = new Command('se-shipper')
  .description('Ships Azure Scheduled Events of this VM to Azure Event Hubs, at least once.')
  .version(SHIPPER_VERSION);

program.addCommand(createRunCommand());
program.addCommand(createOnceCommand());
program.addCommand(createDemoCommand());
program.addCommand(
  new Command('emulate')
    .description('local emulators of the Azure services the shipper talks to')
    .addCommand(createImdsEmulatorCommand())
    .addCommand(createEventHubsEmulatorCommand()),
);
applyExitPolicy(program);

try {
  await program.parseAsync(process.argv);
} catch (err) {
  process.exitCode = exitCodeFor(err);
}
