import { readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { ShipperRecord } from '../../src/lifecycle/record.js';
import { decodeRecord, encodeRecord, fileName, parseFileName } from '../../src/spool/format.js';
import { Spool, type SpoolOptions } from '../../src/spool/spool.js';
import { captureLogger, heartbeat, lifecycle, tempDir } from './helpers.js';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()?.();
});

async function setup(opts: Partial<SpoolOptions> = {}) {
  const { dir, cleanup } = await tempDir();
  cleanups.push(cleanup);
  const { logger, lines } = captureLogger();
  const spool = await Spool.open({ dir, logger, ...opts });
  cleanups.push(() => spool.close());
  return { dir, spool, logger, lines };
}

async function recFiles(dir: string): Promise<string[]> {
  return (await readdir(dir)).filter((n) => n.endsWith('.rec')).sort();
}

async function ids(spool: Spool, max = 1_000_000): Promise<string[]> {
  return (await spool.peek(max)).map((e) => e.record.recordId);
}

describe('format', () => {
  it('round-trips a record and names files so that directory order is sequence order', () => {
    const r = lifecycle('round-trip');
    expect(decodeRecord(encodeRecord(r), 'lifecycle')).toEqual(r);
    expect(fileName(42, 'heartbeat')).toBe('0000000000000042-h.rec');
    expect(parseFileName('0000000000000042-h.rec')).toEqual({ seq: 42, recordType: 'heartbeat' });
    expect(parseFileName('42-h.rec')).toBeNull();
    const names = [9, 10, 100, 2].map((s) => fileName(s, 'lifecycle'));
    expect([...names].sort()).toEqual([2, 9, 10, 100].map((s) => fileName(s, 'lifecycle')));
  });

  it('rejects truncated, bit-flipped and mistyped content', () => {
    const data = encodeRecord(lifecycle());
    expect(() => decodeRecord(data.subarray(0, data.length - 5), 'lifecycle')).toThrow(/length/);
    const flipped = Buffer.from(data);
    flipped.writeUInt8(flipped.readUInt8(flipped.length - 10) ^ 0x01, flipped.length - 10);
    expect(() => decodeRecord(flipped, 'lifecycle')).toThrow(/CRC|JSON/);
    expect(() => decodeRecord(data, 'heartbeat')).toThrow(/type/);
    expect(() => decodeRecord(Buffer.from('hello\n'), 'lifecycle')).toThrow(/header/);
  });
});

