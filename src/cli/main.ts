#!/usr/bin/env node
import { Command } from 'commander';
import { createEventHubsEmulatorCommand } from '../emulators/eventhubs/command.js';
import { createImdsEmulatorCommand } from '../emulators/imds/command.js';
import { SHIPPER_VERSION } from '../version.js';

const program = new Command('se-shipper')
  .description('Ships Azure Scheduled Events of this VM to Azure Event Hubs, at least once.')
  .version(SHIPPER_VERSION);

program
  .command('emulate')
  .description('local emulators of the Azure services the shipper talks to')
  .addCommand(createImdsEmulatorCommand())
  .addCommand(createEventHubsEmulatorCommand());

await program.parseAsync(process.argv);
