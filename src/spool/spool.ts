/**
 * The durable spool: an on-disk FIFO of records between the tracker and the sink.
 *
 * One small file per record, written atomically (temp file + fsync + rename + directory fsync),
 * named `<seq>-<l|h>.rec` so that directory order is delivery order. A record is on disk before
 * `append` resolves and is removed only by `ack`, after the sink confirmed its batch. Bounded by
 * bytes and count: when full, the oldest heartbeats go first; a lifecycle record is never dropped
 * (see `append`). On disk errors the spool logs loudly, keeps the records in memory (they are
 * still delivered) and retries the disk later. Format and guarantees: docs/spool.md.
 */
import { type Dirent, readFileSync } from 'node:fs';
import { mkdir, open, readdir, rename, unlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { RecordType, ShipperRecord } from '../lifecycle/record.js';
import type { Logger } from '../observability/logger.js';
import {
  CorruptRecordError,
  decodeRecord,
  encodeRecord,
  fileName,
  parseFileName,
  RECORD_SUFFIX,
  TEMP_SUFFIX,
} from './format.js';
import { LogLimiter } from '../observability/log-limiter.js';

export const DEFAULT_MAX_BYTES = 32 * 1024 * 1024;
export const DEFAULT_MAX_RECORDS = 20_000;
export const DEFAULT_DISK_RETRY_MS = 10_000;
export const QUARANTINE_DIR = 'quarantine';
export const REJECTED_DIR = 'rejected';
/** How many files are read or written concurrently (bounded so a big backlog does not open 10k fds). */
const IO_CONCURRENCY = 64;
/** Files read synchronously between two yields to the event loop. */
const READ_CHUNK = 16;
/**
 * Consecutive failed reads (other than a vanished file) of the same head record after which
 * `peek` quarantines it instead of rejecting again, so that one unreadable file cannot wedge
 * every record behind it.
 */
export const HEAD_READ_FAILURE_LIMIT = 5;

export interface SpoolOptions {
  /** Spool directory (created if missing; its parent must exist or be creatable). */
  dir: string;
  logger: Logger;
  /** Upper bound of the sum of the spool files' sizes. Default 32 MiB. */
  maxBytes?: number;
  /** Upper bound of the number of records. Default 20 000. */
  maxRecords?: number;
  /** After a disk error, how often the disk is retried when nothing else triggers it. Default 10 s. */
  diskRetryMs?: number;
  /** Minimum interval between two repeated error lines of the same kind. Default 60 s. */
  errorLogIntervalMs?: number;
}

/** A record as handed out by `peek`, to be passed back to `ack` once the sink confirmed it. */
export interface SpoolEntry {
  /** Position in the spool; unique within this process, increasing in delivery order. */
  readonly seq: number;
  readonly recordType: RecordType;
  /** Encoded size (the size of its file). */
  readonly bytes: number;
  readonly record: ShipperRecord;
}

export interface SpoolStats {
  depth: number;
  bytes: number;
  lifecycle: number;
  heartbeats: number;
  /**
   * Records held only in memory because the disk failed (not yet written to disk, not yet acked,
   * not dropped). 0 means every record still in the spool is durable on disk.
   */
  memoryHeld: number;
  appended: number;
  acked: number;
  dropped: { heartbeat: number; lifecycle: number };
  /** Lifecycle records admitted although the spool was full of lifecycle records (never dropped). */
  lifecycleOverLimit: number;
  quarantined: number;
  /** Records moved to `rejected/` because the sink can never take them (see DeliveryLoop). */
  rejected: number;
  /** Files that vanished from the directory behind the spool's back. */
  missing: number;
  diskErrors: number;
  degraded: boolean;
  lastDiskError: string | null;
}

interface IndexEntry {
  seq: number;
  recordType: RecordType;
  bytes: number;
  /** File name once durable; null while held in memory only. */
  file: string | null;
  /** The encoded file content while held in memory (null once on disk: read back on peek). */
  data: Buffer | null;
  record: ShipperRecord | null;
}

function errCode(err: unknown): string {
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  return typeof code === 'string' ? code : 'EUNKNOWN';
}

async function mapLimit<T, R>(items: readonly T[], limit: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const out = new Array<R>(items.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i] as T);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return out;
}

