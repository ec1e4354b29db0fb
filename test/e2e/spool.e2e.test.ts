/**
 * Spool and restart faults, end to end (IMDS emulator → `se-shipper run --sink eventhubs` → Event
 * Hubs emulator → SDK consumer): spool bounds with the hub down, an unwritable spool, SIGTERM
 * during an outage, and an Event Hubs restart with a store. Same verdict and timings as
 * faults.e2e.test.ts.
 */
import { readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ImdsClient } from '../../src/imds/client.js';
import { buildHeartbeatRecord, vmIdentityFromCompute } from '../../src/lifecycle/enrich.js';
import { createLogger } from '../../src/observability/logger.js';
import { shipperIdentity } from '../../src/pipeline/identity.js';
import { Spool } from '../../src/spool/spool.js';
import {
  allArrived,
  expectedTransitions,
  lifecycleOf,
  lifecycleScript,
  logsWith,
  play,
  type Stack,
  started,
  startShipper,
  startStack,
  stopShipper,
  verdict,
  waitFor,
  waitForLog,
} from './harness.js';

let stack: Stack | undefined;
afterEach(async () => {
  await stack?.close();
  stack = undefined;
});

describe('spool and restart faults: no lifecycle record lost', () => {
  it('SIGTERM while the hub is down: bounded flush, exit 0, the next start delivers the backlog', async () => {
    stack = await startStack();
    const s = stack;
    await s.hub.stopListening();
    const first = startShipper(s);
    await started(first);
    await play(s.imds, lifecycleScript('term'));
    await waitForLog(s, /send failed/);
    expect(await stopShipper(first)).toEqual({ code: 0, signal: null });
    expect(logsWith(s, /undelivered records stay in the spool/).length).toBe(1);
    await s.hub.resumeListening();
    const second = startShipper(s);
    await started(second);
    await verdict(s);
    expect(await stopShipper(second)).toEqual({ code: 0, signal: null });
  });

  it('spool full (hub down, tiny bounds, heartbeats every second): heartbeats dropped first, no lifecycle record lost', async () => {
    stack = await startStack();
    const s = stack;
    // What a previous run left after ~95 s with the hub down: 95 heartbeats, written by the spool
    // itself, so that the 100-record bound is reached within seconds.
    const compute = await new ImdsClient({ endpoint: s.imds.url }).getInstanceCompute();
    const vm = vmIdentityFromCompute(compute);
    const old = await Spool.open({
      dir: join(s.stateDir, 'spool'),
      logger: createLogger({ level: 'silent' }),
    });
    const t0 = Date.now() - 95_000;
    const counters = {
      activeEvents: 0,
      spoolDepth: 0,
      pollsOk: 0,
      pollsFailed: 0,
      lastIncarnation: 0,
      uptimeSeconds: 0,
    };
    await old.append(
      Array.from({ length: 95 }, (_, i) =>
        buildHeartbeatRecord(counters, t0 + i * 1000, vm, shipperIdentity()),
      ),
    );
    await old.close();
    await s.hub.stopListening();
    const run = startShipper(s, {
      args: ['--spool-max-records', '100', '--spool-max-bytes', '64KiB', '--heartbeat-interval', '1'],
    });
    await started(run);
    await play(s.imds, lifecycleScript('full'));
    await waitFor(() => logsWith(s, /heartbeat dropped/).length > 0, 'a heartbeat drop');
    await s.hub.resumeListening();
    await verdict(s);
    expect(await stopShipper(run)).toEqual({ code: 0, signal: null });
    // The oldest heartbeats were the ones dropped: the first of the previous run never arrived.
    const heartbeats = s.hub
      .events()
      .filter((e) => (e.body as { recordType: string }).recordType === 'heartbeat');
    const firstOld = buildHeartbeatRecord(counters, t0, vm, shipperIdentity()).recordId;
    expect(heartbeats.some((e) => (e.body as { recordId: string }).recordId === firstOld)).toBe(false);
    expect(logsWith(s, /admitting this lifecycle record over the bound/)).toHaveLength(0);
  });

  it('spool unwritable (its directory replaced by a file): records delivered from memory, loudly logged', async () => {
    // We run as root, so permissions would not stop writes: the spool directory is removed and a
    // regular file is put at its path while the shipper runs. Every write then fails (ENOTDIR /
    // EEXIST), which is what a vanished or broken mount looks like.
    stack = await startStack();
    const s = stack;
    const run = startShipper(s);
    await started(run);
    const script = lifecycleScript('ro');
    await play(s.imds, script.slice(0, 2));
    await allArrived(s.hub, expectedTransitions(s.imds));
    const spoolDir = join(s.stateDir, 'spool');
    await waitFor(() => readdirSync(spoolDir).every((f) => !f.endsWith('.rec')), 'an empty spool directory');
    rmSync(spoolDir, { recursive: true, force: true });
    writeFileSync(spoolDir, 'not a directory\n');
    await play(s.imds, script.slice(2));
    await verdict(s);
    const diskErrors = logsWith(s, /SPOOL DISK ERROR/, 'error');
    expect(diskErrors).toHaveLength(1);
    expect(await stopShipper(run)).toEqual({ code: 0, signal: null });
  });

  it('spool unwritable and hub down, then kill -9: the records held only in memory survive in the state file', async () => {
    stack = await startStack();
    const s = stack;
    const first = startShipper(s);
    await started(first);
    const script = lifecycleScript('wal');
    await play(s.imds, script.slice(0, 2));
    await allArrived(s.hub, expectedTransitions(s.imds));
    const delivered = lifecycleOf(s.hub.events()).length;
    const spoolDir = join(s.stateDir, 'spool');
    await waitFor(() => readdirSync(spoolDir).every((f) => !f.endsWith('.rec')), 'an empty spool directory');
    await s.hub.stopListening();
    rmSync(spoolDir, { recursive: true, force: true });
    writeFileSync(spoolDir, 'not a directory\n');
    await play(s.imds, script.slice(2));
    // Every record derived since is held in memory by the spool and written ahead in state.json.
    const remaining = [...expectedTransitions(s.imds).values()].reduce((a, b) => a + b, 0) - delivered;
    const pendingInStateFile = () => {
      try {
        const state = JSON.parse(readFileSync(join(s.stateDir, 'state.json'), 'utf8')) as {
          pending?: unknown[];
        };
        return state.pending?.length ?? 0;
      } catch {
        return 0;
      }
    };
    await waitFor(() => pendingInStateFile() >= remaining, 'the held records in the state file');
    first.child.kill('SIGKILL');
    await first.exited;
    rmSync(spoolDir, { force: true });
    await s.hub.resumeListening();
    const second = startShipper(s);
    await started(second);
    await verdict(s);
    expect(await stopShipper(second)).toEqual({ code: 0, signal: null });
  });

  it('Event Hubs emulator restarted with a store: its events survive and the shipper reconnects', async () => {
    stack = await startStack({ hubStore: true });
    const s = stack;
    const run = startShipper(s);
    await started(run);
    const script = lifecycleScript('restart');
    await play(s.imds, script.slice(0, 4));
    await allArrived(s.hub, expectedTransitions(s.imds));
    const before = lifecycleOf(s.hub.events()).map((r) => r.recordId);
    await s.hub.restart();
    expect(lifecycleOf(s.hub.events()).map((r) => r.recordId)).toEqual(before);
    await play(s.imds, script.slice(4));
    await verdict(s);
    expect(
      lifecycleOf(s.hub.events())
        .slice(0, before.length)
        .map((r) => r.recordId),
    ).toEqual(before);
    expect(await stopShipper(run)).toEqual({ code: 0, signal: null });
  });
});