describe('Spool durability and order', () => {
  it('has every appended record on disk when append resolves, and replays them in order after a crash', async () => {
    const { dir, spool, logger } = await setup();
    const appended: ShipperRecord[] = [];
    for (let i = 0; i < 5; i++) {
      const one = i % 2 === 0 ? lifecycle() : heartbeat();
      await spool.append([one]);
      appended.push(one);
      // Durable now: the file is there with the record in it.
      const files = await recFiles(dir);
      expect(files).toHaveLength(i + 1);
      const last = files[files.length - 1] as string;
      const parsed = parseFileName(last);
      expect(decodeRecord(await readFile(join(dir, last)), parsed?.recordType ?? 'lifecycle')).toEqual(one);
    }
    const batch = [lifecycle(), heartbeat(), lifecycle()];
    await spool.append(batch);
    appended.push(...batch);
    expect(await recFiles(dir)).toHaveLength(8);
    expect((await readdir(dir)).filter((n) => n.endsWith('.tmp'))).toEqual([]);

    // "Crash": no ack, no close; a second process opens the same directory.
    const reopened = await Spool.open({ dir, logger });
    cleanups.push(() => reopened.close());
    expect(reopened.depth).toBe(8);
    expect(reopened.bytes).toBe(spool.bytes);
    const replayed = await reopened.peek(100);
    expect(replayed.map((e) => e.record)).toEqual(appended);
    expect(replayed.map((e) => e.recordType)).toEqual(appended.map((r) => r.recordType));

    // New records go after the replayed ones, in the directory and in delivery order.
    const later = lifecycle('after-reopen');
    await reopened.append([later]);
    expect(await ids(reopened)).toEqual([...appended, later].map((r) => r.recordId));
    const files = await recFiles(dir);
    expect(files[files.length - 1]).toMatch(/-l\.rec$/);
  });

  it('peek does not remove; ack removes exactly the acknowledged records, from disk too', async () => {
    const { dir, spool, logger } = await setup();
    const recs = [lifecycle('a'), lifecycle('b'), heartbeat('c'), lifecycle('d')];
    await spool.append(recs);
    const head = await spool.peek(2);
    expect(head.map((e) => e.record.recordId)).toEqual(['a', 'b']);
    expect(await ids(spool)).toEqual(['a', 'b', 'c', 'd']);
    await spool.ack(head);
    expect(spool.depth).toBe(2);
    expect(await recFiles(dir)).toHaveLength(2);
    await spool.ack(head); // acking twice is harmless
    expect(spool.depth).toBe(2);
    expect(spool.stats()).toMatchObject({ acked: 2, appended: 4, lifecycle: 1, heartbeats: 1 });

    const reopened = await Spool.open({ dir, logger });
    cleanups.push(() => reopened.close());
    expect(await ids(reopened)).toEqual(['c', 'd']);
    await reopened.ack(await reopened.peek(10));
    expect(reopened.depth).toBe(0);
    expect(reopened.bytes).toBe(0);
    expect(await recFiles(dir)).toEqual([]);
  });

  it('quarantines corrupt, partial, temp and unknown files at open, with a warning, and keeps the good ones', async () => {
    const { dir, spool, logger, lines } = await setup();
    const good = [lifecycle('g1'), heartbeat('g2'), lifecycle('g3'), lifecycle('g4')];
    await spool.append(good);
    const files = await recFiles(dir);
    // g2: truncated (a partial write on a filesystem that lied); g3: one byte flipped; plus strays.
    const f2 = join(dir, files[1] as string);
    const data2 = await readFile(f2);
    await writeFile(f2, data2.subarray(0, data2.length - 20));
    const f3 = join(dir, files[2] as string);
    const data3 = await readFile(f3);
    data3.writeUInt8(data3.readUInt8(data3.length - 30) ^ 0x20, data3.length - 30);
    await writeFile(f3, data3);
    await writeFile(join(dir, `${fileName(99, 'lifecycle')}.tmp`), encodeRecord(lifecycle()).subarray(0, 50));
    await writeFile(join(dir, fileName(100, 'lifecycle')), 'not a record at all');
    await writeFile(join(dir, 'stray.txt'), 'hello');

    const reopened = await Spool.open({ dir, logger });
    cleanups.push(() => reopened.close());
    expect(await ids(reopened)).toEqual(['g1', 'g4']);
    expect(reopened.stats().quarantined).toBe(5);
    const quarantined = await readdir(join(dir, 'quarantine'));
    expect(quarantined).toHaveLength(5);
    expect(quarantined.some((n) => n.startsWith(files[1] as string))).toBe(true);
    expect(lines.filter((l) => l.level === 'warn' && /quarantined/.test(l.msg))).toHaveLength(5);
    // A new record still sorts after everything, including the quarantined names.
    await reopened.append([lifecycle('g5')]);
    expect(await ids(reopened)).toEqual(['g1', 'g4', 'g5']);
  });

  it('quarantines a file that went bad after open when it is peeked, and skips it', async () => {
    const { dir, spool } = await setup();
    await spool.append([lifecycle('x1'), lifecycle('x2'), lifecycle('x3')]);
    const files = await recFiles(dir);
    await writeFile(join(dir, files[1] as string), 'garbage\n');
    expect(await ids(spool)).toEqual(['x1', 'x3']);
    expect(spool.stats()).toMatchObject({ quarantined: 1, depth: 2 });
  });

  it('refuses to open when the directory cannot be created (a configuration error)', async () => {
    const { dir } = await tempDir();
    cleanups.push(() => rm(dir, { recursive: true, force: true }));
    await writeFile(join(dir, 'file'), 'x');
    const { logger } = captureLogger();
    await expect(Spool.open({ dir: join(dir, 'file', 'spool'), logger })).rejects.toMatchObject({
      code: 'ENOTDIR',
    });
  });
});

