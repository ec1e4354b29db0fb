/**
 * deploy/install.sh and deploy/uninstall.sh, run for real against a temporary root: a bundle is
 * made from this checkout with deploy/make-bundle.sh (no network), installed exactly as the Custom
 * Script extension would run it (the `set -- <args>` prologue built from shipper-vm.bicep), and the
 * resulting files, user, permissions and systemd unit are checked; `systemd-analyze verify` must
 * accept the unit. Needs root (chown, useradd --prefix) and Linux; skipped otherwise.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { envNameOf, SHIPPER_OPTIONS } from '../../src/config/options.js';
import { declarations, parseBicep, stringValue } from './bicep.js';

const repo = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const isRoot = process.platform === 'linux' && process.getuid?.() === 0;
const hasSystemdAnalyze = spawnSync('systemd-analyze', ['--version']).status === 0;
const hasBuild = existsSync(join(repo, 'dist', 'cli', 'main.js'));

const NAMESPACE = 'contoso-se.servicebus.windows.net';
const HUB = 'scheduled-events';
const CLIENT_ID = '0b9a1c2d-3e4f-4a5b-8c6d-7e8f9a0b1c2d';

function makeRoot(base: string): string {
  const root = join(base, 'root');
  mkdirSync(join(root, 'etc'), { recursive: true });
  writeFileSync(join(root, 'etc', 'passwd'), 'root:x:0:0:root:/root:/bin/bash\n');
  writeFileSync(join(root, 'etc', 'group'), 'root:x:0:\n');
  writeFileSync(join(root, 'etc', 'shadow'), 'root:*:19000:0:99999:7:::\n', { mode: 0o600 });
  writeFileSync(join(root, 'etc', 'gshadow'), 'root:*::\n', { mode: 0o600 });
  return root;
}

/** Bicep single-quoted string source → its value, with `${...}` replaced by `values`. */
function bicepString(source: string, values: Record<string, string>): string {
  if (!source.startsWith("'") || !source.endsWith("'"))
    throw new Error(`not a Bicep string: ${source.slice(0, 40)}`);
  let out = '';
  const body = source.slice(1, -1);
  for (let i = 0; i < body.length; i++) {
    const c = body[i];
    if (c === '\\') {
      const n = body[++i] ?? '';
      out += ({ n: '\n', r: '\r', t: '\t' } as Record<string, string>)[n] ?? n;
    } else if (c === '$' && body[i + 1] === '{') {
      const end = body.indexOf('}', i);
      // Interpolations may contain quoted strings with '}'? Not ours: match up to the closing brace.
      const expr = body.slice(i + 2, end);
      const v = values[expr];
      if (v === undefined) throw new Error(`unexpected interpolation \x24{${expr}}`);
      out += v;
      i = end;
    } else {
      out += c;
    }
  }
  return out;
}

/** The script the Linux Custom Script extension runs, assembled exactly like shipper-vm.bicep does. */
async function extensionScript(bundle: string): Promise<string> {
  const b = await parseBicep(join(repo, 'infra', 'bicep', 'modules', 'shipper-vm.bicep'));
  const vars = declarations(b, 'variable_declaration');
  const argsNode = vars.get('installArgs');
  const scriptNode = vars.get('installScript');
  if (argsNode?.type !== 'string' || scriptNode?.type !== 'string') {
    throw new Error('shipper-vm.bicep: installArgs / installScript are not strings');
  }
  expect(stringValue(argsNode)).toBeUndefined(); // interpolated
  const args = bicepString(argsNode.text, {
    eventHubsNamespaceFqdn: NAMESPACE,
    eventHubName: HUB,
    identityClientId: CLIENT_ID,
    nodeSource: 'auto',
    nodeDistUrl: 'https://nodejs.org/dist',
    packageArg: `--bundle '${bundle}'`,
  });
  return bicepString(scriptNode.text, {
    installArgs: args,
    "loadFileAsBase64('../../../deploy/install.sh')": readFileSync(
      join(repo, 'deploy', 'install.sh'),
    ).toString('base64'),
  });
}

