import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runCli } from '../fixtures/child.js';
import { event, eventsDoc, startImdsFixture } from '../fixtures/imds-fixture.js';
import { assertValidRecord } from '../fixtures/record-schema.js';

const dir = mkdtempSync(join(tmpdir(), 'se-shipper-usage-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('bad flags and configuration', () => {
  it.each([
    [['run', '--poll-interval', 'fast'], /invalid --poll-interval "fast": must be a whole number/],
    [['run', '--poll-interval', '50'], /--poll-interval "50": must be between 200 and 60000/],
    [['run', '--scope', 'mine'], /--scope "mine": must be one of self, all/],
    [['run', '--imds-endpoint', 'not a url'], /--imds-endpoint .*absolute URL/],
    [['run', '--sink', 'file'], /--sink file needs --out/],
    [['run', '--no-such-flag'], /unknown option '--no-such-flag'/],
    [['frobnicate'], /unknown command 'frobnicate'/],
  ])('%j exits 2 with one line', async (args, message) => {
    const result = await runCli(args, { SE_SHIPPER_STATE_DIR: dir });
    expect(result.code).toBe(2);
    const lines = result.stderr.trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^se-shipper: error: /);
    expect(lines[0]).toMatch(message);
    expect(result.stdout).toBe('');
  });

  it('names the environment variable that holds a bad value', async () => {
    const result = await runCli(['run'], { SE_SHIPPER_SCOPE: 'everything', SE_SHIPPER_STATE_DIR: dir });
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(/invalid SE_SHIPPER_SCOPE "everything"/);
  });

  it('rejects unknown keys and bad values in a config file, and lets flags win over it', async () => {
    const file = join(dir, 'config.json');
    writeFileSync(file, JSON.stringify({ pollInterval: 'soon' }));
    const bad = await runCli(['run', '--config', file]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/invalid config file key "pollInterval" "soon"/);
    writeFileSync(file, JSON.stringify({ pollIntrval: 500 }));
    const unknown = await runCli(['run', '--config', file]);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toMatch(/unknown key "pollIntrval"/);
  });

  it('refuses a state dir it cannot create with a one-line error', async () => {
    const file = join(dir, 'a-file');
    writeFileSync(file, '');
    const result = await runCli([
      'run',
      '--state-dir',
      join(file, 'sub'),
      '--imds-endpoint',
      'http://127.0.0.1:9',
    ]);
    expect(result.code).not.toBe(0);
    expect(result.stderr.trim().split('\n').at(-1)).toMatch(/^se-shipper: error: .*(ENOTDIR|EEXIST)/);
  });

  it('--help exits 0', async () => {
    const result = await runCli(['run', '--help']);
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/SE_SHIPPER_POLL_INTERVAL/);
  });
});

describe('se-shipper once', () => {
  it('prints the current events as records and exits 0', async () => {
    const fixture = await startImdsFixture();
    try {
      fixture.setDocument(
        eventsDoc(7, [
          event({ EventId: 'e-sched' }),
          event({ EventId: 'e-started', EventStatus: 'Started', NotBefore: '' }),
          event({ EventId: 'e-other', Resources: ['web_9'] }),
        ]),
      );
      const result = await runCli(['once', '--imds-endpoint', fixture.url]);
      expect(result.code).toBe(0);
      expect(result.records.map((r) => [r.eventId, r.phase])).toEqual([
        ['e-sched', 'Scheduled'],
        ['e-started', 'Started'],
      ]);
      for (const r of result.records) assertValidRecord(r);
    } finally {
      await fixture.close();
    }
  });

  it('exits 1 with one line when IMDS cannot be reached', async () => {
    const fixture = await startImdsFixture();
    fixture.fault({ kind: 'status', status: 404 });
    try {
      const result = await runCli(['once', '--imds-endpoint', fixture.url]);
      expect(result.code).toBe(1);
      expect(result.stderr.trim().split('\n').at(-1)).toMatch(
        /^se-shipper: error: IMDS scheduled events answered HTTP 404/,
      );
    } finally {
      await fixture.close();
    }
  });
});
