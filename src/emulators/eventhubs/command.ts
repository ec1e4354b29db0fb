import { Command } from 'commander';

// Placeholder until the eventhubs emulator lands: replaced wholesale by its implementation.
export function createEventHubsEmulatorCommand(): Command {
  return new Command('eventhubs').description('eventhubs emulator (not implemented yet)').action(() => {
    process.stderr.write('se-shipper: the eventhubs emulator is not implemented yet\n');
    process.exitCode = 2;
  });
}