describe.skipIf(!isRoot || !hasBuild)('deploy/install.sh into a temporary root', () => {
  let base: string;
  let root: string;
  let bundle: string;

  beforeAll(() => {
    base = mkdtempSync(join(tmpdir(), 'se-install-'));
    root = makeRoot(base);
    bundle = execFileSync('bash', [join(repo, 'deploy', 'make-bundle.sh'), '--out', base], {
      cwd: repo,
      encoding: 'utf8',
      timeout: 180_000,
      stdio: ['ignore', 'pipe', 'pipe'],
    })
      .trim()
      .split('\n')
      .pop() as string;
  }, 200_000);

  afterAll(() => {
    if (base) rmSync(base, { recursive: true, force: true });
  });

  // The extension runs the payload with /bin/sh.
  const run = (script: string, extraEnv: Record<string, string> = {}) =>
    spawnSync('/bin/sh', ['-c', script, 'install.sh'], {
      encoding: 'utf8',
      timeout: 120_000,
      env: { ...process.env, SE_INSTALL_ROOT: root, ...extraEnv },
    });

  it('the bundle holds the package and its production dependencies', () => {
    const list = execFileSync('tar', ['-tzf', bundle], { encoding: 'utf8', maxBuffer: 64 << 20 });
    expect(list).toContain('package/package.json');
    expect(list).toContain('package/dist/cli/main.js');
    expect(list).toContain('package/node_modules/@azure/event-hubs/package.json');
    expect(list).not.toContain('package/node_modules/vitest/');
    expect(list).not.toContain('package/node_modules/@biomejs/');
  });

  it('installs as the Custom Script extension runs it, twice (idempotent)', async () => {
    const script = await extensionScript(bundle);
    for (let i = 0; i < 2; i++) {
      const r = run(script);
      expect(r.stderr).toContain('installed scheduled-events-shipper');
      expect(r.status, r.stderr).toBe(0);
    }
    const passwd = readFileSync(join(root, 'etc', 'passwd'), 'utf8');
    expect(passwd.split('\n').filter((l) => l.startsWith('se-shipper:'))).toHaveLength(1);
  }, 240_000);

  it('creates a dedicated system user with no login shell and the state dir on the OS disk', () => {
    const line = readFileSync(join(root, 'etc', 'passwd'), 'utf8')
      .split('\n')
      .find((l) => l.startsWith('se-shipper:'));
    const [, , uid, gid, , home, shell] = (line ?? '').split(':');
    expect(Number(uid)).toBeGreaterThan(0);
    expect(Number(uid)).toBeLessThan(1000);
    expect(home).toBe('/var/lib/se-shipper');
    expect(shell).toMatch(/nologin$/);
    const st = statSync(join(root, 'var', 'lib', 'se-shipper'));
    expect(st.isDirectory()).toBe(true);
    expect(st.uid).toBe(Number(uid));
    expect(st.gid).toBe(Number(gid));
    expect(st.mode & 0o777).toBe(0o750);
  });

  it('writes the settings as SE_SHIPPER_* variables, readable by root and the service group only', () => {
    const file = join(root, 'etc', 'se-shipper', 'se-shipper.env');
    const env = readFileSync(file, 'utf8');
    expect(env).toContain('SE_SHIPPER_SINK=eventhubs\n');
    expect(env).toContain(`SE_SHIPPER_EVENTHUBS_NAMESPACE=${NAMESPACE}\n`);
    expect(env).toContain(`SE_SHIPPER_EVENTHUB=${HUB}\n`);
    expect(env).toContain(`SE_SHIPPER_MANAGED_IDENTITY_CLIENT_ID=${CLIENT_ID}\n`);
    expect(env).toContain('SE_SHIPPER_STATE_DIR=/var/lib/se-shipper\n');
    expect(statSync(file).mode & 0o777).toBe(0o640);
    // Every variable is one the shipper reads (its options, env name SE_SHIPPER_<KEY>).
    const known = new Set(SHIPPER_OPTIONS.map((o) => envNameOf(o.key)));
    const written = env
      .split('\n')
      .filter((l) => /^[A-Z_]+=/.test(l))
      .map((l) => l.slice(0, l.indexOf('=')));
    expect(written.length).toBeGreaterThanOrEqual(8);
    for (const name of written) expect(known, name).toContain(name);
  });

  it('installs the code root-owned, with a se-shipper link, and its dependencies load', () => {
    const app = join(root, 'opt', 'se-shipper', 'lib', 'node_modules', 'scheduled-events-shipper');
    expect(statSync(join(app, 'dist', 'cli', 'main.js')).uid).toBe(0);
    expect(lstatSync(join(root, 'opt', 'se-shipper', 'bin', 'se-shipper')).isSymbolicLink()).toBe(true);
    const pkg = JSON.parse(readFileSync(join(app, 'package.json'), 'utf8')) as {
      dependencies: Record<string, string>;
    };
    const probe = join(app, 'load-probe.mjs');
    writeFileSync(
      probe,
      `for (const d of ${JSON.stringify(Object.keys(pkg.dependencies))}) await import(d);\nconsole.log('ok');\n`,
    );
    try {
      const out = execFileSync(process.execPath, [probe], { cwd: app, encoding: 'utf8', timeout: 60_000 });
      expect(out.trim()).toBe('ok');
    } finally {
      rmSync(probe);
    }
  }, 120_000);

  it('writes a hardened unit that restarts forever', () => {
    const unit = readFileSync(join(root, 'etc', 'systemd', 'system', 'se-shipper.service'), 'utf8');
    for (const line of [
      'User=se-shipper',
      'Restart=always',
      'StartLimitIntervalSec=0',
      'NoNewPrivileges=yes',
      'ProtectSystem=strict',
      'ReadWritePaths=/var/lib/se-shipper',
      'ProtectHome=yes',
      'PrivateTmp=yes',
      'CapabilityBoundingSet=',
      'EnvironmentFile=/etc/se-shipper/se-shipper.env',
      'WantedBy=multi-user.target',
    ]) {
      expect(unit.split('\n')).toContain(line);
    }
    const exec = unit.split('\n').find((l) => l.startsWith('ExecStart='));
    expect(exec).toMatch(
      /^ExecStart=\/\S+\/node \/opt\/se-shipper\/lib\/node_modules\/scheduled-events-shipper\/dist\/cli\/main\.js run$/,
    );
  });

  it.skipIf(!hasSystemdAnalyze)('systemd-analyze verify accepts the unit, and flags a broken copy', () => {
    const unitPath = join(root, 'etc', 'systemd', 'system', 'se-shipper.service');
    const ok = spawnSync('systemd-analyze', ['verify', unitPath], { encoding: 'utf8', timeout: 60_000 });
    expect(ok.status, ok.stderr).toBe(0);
    expect(ok.stderr.split('\n').filter((l) => l.includes('se-shipper.service'))).toEqual([]);
    // The check is live: an unknown directive is reported.
    const broken = join(base, 'se-shipper.service');
    writeFileSync(
      broken,
      readFileSync(unitPath, 'utf8').replace('Restart=always', 'Restart=always\nRestartz=no'),
    );
    const bad = spawnSync('systemd-analyze', ['verify', broken], { encoding: 'utf8', timeout: 60_000 });
    expect(bad.stderr).toMatch(/Restartz/);
  });

  it('rejects missing or malformed settings before touching anything', () => {
    const install = join(repo, 'deploy', 'install.sh');
    const r1 = spawnSync('bash', [install, '--eventhub', HUB, '--client-id', CLIENT_ID], {
      encoding: 'utf8',
      env: { ...process.env, SE_INSTALL_ROOT: join(base, 'never') },
    });
    expect(r1.status).not.toBe(0);
    expect(r1.stderr).toContain('--eventhubs-namespace is required');
    const r2 = spawnSync(
      'bash',
      [install, '--eventhubs-namespace', NAMESPACE, '--eventhub', HUB, '--client-id', "x'; rm -rf /"],
      { encoding: 'utf8', env: { ...process.env, SE_INSTALL_ROOT: join(base, 'never') } },
    );
    expect(r2.status).not.toBe(0);
    expect(r2.stderr).toContain('--client-id must be a GUID');
    expect(existsSync(join(base, 'never'))).toBe(false);
  });

  it('--node nodejs.org: downloads, checks SHASUMS256.txt, unpacks a private runtime; refuses a bad checksum', () => {
    // A local mirror with the nodejs.org layout; its "runtime" links to the node running this test.
    const version = process.versions.node;
    const arch = process.arch === 'arm64' ? 'arm64' : 'x64';
    const name = `node-v${version}-linux-${arch}`;
    const dist = join(base, 'dist');
    const stage = join(base, 'stage');
    mkdirSync(join(stage, name, 'bin'), { recursive: true });
    symlinkSync(process.execPath, join(stage, name, 'bin', 'node'));
    mkdirSync(join(dist, `v${version}`), { recursive: true });
    const tarball = join(dist, `v${version}`, `${name}.tar.xz`);
    execFileSync('tar', ['-cJf', tarball, '-C', stage, name]);
    const sha = createHash('sha256').update(readFileSync(tarball)).digest('hex');
    const sums = join(dist, `v${version}`, 'SHASUMS256.txt');
    writeFileSync(sums, `${'0'.repeat(64)}  node-v${version}-darwin-x64.tar.gz\n${sha}  ${name}.tar.xz\n`);

    const root2 = makeRoot(join(base, 'r2'));
    const install = (extra: string[] = []) =>
      spawnSync(
        'bash',
        [
          join(repo, 'deploy', 'install.sh'),
          ...['--eventhubs-namespace', NAMESPACE, '--eventhub', HUB, '--client-id', CLIENT_ID],
          ...['--bundle', bundle, '--node', 'nodejs.org', '--node-version', version],
          ...['--node-dist-url', `file://${dist}`, '--root', root2, '--no-start', ...extra],
        ],
        { encoding: 'utf8', timeout: 120_000 },
      );
    const ok = install();
    expect(ok.status, ok.stderr).toBe(0);
    expect(ok.stderr).toContain(`downloading Node.js v${version}`);
    const privateNode = join(root2, 'opt', 'se-shipper', 'node', 'bin', 'node');
    expect(lstatSync(privateNode).isSymbolicLink()).toBe(true);
    const unit = readFileSync(join(root2, 'etc', 'systemd', 'system', 'se-shipper.service'), 'utf8');
    expect(unit).toContain('\nExecStart=/opt/se-shipper/node/bin/node /opt/se-shipper/lib/node_modules/');

    // Same version already unpacked: reused, no download (so a bad checksum file is not even read).
    writeFileSync(sums, `${'f'.repeat(64)}  ${name}.tar.xz\n`);
    const again = install();
    expect(again.status, again.stderr).toBe(0);
    expect(again.stderr).not.toContain('downloading');

    // Fresh download against a wrong checksum: refused, the runtime is not installed.
    rmSync(join(root2, 'opt', 'se-shipper', 'node'), { recursive: true });
    const bad = install();
    expect(bad.status).not.toBe(0);
    expect(bad.stderr).toContain('checksum mismatch');
    expect(existsSync(privateNode)).toBe(false);

    // Only https (or a local file:// mirror) is accepted.
    const http = install(['--node-dist-url', 'http://nodejs.org/dist']);
    expect(http.status).not.toBe(0);
    expect(http.stderr).toContain('refusing to download over anything but https');
  }, 240_000);

  it('uninstall.sh keeps the state by default and removes everything with --purge', () => {
    const uninstall = join(repo, 'deploy', 'uninstall.sh');
    const keep = spawnSync('bash', [uninstall, '--root', root], { encoding: 'utf8', timeout: 60_000 });
    expect(keep.status, keep.stderr).toBe(0);
    expect(existsSync(join(root, 'etc', 'systemd', 'system', 'se-shipper.service'))).toBe(false);
    expect(existsSync(join(root, 'opt', 'se-shipper'))).toBe(false);
    expect(existsSync(join(root, 'etc', 'se-shipper'))).toBe(false);
    expect(existsSync(join(root, 'var', 'lib', 'se-shipper'))).toBe(true);
    const purge = spawnSync('bash', [uninstall, '--root', root, '--purge'], {
      encoding: 'utf8',
      timeout: 60_000,
    });
    expect(purge.status, purge.stderr).toBe(0);
    expect(existsSync(join(root, 'var', 'lib', 'se-shipper'))).toBe(false);
    expect(readFileSync(join(root, 'etc', 'passwd'), 'utf8')).not.toContain('se-shipper:');
  });
});
