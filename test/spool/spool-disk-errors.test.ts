/**
 * Disk failures, for real: a spool directory replaced by a file (ENOTDIR, works anywhere), and,
 * where the test may mount (we run as root in CI), a 64 KiB tmpfs filled up (ENOSPC) or
 * remounted read-only (EROFS). chmod is no use here: root ignores permission bits.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { mkdir, readdir, readFile, rm, unlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { HEAD_READ_FAILURE_LIMIT, Spool } from '../../src/spool/spool.js';
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

  it('append resolves true when durable, false while any of its records is held in memory; memoryHeld says when all are written', async () => {
    const { dir: base, cleanup } = await tempDir();
    cleanups.push(cleanup);
    const dir = join(base, 'spool');
    const { logger } = captureLogger();
    const spool = await Spool.open({ dir, logger, diskRetryMs: 60_000 });
    cleanups.push(() => spool.close());

    expect(await spool.append([])).toBe(true);
    expect(await spool.append([lifecycle('d1'), heartbeat('d1-hb')])).toBe(true);
    expect(spool.memoryHeld).toBe(0);
    await spool.ack(await spool.peek(10));

    await rm(dir, { recursive: true });
    await writeFile(dir, 'not a directory');
    expect(await spool.append([lifecycle('m1')])).toBe(false);
    expect(await spool.append([heartbeat('m2-hb'), lifecycle('m2')])).toBe(false);
    expect(spool.memoryHeld).toBe(3);
    expect(spool.stats().memoryHeld).toBe(3);
    // Still failing: nothing was written.
    expect(await spool.retryDisk()).toBe(false);
    expect(spool.memoryHeld).toBe(3);

    // The disk is back: the next append writes the held records first and reports its own durable.
    await unlink(dir);
    expect(await spool.append([lifecycle('after')])).toBe(true);
    expect(spool.memoryHeld).toBe(0);
    expect(spool.stats()).toMatchObject({ memoryHeld: 0, degraded: false, depth: 4 });
    expect(await recFiles(dir)).toHaveLength(4);
    const reopened = await Spool.open({ dir, logger });
    cleanups.push(() => reopened.close());
    expect(await ids(reopened)).toEqual(['m1', 'm2-hb', 'm2', 'after']);
  });

  it('memoryHeld also drops for held records that were delivered (acked) or dropped by the bounds, never below 0', async () => {
    const { dir: base, cleanup } = await tempDir();
    cleanups.push(cleanup);
    const dir = join(base, 'spool');
    const { logger } = captureLogger();
    const spool = await Spool.open({ dir, logger, diskRetryMs: 60_000, maxRecords: 2 });
    cleanups.push(() => spool.close());
    await rm(dir, { recursive: true });
    await writeFile(dir, 'x');
    expect(await spool.append([heartbeat('h1'), lifecycle('l1')])).toBe(false);
    expect(spool.memoryHeld).toBe(2);
    // l2 pushes h1 (memory-held) out by the bounds.
    expect(await spool.append([lifecycle('l2')])).toBe(false);
    expect(spool.stats()).toMatchObject({ memoryHeld: 2, depth: 2, dropped: { heartbeat: 1 } });
    await spool.ack(await spool.peek(2));
    expect(spool.stats()).toMatchObject({ memoryHeld: 0, depth: 0 });
    expect(await spool.retryDisk()).toBe(true);
  });

  it('a new heartbeat dropped by the bounds does not make append false (dropped by policy, not held)', async () => {
    const { dir, cleanup } = await tempDir();
    cleanups.push(cleanup);
    const { logger } = captureLogger();
    const spool = await Spool.open({ dir, logger, maxRecords: 1 });
    cleanups.push(() => spool.close());
    expect(await spool.append([lifecycle('only')])).toBe(true);
    expect(await spool.append([heartbeat('no-room')])).toBe(true);
    expect(spool.stats()).toMatchObject({ depth: 1, memoryHeld: 0, dropped: { heartbeat: 1 } });
  });

  it('writes older held records first even when an admitted heartbeat of the same append was dropped again', async () => {
    const { dir: base, cleanup } = await tempDir();
    cleanups.push(cleanup);
    const dir = join(base, 'spool');
    const { logger } = captureLogger();
    const spool = await Spool.open({ dir, logger, diskRetryMs: 60_000, maxRecords: 2 });
    cleanups.push(() => spool.close());
    await rm(dir, { recursive: true });
    await writeFile(dir, 'x');
    expect(await spool.append([lifecycle('old')])).toBe(false);
    await unlink(dir);
    // h1 is admitted, then pushed out again by x within the same append: x and the older held
    // record must both be written, old first.
    expect(await spool.append([heartbeat('h1'), lifecycle('x')])).toBe(true);
    expect(spool.stats()).toMatchObject({ memoryHeld: 0, degraded: false, depth: 2 });
    expect(await recFiles(dir)).toHaveLength(2);
    const reopened = await Spool.open({ dir, logger });
    cleanups.push(() => reopened.close());
    expect(await ids(reopened)).toEqual(['old', 'x']);
  });

  it(`quarantines a head record that fails to read ${HEAD_READ_FAILURE_LIMIT} times in a row (EISDIR) and hands out the ones behind it`, async () => {
    const { dir, cleanup } = await tempDir();
    cleanups.push(cleanup);
    const { logger, lines } = captureLogger();
    const spool = await Spool.open({ dir, logger });
    cleanups.push(() => spool.close());
    expect(await spool.append([lifecycle('bad'), lifecycle('next'), heartbeat('next-hb')])).toBe(true);
    // Replace the head's file with a directory of the same name: reading it fails with EISDIR,
    // for root too (unlike chmod).
    const [head] = await recFiles(dir);
    await unlink(join(dir, head as string));
    await mkdir(join(dir, head as string));

    for (let i = 1; i < HEAD_READ_FAILURE_LIMIT; i++) {
      await expect(spool.peek(10)).rejects.toMatchObject({ code: 'EISDIR' });
      expect(spool.stats()).toMatchObject({ depth: 3, quarantined: 0 });
    }
    expect(await ids(spool)).toEqual(['next', 'next-hb']);
    expect(spool.stats()).toMatchObject({ depth: 2, quarantined: 1, missing: 0 });
    const warn = lines.find((l) => l.level === 'warn' && /quarantined/.test(l.msg));
    expect(warn).toMatchObject({ file: head, seq: 1 });
    expect(String(warn?.reason)).toMatch(/EISDIR/);
    const quarantined = await readdir(join(dir, 'quarantine'));
    expect(quarantined).toHaveLength(1);
    expect(quarantined[0]?.startsWith(head as string)).toBe(true);
    expect(await recFiles(dir)).toHaveLength(2);
  });

  it('counts only consecutive failures of the same head: a successful read in between restarts the count', async () => {
    const { dir, cleanup } = await tempDir();
    cleanups.push(cleanup);
    const { logger } = captureLogger();
    const spool = await Spool.open({ dir, logger });
    cleanups.push(() => spool.close());
    await spool.append([lifecycle('flaky'), lifecycle('behind')]);
    const [head] = await recFiles(dir);
    const path = join(dir, head as string);
    const content = await readFile(path);
    const breakHead = async (): Promise<void> => {
      await unlink(path);
      await mkdir(path);
    };
    const healHead = async (): Promise<void> => {
      await rm(path, { recursive: true });
      await writeFile(path, content);
    };
    await breakHead();
    for (let i = 1; i < HEAD_READ_FAILURE_LIMIT; i++) await expect(spool.peek(10)).rejects.toThrow();
    await healHead();
    expect(await ids(spool)).toEqual(['flaky', 'behind']);
    await breakHead();
    for (let i = 1; i < HEAD_READ_FAILURE_LIMIT; i++) await expect(spool.peek(10)).rejects.toThrow();
    expect(spool.stats()).toMatchObject({ depth: 2, quarantined: 0 });
    expect(await ids(spool)).toEqual(['behind']);
    expect(spool.stats().quarantined).toBe(1);
  });
});