describe('Spool bounds and drop policy', () => {
  it('drops the oldest heartbeats first when the record count is exceeded, never a lifecycle record', async () => {
    const { dir, spool, lines } = await setup({ maxRecords: 5 });
    await spool.append([heartbeat('h1'), lifecycle('l1'), heartbeat('h2'), lifecycle('l2'), heartbeat('h3')]);
    expect(spool.depth).toBe(5);
    await spool.append([lifecycle('l3')]);
    expect(await ids(spool)).toEqual(['l1', 'h2', 'l2', 'h3', 'l3']);
    await spool.append([heartbeat('h4'), lifecycle('l4')]);
    expect(await ids(spool)).toEqual(['l1', 'l2', 'l3', 'h4', 'l4']);
    expect(spool.stats().dropped).toEqual({ heartbeat: 3, lifecycle: 0 });
    expect(await recFiles(dir)).toHaveLength(5);
    expect(lines.some((l) => l.level === 'warn' && /heartbeat dropped/.test(l.msg))).toBe(true);
  });

  it('drops the oldest heartbeats first when the byte bound is exceeded', async () => {
    const H = encodeRecord(heartbeat('h0')).length;
    const L = encodeRecord(lifecycle('l0')).length;
    const maxBytes = 3 * H + L + Math.floor(H / 2);
    const { dir, spool } = await setup({ maxBytes });
    await spool.append([heartbeat('h1'), heartbeat('h2'), lifecycle('l1'), heartbeat('h3')]);
    expect(spool.depth).toBe(4);
    // A lifecycle record the size of two heartbeats: two heartbeats must go to make room.
    const base = lifecycle('l0').description;
    const big = lifecycle('l2', { description: base + 'x'.repeat(2 * H - L) });
    expect(encodeRecord(big).length).toBe(2 * H);
    await spool.append([big]);
    expect(await ids(spool)).toEqual(['l1', 'h3', 'l2']);
    expect(spool.bytes).toBeLessThanOrEqual(maxBytes);
    expect(spool.stats().dropped).toEqual({ heartbeat: 2, lifecycle: 0 });
    expect(await recFiles(dir)).toHaveLength(3);
  });

  it('when only lifecycle records remain: a new heartbeat is dropped, a new lifecycle record is kept over the bound, durably, with an error log', async () => {
    const { dir, spool, lines, logger } = await setup({ maxRecords: 3 });
    await spool.append([lifecycle('l1'), lifecycle('l2'), lifecycle('l3')]);
    await spool.append([heartbeat('h1')]);
    expect(await ids(spool)).toEqual(['l1', 'l2', 'l3']);
    expect(spool.stats().dropped).toEqual({ heartbeat: 1, lifecycle: 0 });
    await spool.append([lifecycle('l4'), heartbeat('h2'), lifecycle('l5')]);
    expect(await ids(spool)).toEqual(['l1', 'l2', 'l3', 'l4', 'l5']);
    expect(spool.stats()).toMatchObject({
      lifecycleOverLimit: 2,
      depth: 5,
      dropped: { heartbeat: 2, lifecycle: 0 },
    });
    expect(lines.filter((l) => l.level === 'error' && /over the bound/.test(l.msg))).toHaveLength(2);
    // Kept on disk, not just in memory: a restart still has them.
    expect(await recFiles(dir)).toHaveLength(5);
    const reopened = await Spool.open({ dir, logger, maxRecords: 3 });
    cleanups.push(() => reopened.close());
    expect(await ids(reopened)).toEqual(['l1', 'l2', 'l3', 'l4', 'l5']);
  });

  it('drops a heartbeat that is being peeked (in flight) without breaking its later ack', async () => {
    const { spool } = await setup({ maxRecords: 2 });
    await spool.append([heartbeat('h1'), lifecycle('l1')]);
    const inFlight = await spool.peek(10);
    await spool.append([lifecycle('l2')]); // drops h1 while "in flight"
    await spool.ack(inFlight);
    expect(await ids(spool)).toEqual(['l2']);
    expect(spool.stats()).toMatchObject({ acked: 1, dropped: { heartbeat: 1, lifecycle: 0 } });
  });
});
