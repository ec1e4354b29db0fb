import { Command } from 'commander';
import { integer } from '../config/parsers.js';
import { runDemo } from '../demo/run-demo.js';

export function createDemoCommand(): Command {
  return new Command('demo')
    .description(
      'run the whole pipeline on local emulators (IMDS → se-shipper run → Event Hubs) and show the records arriving; what `npm start` runs',
    )
    .option('--scenario <name|file>', 'IMDS emulator scenario', 'demo')
    .option('--speed <factor>', "scenario speed factor (default: the scenario's own)")
    .option('--timeout <seconds>', 'give up after this long', '120')
    .option('--keep', 'keep the temporary state dir and shipper log')
    .action(async (flags: { scenario: string; speed?: string; timeout: string; keep?: boolean }) => {
      const summary = await runDemo({
        scenario: flags.scenario,
        ...(flags.speed ? { speed: integer(1, 3600)(flags.speed) } : {}),
        timeoutMs: integer(10, 3600)(flags.timeout) * 1000,
        ...(flags.keep ? { keep: true } : {}),
      });
      process.exitCode = summary.ok ? 0 : 1;
    });
}
