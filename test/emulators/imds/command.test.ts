import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createImdsEmulatorCommand, type ImdsEmulator } from '../../../src/emulators/imds/index.js';
import { createLogger } from '../../../src/observability/logger.js';
import { getDoc, http, MD } from './http.js';

let dir: string;
const running: ImdsEmulator[] = [];
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'imds-cmd-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});
afterEach(async () => {
  await Promise.all(running.splice(0).map((e) => e.close()));
  for (const k of Object.keys(process.env)) if (k.startsWith('SE_IMDS_EMULATOR_')) delete process.env[k];
  process.exitCode = undefined;
});

async function runCommand(args: string[]) {
  const stdout = new PassThrough();
  let out = '';
  stdout.on('data', (c: Buffer) => {
    out += c.toString('utf8');
  });
  let emulator: ImdsEmulator | undefined;
  const cmd = createImdsEmulatorCommand({
    stdout,
    logger: createLogger({ level: 'silent' }),
    handleSignals: false,
    onStarted: (e) => {
      emulator = e;
      running.push(e);
    },
  });
  cmd.exitOverride();
  await cmd.parseAsync(args, { from: 'user' });
  return { out, emulator };
}

describe('se-shipper emulate imds (in-process)', () => {
  it('prints one JSON ready line with the URL and serves the chosen scenario and identity', async () => {
    const { out, emulator } = await runCommand([
      '--port',
      '0',
      '--scenario',
      'freeze',
      '--speed',
      '60',
      '--vm-name',
      'web_3',
      '--seed',
      's',
    ]);
    const lines = out.trim().split('\n');
    expect(lines).toHaveLength(1);
    const ready = JSON.parse(lines[0] as string);
    expect(ready).toMatchObject({
      event: 'ready',
      service: 'imds-emulator',
      scenario: 'freeze',
      speed: 60,
      vmName: 'web_3',
      host: '127.0.0.1',
    });
    expect(ready.url).toBe(emulator?.url);
    const doc = (await getDoc(ready.url)).doc;
    expect(doc?.Events[0]?.Resources).toEqual(['web_3']);
    const compute = JSON.parse(
      (await http(`${ready.url}/metadata/instance/compute?api-version=2021-02-01`, { headers: MD })).body,
    );
    expect(compute).toMatchObject({ name: 'web_3', vmScaleSetName: 'web' });
  });

  it('flags beat environment, environment beats the config file', async () => {
    const config = join(dir, 'config.json');
    await writeFile(
      config,
      JSON.stringify({
        port: 0,
        scenario: 'reboot',
        speed: 5,
        notBeforeFormat: 'iso',
        identity: { location: 'eastus', vmScaleSetName: 'cfg' },
      }),
    );
    process.env.SE_IMDS_EMULATOR_SPEED = '30';
    process.env.SE_IMDS_EMULATOR_SCENARIO = 'redeploy';
    const { emulator } = await runCommand(['--config', config, '--scenario', 'preempt']);
    expect(emulator?.model.scenarioName).toBe('preempt');
    expect(emulator?.model.speed).toBe(30);
    expect(emulator?.model.notBeforeFormat).toBe('iso');
    expect(emulator?.identity).toMatchObject({ location: 'eastus', name: 'cfg_0' });
  });

  it('reports a bad scenario file by field and exits 2 without listening', async () => {
    const file = join(dir, 'bad.json');
    await writeFile(
      file,
      JSON.stringify({
        name: 'b',
        steps: [{ at: 0, action: 'schedule', event: { ref: 'a', notBefore: 1 } }],
      }),
    );
    const stderr: string[] = [];
    const write = process.stderr.write.bind(process.stderr);
    process.stderr.write = (chunk: string) => {
      stderr.push(String(chunk));
      return true;
    };
    try {
      const { out, emulator } = await runCommand(['--port', '0', '--scenario', file]);
      expect(out).toBe('');
      expect(emulator).toBeUndefined();
    } finally {
      process.stderr.write = write;
    }
    expect(process.exitCode).toBe(2);
    expect(stderr.join('')).toMatch(
      /bad\.json: scenario\.steps\[0\]\.event\.type: expected a string, got nothing/,
    );
  });

  it('rejects a bad config file and bad flag values', async () => {
    const config = join(dir, 'bad-config.json');
    await writeFile(config, JSON.stringify({ port: 0, sped: 3 }));
    await expect(runCommand(['--config', config])).rejects.toThrow(
      /config file .*bad-config\.json: config\.sped: unknown field/,
    );
    await expect(runCommand(['--speed', 'fast'])).rejects.toThrow(/--speed must be a number/);
    await expect(runCommand(['--terminate-notice', '60'])).rejects.toThrow(
      /--terminate-notice must be ≥ 300/,
    );
  });

  it('lists the built-in scenarios', async () => {
    const { out } = await runCommand(['--list-scenarios']);
    const names = out
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l).name);
    expect(names).toEqual(
      expect.arrayContaining(['demo', 'freeze', 'reboot', 'redeploy', 'preempt', 'terminate', 'cancel']),
    );
  });
});
