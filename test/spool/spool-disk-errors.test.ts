/**
 * Disk failures, for real: a spool directory replaced by a file (ENOTDIR, works anywhere), and,
 * where the test may mount (we run as root in CI), a 64 KiB tmpfs filled up (ENOSPC) or
 * remounted read-only (EROFS). chmod is no use here: root ignores permission bits.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { readdir, rm, unlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Spool } from '../../src/spool/spool.js';
import { captureLogger, heartbeat, lifecycle, tempDir, until } from './helpers.js';

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()?.();
});

function tryMountTinyTmpfs(): string | null {
  const mnt = mkdtempSync(join(tmpdir(), 'se-spool-mnt-'));
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=64k,mode=0700', 'tmpfs', mnt], { stdio: 'ignore' });
    return mnt;
  } catch {
    rmSync(mnt, { recursive: true, force: true });
    return null;
  }
}

const probe = tryMountTinyTmpfs();
if (probe) {
  execFileSync('umount', [probe]);
  rmSync(probe, { recursive: true, force: true });
}
const canMount = probe !== null;

function mountTiny(): string {
  const mnt = tryMountTinyTmpfs();
  if (!mnt) throw new Error('mount failed');
  cleanups.push(() => {
    execFileSync('umount', ['-l', mnt], { stdio: 'ignore' });
    rmSync(mnt, { recursive: true, force: true });
  });
  return mnt;
}

async function ids(spool: Spool): Promise<string[]> {
  return (await spool.peek(1000)).map((e) => e.record.recordId);
}

async function recFiles(dir: string): Promise<string[]> {
  return (await readdir(dir)).filter((n) => n.endsWith('.rec')).sort();
}

describe('Spool on disk errors', () => {
  it('keeps records in memory (still handed out, in order) when the directory is gone, logs loudly, and writes them once it is back', async () => {
    const { dir: base, cleanup } = await tempDir();
    cleanups.push(cleanup);
    const dir = join(base, 'spool');
    const { logger, lines } = captureLogger();
    const spool = await Spool.open({ dir, logger, diskRetryMs: 60_000, errorLogIntervalMs: 60_000 });
    cleanups.push(() => spool.close());

    await spool.append([lifecycle('A')]);
    // Someone replaces the spool directory with a file: every write now fails with ENOTDIR.
    await rm(dir, { recursive: true });
    await writeFile(dir, 'not a directory');

    await spool.append([lifecycle('B'), heartbeat('b-hb')]);
    await spool.append([lifecycle('C')]);
    expect(spool.stats()).toMatchObject({ degraded: true, memoryHeld: 3 });
    // First write: ENOTDIR; later retries first try to re-create the directory: EEXIST.
    expect(spool.stats().lastDiskError).toMatch(/^(ENOTDIR|EEXIST)$/);
    const loud = lines.filter((l) => l.level === 'error' && /SPOOL DISK ERROR/.test(l.msg));
    expect(loud).toHaveLength(1);
    expect(loud[0]).toMatchObject({ code: 'ENOTDIR' });
    // A (on disk before the failure) can no longer be read: peek reports it missing and moves on.
    const head = await spool.peek(10);
    expect(head.map((e) => e.record.recordId)).toEqual(['B', 'b-hb', 'C']);
    expect(spool.stats().missing).toBe(1);

    // The disk comes back; the next append writes the held records first, then its own, in order.
    await unlink(dir);
    await spool.append([lifecycle('D')]);
    expect(spool.stats()).toMatchObject({ degraded: false, memoryHeld: 0, depth: 4 });
    expect(lines.some((l) => l.level === 'warn' && /works again/.test(l.msg))).toBe(true);
    expect(await recFiles(dir)).toHaveLength(4);
    const reopened = await Spool.open({ dir, logger });
    cleanups.push(() => reopened.close());
    expect(await ids(reopened)).toEqual(['B', 'b-hb', 'C', 'D']);
  });

  it('acks memory-held records without touching the disk', async () => {
    const { dir: base, cleanup } = await tempDir();
    cleanups.push(cleanup);
    const dir = join(base, 'spool');
    const { logger } = captureLogger();
    const spool = await Spool.open({ dir, logger, diskRetryMs: 60_000 });
    cleanups.push(() => spool.close());
    await rm(dir, { recursive: true });
    await writeFile(dir, 'x');
    await spool.append([lifecycle('m1'), lifecycle('m2')]);
    await spool.ack(await spool.peek(1));
    expect(await ids(spool)).toEqual(['m2']);
    expect(spool.stats()).toMatchObject({ memoryHeld: 1, depth: 1 });
    await spool.ack(await spool.peek(1));
    expect(spool.stats()).toMatchObject({ memoryHeld: 0, depth: 0, bytes: 0 });
  });

  it.skipIf(!canMount)('survives ENOSPC on a full 64 KiB tmpfs and retries the disk on its own', async () => {
    const mnt = mountTiny();
    const dir = join(mnt, 'spool');
    const { logger, lines } = captureLogger();
    const spool = await Spool.open({ dir, logger, diskRetryMs: 20 });
    cleanups.push(() => spool.close());
    await spool.append([lifecycle('before')]);

    const filler = join(mnt, 'filler');
    await writeFile(filler, Buffer.alloc(1024 * 1024)).catch((err: NodeJS.ErrnoException) => {
      expect(err.code).toBe('ENOSPC');
    });
    await spool.append([lifecycle('full-1'), heartbeat('full-hb'), lifecycle('full-2')]);
    expect(spool.stats()).toMatchObject({ degraded: true, lastDiskError: 'ENOSPC', memoryHeld: 3, depth: 4 });
    expect(lines.some((l) => l.level === 'error' && l.code === 'ENOSPC')).toBe(true);
    expect(await ids(spool)).toEqual(['before', 'full-1', 'full-hb', 'full-2']);
    expect((await readdir(dir)).filter((n) => n.endsWith('.tmp'))).toEqual([]);

    await unlink(filler);
    // Nobody appends: the retry timer alone makes them durable.
    await until(() => spool.stats().memoryHeld === 0, 10_000, 'disk retry');
    expect(spool.stats().degraded).toBe(false);
    const reopened = await Spool.open({ dir, logger });
    cleanups.push(() => reopened.close());
    expect(await ids(reopened)).toEqual(['before', 'full-1', 'full-hb', 'full-2']);
  });

  it.skipIf(!canMount)('survives EROFS (filesystem remounted read-only) for appends and acks', async () => {
    const mnt = mountTiny();
    const dir = join(mnt, 'spool');
    mkdirSync(dir);
    const { logger, lines } = captureLogger();
    const spool = await Spool.open({ dir, logger, diskRetryMs: 60_000 });
    cleanups.push(() => spool.close());
    await spool.append([lifecycle('r1'), lifecycle('r2')]);

    execFileSync('mount', ['-o', 'remount,ro', mnt]);
    await spool.append([lifecycle('r3')]);
    expect(spool.stats()).toMatchObject({ degraded: true, lastDiskError: 'EROFS', memoryHeld: 1 });
    // Acking r1 cannot unlink its file: logged, and it leaves the queue (a restart would resend it).
    await spool.ack(await spool.peek(1));
    expect(await ids(spool)).toEqual(['r2', 'r3']);
    expect(lines.some((l) => l.level === 'error' && /could not remove/.test(l.msg))).toBe(true);

    execFileSync('mount', ['-o', 'remount,rw', mnt]);
    expect(await spool.retryDisk()).toBe(true);
    expect(spool.stats()).toMatchObject({ degraded: false, memoryHeld: 0 });
    const reopened = await Spool.open({ dir, logger });
    cleanups.push(() => reopened.close());
    // r1 comes back (its unlink failed): a duplicate, never a loss.
    expect(await ids(reopened)).toEqual(['r1', 'r2', 'r3']);
  });
});