/**
 * Reads small files with synchronous reads, `READ_CHUNK` at a time, yielding to the event loop
 * between chunks. For ~1 KB files in the page cache this is several times faster than
 * `fs.promises.readFile` (one thread-pool round trip per open/stat/read/close) and blocks the
 * event loop for well under a millisecond at a time.
 */
async function readFilesYielding(paths: readonly string[]): Promise<(Buffer | Error)[]> {
  const out: (Buffer | Error)[] = [];
  for (let i = 0; i < paths.length; i++) {
    if (i > 0 && i % READ_CHUNK === 0) await new Promise<void>((resolve) => setImmediate(resolve));
    try {
      out.push(readFileSync(paths[i] as string));
    } catch (err) {
      out.push(err as Error);
    }
  }
  return out;
}

export class Spool {
  readonly dir: string;
  private readonly logger: Logger;
  private readonly maxBytes: number;
  private readonly maxRecords: number;
  private readonly diskRetryMs: number;
  private readonly limiter: LogLimiter;

  /** All entries; Map iteration order is insertion order, and seqs are inserted increasing. */
  private readonly index = new Map<number, IndexEntry>();
  /** The heartbeat subset, same order: its first entry is the oldest heartbeat. */
  private readonly heartbeatIndex = new Map<number, IndexEntry>();
  private nextSeq = 1;
  private totalBytes = 0;
  private memoryHeldCount = 0;
  private chain: Promise<unknown> = Promise.resolve();
  private readonly listeners = new Set<() => void>();
  private retryTimer: NodeJS.Timeout | null = null;
  private closed = false;
  /** Consecutive `peek` read failures of the head record (see HEAD_READ_FAILURE_LIMIT). */
  private headReadFailures: { seq: number; count: number } | null = null;

  private readonly counters = {
    appended: 0,
    acked: 0,
    droppedHeartbeat: 0,
    lifecycleOverLimit: 0,
    quarantined: 0,
    rejected: 0,
    missing: 0,
    diskErrors: 0,
  };
  private diskError: string | null = null;

  private constructor(options: SpoolOptions) {
    this.dir = options.dir;
    this.logger = options.logger.child({ component: 'spool' });
    this.maxBytes = options.maxBytes ?? DEFAULT_MAX_BYTES;
    this.maxRecords = options.maxRecords ?? DEFAULT_MAX_RECORDS;
    this.diskRetryMs = options.diskRetryMs ?? DEFAULT_DISK_RETRY_MS;
    this.limiter = new LogLimiter(options.errorLogIntervalMs ?? 60_000);
    if (!(this.maxBytes > 0) || !(this.maxRecords > 0))
      throw new RangeError('maxBytes and maxRecords must be > 0');
  }

  /**
   * Creates the directory if needed and loads what a previous run left, in order. Corrupt,
   * partial (`.tmp`) and unknown files are moved to `quarantine/` with a warning. Throws only when
   * the directory itself cannot be created or listed (a configuration error at start-up).
   */
  static async open(options: SpoolOptions): Promise<Spool> {
    const spool = new Spool(options);
    await spool.load();
    return spool;
  }

  get depth(): number {
    return this.index.size;
  }

  get bytes(): number {
    return this.totalBytes;
  }

  /**
   * Records held only in memory after a disk error (same as `stats().memoryHeld`, without
   * building the stats object). When it is 0, every record ever passed to `append` is durable
   * on disk, acknowledged, or dropped by the bounds: nothing is lost if the process dies.
   */
  get memoryHeld(): number {
    return this.memoryHeldCount;
  }

