import { Command } from 'commander';

// Placeholder until the imds emulator lands: replaced wholesale by its implementation.
export function createImdsEmulatorCommand(): Command {
  return new Command('imds').description('imds emulator (not implemented yet)').action(() => {
    process.stderr.write('se-shipper: the imds emulator is not implemented yet\n');
    process.exitCode = 2;
  });
}
