/**
 * `npm run bench`: runs every `bench/*.bench.ts` module (compiled to dist-bench) in name order,
 * or only those whose name contains one of the command-line arguments. Each module exports
 * `run(): Promise<void>` and prints its own figures; benchmarks print, they never assert.
 */
import { readdirSync } from 'node:fs';
import { dirname } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const filters = process.argv.slice(2);
const files = readdirSync(here)
  .filter((f) => f.endsWith('.bench.js'))
  .filter((f) => filters.length === 0 || filters.some((x) => f.includes(x)))
  .sort();

for (const file of files) {
  const mod = (await import(pathToFileURL(`${here}/${file}`).href)) as { run: () => Promise<void> };
  console.log(`\n## ${file.replace(/\.bench\.js$/, '')}`);
  await mod.run();
}