  /** Calls `listener` after every append that admitted records (the delivery loop wakes on it). */
  subscribe(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /**
   * Appends records in order. Resolves `true` once they are durable (files and directory
   * fsynced). After a disk error, logged loudly, it resolves `false`: some of them are held only
   * in memory (`memoryHeld`, `stats().degraded`); those are still delivered and written to disk
   * as soon as the disk works again (next append, `retryDisk`, or the retry timer), after which
   * `memoryHeld` drops to 0. A caller that must not lose them keeps its own copy until then.
   * A heartbeat dropped by the bounds (below) does not make it `false`: it is gone by policy, not
   * held. An empty `records` resolves `true`.
   *
   * Bounds: while the spool is over `maxRecords`/`maxBytes`, the oldest heartbeat is dropped
   * (logged and counted); a new heartbeat is dropped itself when no older one is left. A
   * lifecycle record is never dropped: with only lifecycle records left it is admitted over the
   * bound (logged at error level, counted in `lifecycleOverLimit`) and written to disk like any
   * other, because a lifecycle record held only in memory would not survive the very reboot it
   * announces.
   */
  append(records: readonly ShipperRecord[]): Promise<boolean> {
    if (this.closed) return Promise.reject(new Error('spool is closed'));
    if (records.length === 0) return Promise.resolve(true);
    return this.locked(async () => {
      const admitted: IndexEntry[] = [];
      const victims: IndexEntry[] = [];
      for (const record of records) {
        const data = encodeRecord(record);
        const entry: IndexEntry = {
          seq: this.nextSeq++,
          recordType: record.recordType,
          bytes: data.length,
          file: null,
          data,
          record,
        };
        if (!this.makeRoom(entry, victims)) continue;
        this.insert(entry);
        admitted.push(entry);
      }
      // Victims' files go after the new files are durable (losing a heartbeat is fine; losing
      // the new records is not), and share their directory fsync.
      // Records still held in memory from an earlier disk error are retried first, in order.
      // (An admitted heartbeat may already have been dropped again by a later record of this
      // call: only the admitted entries still queued count against `memoryHeldCount`.)
      const queued = admitted.filter((e) => this.index.has(e.seq));
      const toWrite =
        this.memoryHeldCount > queued.length
          ? [...this.index.values()].filter((e) => e.file === null)
          : queued;
      await this.persist(toWrite, victims);
      this.counters.appended += admitted.length;
      if (admitted.length > 0) for (const listener of this.listeners) listener();
      return queued.every((e) => e.file !== null || !this.index.has(e.seq));
    });
  }

  /**
   * Up to `max` oldest records, in order, without removing them. Files that turn out corrupt
   * are quarantined and skipped. On an unexpected read error (EIO, EACCES, EISDIR…) it stops at
   * that record, and rejects when that record is the head (the caller retries later); after
   * `HEAD_READ_FAILURE_LIMIT` consecutive failed reads of the same head record, that file is
   * quarantined and the records behind it are handed out.
   */
  peek(max: number): Promise<SpoolEntry[]> {
    return this.locked(async () => {
      const candidates: IndexEntry[] = [];
      for (const entry of this.index.values()) {
        if (candidates.length >= max) break;
        candidates.push(entry);
      }
      const onDisk = candidates.filter((e) => e.record === null);
      const data = await readFilesYielding(onDisk.map((e) => join(this.dir, e.file as string)));
      const byEntry = new Map(onDisk.map((e, i) => [e, data[i]]));
      const loaded = candidates.map((entry) => {
        if (entry.record) return { entry, record: entry.record, error: null as unknown };
        const got = byEntry.get(entry) as Buffer | Error;
        if (got instanceof Error) return { entry, record: null, error: got };
        try {
          return { entry, record: decodeRecord(got, entry.recordType), error: null as unknown };
        } catch (error) {
          return { entry, record: null, error };
        }
      });
      const out: SpoolEntry[] = [];
      // Boxed so that an unreadable entry's error is rethrown as is, whatever its type.
      let readError: { error: unknown } | null = null;
      for (const { entry, record, error } of loaded) {
        if (record) {
          if (readError === null) {
            out.push({ seq: entry.seq, recordType: entry.recordType, bytes: entry.bytes, record });
          }
          continue;
        }
        if (error instanceof CorruptRecordError) {
          this.remove(entry);
          await this.quarantine(entry.file as string, error.message);
        } else if (errCode(error) === 'ENOENT' || errCode(error) === 'ENOTDIR') {
          this.remove(entry);
          this.counters.missing += 1;
          this.logger.error(
            { file: entry.file },
            'spool file vanished from the spool directory; record lost',
          );
        } else if (readError === null) {
          if (out.length === 0 && this.headReadFailed(entry)) {
            // The same head failed too often in a row: set it aside, go on with the next.
            this.remove(entry);
            await this.quarantine(
              entry.file as string,
              `unreadable (${errCode(error)}) ${HEAD_READ_FAILURE_LIMIT} times in a row`,
              entry.seq,
            );
            continue;
          }
          // Keep order: nothing after an unreadable entry is handed out.
          readError = { error };
        }
      }
      if (out.length > 0) this.headReadFailures = null; // the head was read: the count restarts
      if (readError !== null && out.length === 0) throw readError.error;
      return out;
    });
  }

  /**
   * Removes records the sink confirmed: they leave the queue at once (a `peek` called after `ack`
   * no longer sees them), then their files are unlinked, with one directory fsync, outside the
   * lock so that appends do not wait for it. Resolves when the files are gone.
   */
  async ack(entries: readonly SpoolEntry[]): Promise<void> {
    if (entries.length === 0) return;
    const files = await this.locked(() => {
      const out: string[] = [];
      for (const e of entries) {
        const entry = this.index.get(e.seq);
        if (!entry) continue; // already dropped or acked
        this.remove(entry);
        this.counters.acked += 1;
        if (entry.file) out.push(entry.file);
      }
      return out;
    });
    await this.unlinkAll(files, 'acknowledged record');
  }

  /**
   * Moves records the sink can never accept (a single record over the sink's size limit) out of
   * the queue into `rejected/`, so they neither wedge the queue nor vanish. Logged at error level.
   */
  reject(entries: readonly SpoolEntry[], reason: string): Promise<void> {
    if (entries.length === 0) return Promise.resolve();
    return this.locked(async () => {
      const rejectedDir = join(this.dir, REJECTED_DIR);
      for (const e of entries) {
        const entry = this.index.get(e.seq);
        if (!entry) continue;
        this.remove(entry);
        this.counters.rejected += 1;
        const target = join(
          rejectedDir,
          fileName(entry.seq, entry.recordType).replace(RECORD_SUFFIX, `.${Date.now()}${RECORD_SUFFIX}`),
        );
        try {
          await mkdir(rejectedDir, { recursive: true });
          if (entry.file) await rename(join(this.dir, entry.file), target);
          else await writeFile(target, entry.data ?? encodeRecord(e.record));
        } catch (err) {
          this.logger.error({ err, seq: entry.seq }, 'could not move a rejected record to rejected/');
        }
        this.logger.error(
          {
            recordId: e.record.recordId,
            recordType: entry.recordType,
            bytes: entry.bytes,
            reason,
            dir: rejectedDir,
          },
          'record rejected by the sink for good; moved to the rejected/ directory, not delivered',
        );
      }
    });
  }

  stats(): SpoolStats {
    return {
      depth: this.index.size,
      bytes: this.totalBytes,
      lifecycle: this.index.size - this.heartbeatIndex.size,
      heartbeats: this.heartbeatIndex.size,
      memoryHeld: this.memoryHeldCount,
      appended: this.counters.appended,
      acked: this.counters.acked,
      dropped: { heartbeat: this.counters.droppedHeartbeat, lifecycle: 0 },
      lifecycleOverLimit: this.counters.lifecycleOverLimit,
      quarantined: this.counters.quarantined,
      rejected: this.counters.rejected,
      missing: this.counters.missing,
      diskErrors: this.counters.diskErrors,
      degraded: this.diskError !== null,
      lastDiskError: this.diskError,
    };
  }

  /**
   * Tries to write memory-held records to disk now (also done on every append and by a timer
   * while degraded). Resolves true when nothing is left only in memory.
   */
  retryDisk(): Promise<boolean> {
    return this.locked(async () => {
      if (this.memoryHeldCount === 0) return true;
      const held = [...this.index.values()].filter((e) => e.file === null);
      return this.persist(held, []);
    });
  }

  /** Stops the disk retry timer and waits for pending operations. Memory-held records are logged. */
  async close(): Promise<void> {
    this.closed = true;
    this.clearRetryTimer();
    await this.locked(() => undefined);
    if (this.memoryHeldCount > 0) {
      this.logger.error(
        { memoryHeld: this.memoryHeldCount, lastDiskError: this.diskError },
        'spool closed with records held only in memory (disk unusable): they are lost with this process',
      );
    }
  }

  // ---- internals ----

  /** Runs `fn` after every operation queued before it (a thrown error rejects the returned promise). */
  private locked<T>(fn: () => T | Promise<T>): Promise<T> {
    const run = this.chain.then(fn, fn);
    this.chain = run.catch(() => undefined);
    return run;
  }

  private insert(entry: IndexEntry): void {
    this.index.set(entry.seq, entry);
    if (entry.recordType === 'heartbeat') this.heartbeatIndex.set(entry.seq, entry);
    this.totalBytes += entry.bytes;
    if (entry.file === null) this.memoryHeldCount += 1;
  }

  private remove(entry: IndexEntry): void {
    if (!this.index.delete(entry.seq)) return;
    this.heartbeatIndex.delete(entry.seq);
    this.totalBytes -= entry.bytes;
    if (entry.file === null) this.memoryHeldCount -= 1;
  }

  private full(extraBytes: number): boolean {
    return this.index.size + 1 > this.maxRecords || this.totalBytes + extraBytes > this.maxBytes;
  }

  /** Applies the drop policy for `entry`; returns false when `entry` itself is dropped. */
  private makeRoom(entry: IndexEntry, victims: IndexEntry[]): boolean {
    while (this.full(entry.bytes)) {
      const oldest = this.heartbeatIndex.values().next();
      if (!oldest.done) {
        const victim = oldest.value;
        this.remove(victim);
        this.counters.droppedHeartbeat += 1;
        if (victim.file) victims.push(victim);
        this.logDrop(victim.seq, 'oldest heartbeat dropped: spool full');
        continue;
      }
      if (entry.recordType === 'heartbeat') {
        this.counters.droppedHeartbeat += 1;
        this.logDrop(entry.seq, 'new heartbeat dropped: spool full of lifecycle records');
        return false;
      }
      this.counters.lifecycleOverLimit += 1;
      this.logger.error(
        {
          recordId: entry.record?.recordId,
          depth: this.index.size,
          bytes: this.totalBytes,
          maxRecords: this.maxRecords,
          maxBytes: this.maxBytes,
          lifecycleOverLimit: this.counters.lifecycleOverLimit,
        },
        'spool full of lifecycle records: admitting this lifecycle record over the bound (never dropped); is the sink down?',
      );
      return true;
    }
    return true;
  }

  private logDrop(seq: number, msg: string): void {
    const suppressed = this.limiter.take('drop');
    if (suppressed === null) return;
    this.logger.warn(
      {
        seq,
        droppedHeartbeats: this.counters.droppedHeartbeat,
        suppressed,
        depth: this.index.size,
        bytes: this.totalBytes,
        maxRecords: this.maxRecords,
        maxBytes: this.maxBytes,
      },
      msg,
    );
  }

  /**
   * Writes `entries` (some may already be on disk: skipped) atomically, unlinks `victims`, and
   * fsyncs the directory once. On failure the entries stay in memory and the spool is degraded.
   */
  private async persist(entries: readonly IndexEntry[], victims: readonly IndexEntry[]): Promise<boolean> {
    const pending = entries.filter((e) => e.file === null && this.index.has(e.seq));
    if (pending.length > 0) {
      const written: string[] = [];
      try {
        if (this.diskError !== null) await mkdir(this.dir, { recursive: true });
        await mapLimit(pending, IO_CONCURRENCY, async (entry) => {
          const tmp = join(this.dir, fileName(entry.seq, entry.recordType) + TEMP_SUFFIX);
          const handle = await open(tmp, 'w', 0o600);
          written.push(tmp);
          try {
            await handle.writeFile(entry.data as Buffer);
            await handle.sync();
          } finally {
            await handle.close();
          }
        });
        // Renames in order, so that after a crash no later record exists without the earlier ones.
        for (const entry of pending) {
          const name = fileName(entry.seq, entry.recordType);
          await rename(join(this.dir, name + TEMP_SUFFIX), join(this.dir, name));
          written.push(join(this.dir, name));
        }
        await this.unlinkVictims(victims);
        await this.fsyncDir();
      } catch (err) {
        await Promise.all(written.map((p) => unlink(p).catch(() => undefined)));
        await this.unlinkVictims(victims).catch(() => undefined);
        this.enterDegraded(err);
        return false;
      }
      for (const entry of pending) {
        entry.file = fileName(entry.seq, entry.recordType);
        entry.data = null;
        entry.record = null;
        this.memoryHeldCount -= 1;
      }
    } else if (victims.length > 0) {
      try {
        await this.unlinkVictims(victims);
        await this.fsyncDir();
      } catch (err) {
        this.logLimited('victim-unlink', { err }, 'could not remove dropped heartbeat files');
      }
    }
    if (this.diskError !== null && this.memoryHeldCount === 0) this.leaveDegraded();
    return pending.every((e) => e.file !== null || !this.index.has(e.seq));
  }

  private async unlinkVictims(victims: readonly IndexEntry[]): Promise<void> {
    await Promise.all(
      victims.map((v) =>
        unlink(join(this.dir, v.file as string)).catch((err: unknown) => {
          if (errCode(err) !== 'ENOENT') throw err;
        }),
      ),
    );
  }

  private async unlinkAll(files: readonly string[], what: string): Promise<void> {
    if (files.length === 0) return;
    let failures = 0;
    let firstError: unknown = null;
    await mapLimit(files, IO_CONCURRENCY, async (f) => {
      try {
        await unlink(join(this.dir, f));
      } catch (err) {
        if (errCode(err) === 'ENOENT') return;
        failures += 1;
        firstError ??= err;
      }
    });
    try {
      await this.fsyncDir();
    } catch (err) {
      failures += 1;
      firstError ??= err;
    }
    if (failures > 0) {
      this.counters.diskErrors += 1;
      this.logLimited(
        'unlink',
        { err: firstError, failures },
        `could not remove ${what} files: they will be delivered again after a restart (duplicates)`,
      );
    }
  }

  private async fsyncDir(): Promise<void> {
    const handle = await open(this.dir, 'r');
    try {
      await handle.sync();
    } finally {
      await handle.close();
    }
  }

  private enterDegraded(err: unknown): void {
    this.counters.diskErrors += 1;
    const code = errCode(err);
    const first = this.diskError === null;
    this.diskError = code;
    const fields = {
      err,
      code,
      dir: this.dir,
      memoryHeld: this.memoryHeldCount,
      diskErrors: this.counters.diskErrors,
    };
    if (first) {
      this.limiter.reset('disk');
      this.limiter.take('disk');
      this.logger.error(
        fields,
        'SPOOL DISK ERROR: records are now held in memory only (still delivered, but lost if the process dies); retrying the disk',
      );
    } else {
      this.logLimited('disk', fields, 'spool disk still failing; records held in memory');
    }
    this.scheduleRetry();
  }

  private leaveDegraded(): void {
    this.logger.warn(
      { dir: this.dir, previousError: this.diskError },
      'spool disk works again; all records are durable',
    );
    this.diskError = null;
    this.clearRetryTimer();
  }

  private scheduleRetry(): void {
    if (this.retryTimer || this.closed) return;
    this.retryTimer = setInterval(() => {
      if (this.memoryHeldCount === 0) {
        this.clearRetryTimer();
        return;
      }
      void this.retryDisk().catch(() => undefined);
    }, this.diskRetryMs);
    this.retryTimer.unref();
  }

  private clearRetryTimer(): void {
    if (this.retryTimer) clearInterval(this.retryTimer);
    this.retryTimer = null;
  }

  private logLimited(key: string, fields: Record<string, unknown>, msg: string): void {
    const suppressed = this.limiter.take(key);
    if (suppressed === null) return;
    this.logger.error({ ...fields, suppressed }, msg);
  }

  /**
   * Counts a failed read of `entry` at the head of the queue; true when it has now failed
   * `HEAD_READ_FAILURE_LIMIT` times in a row (the count then restarts).
   */
  private headReadFailed(entry: IndexEntry): boolean {
    const seen = this.headReadFailures;
    const count = seen?.seq === entry.seq ? seen.count + 1 : 1;
    if (count >= HEAD_READ_FAILURE_LIMIT) {
      this.headReadFailures = null;
      return true;
    }
    this.headReadFailures = { seq: entry.seq, count };
    return false;
  }

  private async quarantine(name: string, reason: string, seq?: number): Promise<void> {
    this.counters.quarantined += 1;
    const qdir = join(this.dir, QUARANTINE_DIR);
    const target = join(qdir, `${name}.${Date.now()}`);
    const where = seq === undefined ? { file: name } : { file: name, seq };
    try {
      await mkdir(qdir, { recursive: true });
      await rename(join(this.dir, name), target);
      this.logger.warn({ ...where, reason, movedTo: target }, 'corrupt or partial spool file quarantined');
    } catch (err) {
      this.logger.error({ err, ...where, reason }, 'corrupt spool file could not be quarantined; skipped');
    }
  }

  private async load(): Promise<void> {
    await mkdir(this.dir, { recursive: true });
    const dirents: Dirent[] = await readdir(this.dir, { withFileTypes: true });
    const candidates: { name: string; seq: number; recordType: RecordType }[] = [];
    const strays: { name: string; reason: string }[] = [];
    for (const d of dirents) {
      if (d.isDirectory()) continue; // quarantine/, rejected/, or someone else's: left alone
      const parsed = parseFileName(d.name);
      if (parsed && d.isFile()) candidates.push({ name: d.name, ...parsed });
      else if (d.name.endsWith(TEMP_SUFFIX))
        strays.push({ name: d.name, reason: 'partial write (temp file)' });
      else strays.push({ name: d.name, reason: 'not a spool file' });
    }
    candidates.sort((a, b) => a.seq - b.seq);
    const data = await readFilesYielding(candidates.map((c) => join(this.dir, c.name)));
    const loaded = candidates.map((c, i) => {
      const got = data[i] as Buffer | Error;
      if (got instanceof Error) {
        // Gone since readdir: nothing to load. Unreadable: set aside rather than refuse to start.
        if (errCode(got) === 'ENOENT') return { c, bytes: 0, reason: null, skip: true };
        return { c, bytes: 0, reason: `unreadable (${errCode(got)})`, skip: false };
      }
      try {
        decodeRecord(got, c.recordType);
        return { c, bytes: got.length, reason: null, skip: false };
      } catch (err) {
        if (err instanceof CorruptRecordError) return { c, bytes: 0, reason: err.message, skip: false };
        throw err;
      }
    });
    for (const { c, bytes, reason, skip } of loaded) {
      if (skip) continue;
      if (reason !== null) {
        strays.push({ name: c.name, reason });
        continue;
      }
      this.insert({ seq: c.seq, recordType: c.recordType, bytes, file: c.name, data: null, record: null });
      this.nextSeq = Math.max(this.nextSeq, c.seq + 1);
    }
    for (const s of strays) await this.quarantine(s.name, s.reason);
    if (this.index.size > 0 || strays.length > 0) {
      this.logger.info(
        {
          dir: this.dir,
          depth: this.index.size,
          bytes: this.totalBytes,
          lifecycle: this.index.size - this.heartbeatIndex.size,
          quarantined: strays.length,
        },
        'spool loaded; replaying in order',
      );
    }
  }
}
