import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { CONNECTION_STRING_ENV, envNameOf, flagNameOf, SHIPPER_OPTIONS } from '../../src/config/options.js';

const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');
const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
  scripts: Record<string, string>;
};

describe('README', () => {
  it('starts with the two newcomer commands, and both exist as npm scripts', () => {
    const firstBlock = /```sh\n([\s\S]*?)```/.exec(readme)?.[1] ?? '';
    expect(firstBlock).toMatch(/^npm ci && npm start/m);
    expect(firstBlock).toMatch(/^npm test/m);
    expect(pkg.scripts.start).toBeDefined();
    expect(pkg.scripts.test).toBeDefined();
  });

  it.each(SHIPPER_OPTIONS.map((o) => [flagNameOf(o), envNameOf(o.key)]))(
    'documents %s and %s',
    (flag, env) => {
      expect(readme).toContain(`\`${flag} `);
      expect(readme).toContain(`\`${env}\``);
    },
  );

  it('documents the connection string variable', () => {
    expect(readme).toContain(CONNECTION_STRING_ENV);
  });
});
