import { mkdir, readdir, rm, unlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { ShipperRecord } from '../../src/lifecycle/record.js';
import { DeliveryLoop, type DeliveryOptions } from '../../src/pipeline/delivery.js';
import { SinkError } from '../../src/sinks/sink.js';
import { Spool } from '../../src/spool/spool.js';
import {
  captureLogger,
  expectNoLifecycleLoss,
  hangUntilAborted,
  heartbeat,
  lifecycle,
  TestSink,
  tempDir,
  until,
} from '../spool/helpers.js';

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()?.();
});

async function setup(sink: TestSink, opts: Partial<DeliveryOptions> = {}, spoolDir?: string) {
  let dir = spoolDir;
  if (!dir) {
    const t = await tempDir();
    cleanups.push(t.cleanup);
    dir = t.dir;
  }
  const { logger, lines } = captureLogger();
  const spool = await Spool.open({ dir, logger });
  cleanups.push(() => spool.close());
  const loop = new DeliveryLoop({ spool, sink, logger, minBackoffMs: 2, maxBackoffMs: 20, ...opts });
  cleanups.push(() => loop.stop({ flushTimeoutMs: 0 }));
  return { dir, spool, loop, logger, lines };
}

function mixed(n: number): ShipperRecord[] {
  return Array.from({ length: n }, (_, i) => (i % 3 === 2 ? heartbeat() : lifecycle()));
}

describe('DeliveryLoop', () => {
  it('delivers the replayed backlog first, then new appends as they come, in order, and empties the spool', async () => {
    const { dir: seedDir, cleanup } = await tempDir();
    cleanups.push(cleanup);
    const { logger } = captureLogger();
    const seed = await Spool.open({ dir: seedDir, logger });
    const backlog = mixed(30);
    await seed.append(backlog);
    // (no close: as after a crash)

    const sink = new TestSink();
    const { spool, loop } = await setup(sink, { maxBatch: 8 }, seedDir);
    loop.start();
    await until(() => loop.stats().recordsSent === 30, 10_000, 'backlog drained');
    const live = mixed(10);
    for (const r of live) await spool.append([r]); // each append wakes the loop
    await until(() => loop.stats().recordsSent === 40, 10_000, 'live records delivered');
    expect(sink.records.map((r) => r.recordId)).toEqual([...backlog, ...live].map((r) => r.recordId));
    expect(Math.max(...sink.batchSizes)).toBeLessThanOrEqual(8);
    expect(spool.depth).toBe(0);
    await loop.stop({ flushTimeoutMs: 5_000 }); // waits for the last batch's unlinks
    expect((await readdir(seedDir)).filter((n) => n.endsWith('.rec'))).toEqual([]);
    expect(loop.stats()).toMatchObject({ recordsSent: 40, sendFailures: 0, spoolDepth: 0 });
    expect(loop.stats().lastSuccessAt).toBeTypeOf('number');
  });

  it('retries with backoff until the sink recovers, keeping the records meanwhile', async () => {
    const sink = new TestSink((_batch, _signal, call) => {
      if (call <= 4) throw new SinkError(`service busy (${call})`, { retryable: true });
    });
    const { spool, loop, lines } = await setup(sink, { errorLogIntervalMs: 60_000 });
    const recs = mixed(5);
    await spool.append(recs);
    loop.start();
    await until(() => loop.stats().recordsSent === 5, 10_000, 'ack');
    expectNoLifecycleLoss(recs, sink);
    expect(loop.stats()).toMatchObject({
      sendFailures: 4,
      retries: 4,
      consecutiveFailures: 0,
      recordsSent: 5,
    });
    // Rate limited: one warning for four failures, then one line on recovery.
    expect(lines.filter((l) => l.level === 'warn' && /send failed/.test(l.msg))).toHaveLength(1);
    expect(lines.some((l) => l.level === 'info' && /recovered/.test(l.msg) && l.failedAttempts === 4)).toBe(
      true,
    );
  });

  it('backs off exponentially between attempts, up to the cap', async () => {
    const at: number[] = [];
    const sink = new TestSink((_b, _s, call) => {
      at.push(performance.now());
      if (call <= 6) throw new SinkError('down', { retryable: true });
    });
    const { spool, loop } = await setup(sink, { minBackoffMs: 20, maxBackoffMs: 100 });
    await spool.append(mixed(2));
    loop.start();
    await until(() => loop.stats().recordsSent === 2, 20_000, 'delivery');
    const gaps = at.slice(1).map((t, i) => t - (at[i] as number));
    // Lower bounds only (timers never fire early; a loaded machine only makes gaps longer):
    // 20·2^n·[1, 2), capped at 80 + up to 20 of jitter.
    const floor = [20, 40, 80, 80, 80, 80];
    gaps.forEach((g, i) => {
      expect(g).toBeGreaterThanOrEqual((floor[i] as number) - 2);
    });
    expect(gaps).toHaveLength(6);
  });

  it('keeps retrying non-retryable errors with a clear, rate-limited error log, and keeps the records', async () => {
    let broken = true;
    const sink = new TestSink(() => {
      if (broken) throw new SinkError('Unauthorized: bad credentials', { retryable: false });
    });
    const { spool, loop, lines } = await setup(sink, { errorLogIntervalMs: 60_000 });
    const recs = mixed(6);
    await spool.append(recs);
    loop.start();
    await until(() => loop.stats().nonRetryableFailures >= 5, 10_000, 'several failures');
    expect(spool.depth).toBe(6);
    const errors = lines.filter((l) => l.level === 'error' && /non-retryable/.test(l.msg));
    expect(errors).toHaveLength(1);
    expect(errors[0]).toMatchObject({ retryable: false, err: { message: 'Unauthorized: bad credentials' } });
    broken = false; // the operator fixed the credentials
    await until(() => loop.stats().recordsSent === 6, 10_000, 'delivery after fix');
    expectNoLifecycleLoss(recs, sink);
  });

  it('treats an unexpected error (a bug in a sink, a TypeError) as retryable instead of dying', async () => {
    const sink = new TestSink((_b, _s, call) => {
      if (call === 1) throw new TypeError('cannot read properties of undefined');
    });
    const { spool, loop } = await setup(sink);
    const recs = mixed(3);
    await spool.append(recs);
    loop.start();
    await until(() => loop.stats().recordsSent === 3, 10_000, 'delivery');
    expectNoLifecycleLoss(recs, sink);
    expect(loop.stats().sendFailures).toBe(1);
  });

  it('halves a batch the sink calls too large, until it fits, and grows it back afterwards', async () => {
    const sink = new TestSink((batch) => {
      if (batch.length > 3)
        throw new SinkError('batch exceeds the maximum size', { retryable: false, tooLarge: true });
    });
    const { spool, loop } = await setup(sink, { maxBatch: 16 });
    const recs = mixed(40);
    await spool.append(recs);
    loop.start();
    await until(() => loop.stats().recordsSent === 40, 10_000, 'delivery');
    expect(sink.records.map((r) => r.recordId)).toEqual(recs.map((r) => r.recordId));
    expect(Math.max(...sink.batchSizes)).toBeLessThanOrEqual(3);
    expect(loop.stats().splits).toBeGreaterThanOrEqual(3);
    // Too-large retries are immediate splits, not backoff retries.
    expect(loop.stats().retries).toBe(0);
  });

  it('moves a single record larger than the sink accepts to rejected/ so it does not wedge the queue', async () => {
    const sink = new TestSink((batch) => {
      if (batch.some((r) => r.recordId === 'huge')) {
        throw new SinkError('message too large', { retryable: false, tooLarge: true });
      }
    });
    const { dir, spool, loop, lines } = await setup(sink, { maxBatch: 4 });
    const before = mixed(3);
    const huge = lifecycle('huge', { description: 'x'.repeat(10_000) });
    const after = mixed(3);
    await spool.append([...before, huge, ...after]);
    loop.start();
    await until(() => loop.stats().recordsSent === 6, 10_000, 'delivery');
    expect(sink.records.map((r) => r.recordId)).toEqual([...before, ...after].map((r) => r.recordId));
    expect(loop.stats().rejected).toBe(1);
    expect(spool.stats().rejected).toBe(1);
    expect(await readdir(join(dir, 'rejected'))).toHaveLength(1);
    expect(lines.some((l) => l.level === 'error' && l.recordId === 'huge' && /rejected/.test(l.msg))).toBe(
      true,
    );
  });

  it('stop() flushes what it can within the timeout and resolves', async () => {
    const sink = new TestSink(() => new Promise((r) => setTimeout(r, 2)));
    const { spool, loop } = await setup(sink, { maxBatch: 5 });
    loop.start();
    const recs = mixed(50);
    await spool.append(recs);
    await loop.stop({ flushTimeoutMs: 20_000 });
    expect(spool.depth).toBe(0);
    expectNoLifecycleLoss(recs, sink);
    expect(loop.stats().running).toBe(false);
  });

  it('stop() with a hung sink aborts the send after the flush timeout and leaves the records in the spool', async () => {
    let sawAbort = false;
    const sink = new TestSink(async (_b, signal) => {
      signal?.addEventListener('abort', () => {
        sawAbort = true;
      });
      await hangUntilAborted(signal);
    });
    const { dir, spool, loop, logger } = await setup(sink);
    const recs = mixed(4);
    await spool.append(recs);
    loop.start();
    await until(() => sink.calls === 1, 10_000, 'send started');
    await loop.stop({ flushTimeoutMs: 50 });
    expect(sawAbort).toBe(true);
    expect(spool.depth).toBe(4);
    expect(sink.lines).toEqual([]);

    // Next start (new process) delivers them.
    const sink2 = new TestSink();
    const spool2 = await Spool.open({ dir, logger });
    cleanups.push(() => spool2.close());
    const loop2 = new DeliveryLoop({ spool: spool2, sink: sink2, logger, minBackoffMs: 2, maxBackoffMs: 20 });
    loop2.start();
    await loop2.stop({ flushTimeoutMs: 10_000 });
    expectNoLifecycleLoss(recs, sink2);
  });

  it('a send that ignores its AbortSignal still cannot hold stop() or the loop hostage', async () => {
    const sink = new TestSink((_b, _s, call) => {
      if (call === 1) return new Promise<void>(() => undefined); // never settles, ignores the signal
    });
    const { spool, loop } = await setup(sink, { sendTimeoutMs: 30 });
    const recs = mixed(3);
    await spool.append(recs);
    loop.start();
    // The send timeout turns the hang into a retryable failure; the retry delivers.
    await until(() => loop.stats().recordsSent === 3, 10_000, 'delivery after send timeout');
    expectNoLifecycleLoss(recs, sink);
    expect(loop.stats().sendFailures).toBe(1);
    expect(loop.stats().lastError).toMatch(/timed out/);
  });

  it('an external AbortSignal stops the loop at once, leaving the records', async () => {
    const ac = new AbortController();
    const sink = new TestSink(() => {
      throw new SinkError('down', { retryable: true });
    });
    const { spool, loop } = await setup(sink, {
      signal: ac.signal,
      minBackoffMs: 10_000,
      maxBackoffMs: 10_000,
    });
    await spool.append(mixed(2));
    loop.start();
    await until(() => sink.calls === 1, 10_000, 'first attempt');
    ac.abort();
    await loop.stop({ flushTimeoutMs: 60_000 }); // returns promptly: already aborted, no 10 s backoff wait
    expect(loop.stats().running).toBe(false);
    expect(spool.depth).toBe(2);
  });

  it('delivers records the spool holds in memory after a disk error', async () => {
    const { dir: base, cleanup } = await tempDir();
    cleanups.push(cleanup);
    const dir = join(base, 'spool');
    const sink = new TestSink();
    const { spool, loop } = await setup(sink, {}, dir);
    await rm(dir, { recursive: true });
    await writeFile(dir, 'x');
    const recs = mixed(5);
    await spool.append(recs);
    expect(spool.stats().memoryHeld).toBe(5);
    loop.start();
    await until(() => loop.stats().recordsSent === 5, 10_000, 'delivery from memory');
    expectNoLifecycleLoss(recs, sink);
    expect(loop.stats().memoryHeld).toBe(0);
    await unlink(dir);
  });
});

describe('at least once across crashes', () => {
  it('never loses a lifecycle record through failures, drops, restarts and a hard stop; duplicates only of the same record', async () => {
    const { dir, cleanup } = await tempDir();
    cleanups.push(cleanup);
    const { logger } = captureLogger();
    const all: ShipperRecord[] = [];
    const delivered = new TestSink();
    for (let round = 0; round < 4; round++) {
      const flaky = new TestSink(async (batch, signal, call) => {
        if (call % 3 === 0) throw new SinkError('transient', { retryable: true });
        if (call % 7 === 0 && batch.length > 1) {
          throw new SinkError('too large', { retryable: false, tooLarge: true });
        }
        if (call % 11 === 0) await hangUntilAborted(signal);
        // Confirmed: record it in the shared ledger as the real sink would have.
        for (const r of batch) delivered.lines.push(JSON.stringify(r));
      });
      const spool = await Spool.open({ dir, logger, maxRecords: 40 });
      const loop = new DeliveryLoop({
        spool,
        sink: flaky,
        logger,
        minBackoffMs: 1,
        maxBackoffMs: 5,
        sendTimeoutMs: 50,
        maxBatch: 6,
      });
      loop.start();
      for (let i = 0; i < 25; i++) {
        const recs = mixed(1 + (i % 3));
        await spool.append(recs);
        all.push(...recs);
        if (i % 5 === 0) await new Promise((r) => setTimeout(r, 1));
      }
      // Crash-like stop: no flush at all; whatever is in flight is abandoned un-acked.
      await loop.stop({ flushTimeoutMs: 0 });
      await spool.close();
    }
    const spool = await Spool.open({ dir, logger, maxRecords: 40 });
    const finalSink = new TestSink((batch) => {
      for (const r of batch) delivered.lines.push(JSON.stringify(r));
    });
    const finalLoop = new DeliveryLoop({ spool, sink: finalSink, logger, minBackoffMs: 1, maxBackoffMs: 5 });
    finalLoop.start();
    await finalLoop.stop({ flushTimeoutMs: 20_000 });
    expect(spool.depth).toBe(0);
    await spool.close();
    expectNoLifecycleLoss(all, delivered);
    // Heartbeats may be dropped by the bound; they are the only thing that may be missing.
    const seen = new Set(delivered.records.map((r) => r.recordId));
    const missing = all.filter((r) => !seen.has(r.recordId));
    expect(missing.every((r) => r.recordType === 'heartbeat')).toBe(true);
  });
});

describe('DeliveryLoop: review fixes', () => {
  it('rate-limits non-retryable errors by their code, not their per-request message', async () => {
    let call = 0;
    const sink = new TestSink(() => {
      call += 1;
      // Event Hubs style: same code, a new TrackingId and timestamp in every message.
      throw new SinkError(
        `Event Hubs send failed (UnauthorizedError): Unauthorized access. TrackingId:${call}-abc, TimeStamp:2026-01-01T00:00:0${call % 10}`,
        { retryable: false, code: 'UnauthorizedError' },
      );
    });
    const { spool, loop, lines } = await setup(sink, { errorLogIntervalMs: 60_000 });
    await spool.append(mixed(2));
    loop.start();
    await until(() => loop.stats().nonRetryableFailures >= 2, 10_000, 'two failures');
    await loop.stop({ flushTimeoutMs: 0 });
    const errors = lines.filter((l) => l.level === 'error' && /non-retryable/.test(l.msg));
    expect(errors).toHaveLength(1);
    expect(errors[0]).toMatchObject({ retryable: false, err: { code: 'UnauthorizedError' } });
    expect(spool.depth).toBe(2);
  });

  it('without a code, non-retryable errors are keyed on the error name (different messages: one line)', async () => {
    let call = 0;
    const sink = new TestSink(() => {
      call += 1;
      throw new SinkError(`hub missing, request ${call}`, { retryable: false });
    });
    const { spool, loop, lines } = await setup(sink, { errorLogIntervalMs: 60_000 });
    await spool.append(mixed(1));
    loop.start();
    await until(() => loop.stats().nonRetryableFailures >= 3, 10_000, 'three failures');
    await loop.stop({ flushTimeoutMs: 0 });
    expect(lines.filter((l) => l.level === 'error' && /non-retryable/.test(l.msg))).toHaveLength(1);
  });

  it('is not wedged by an unreadable head record (EISDIR): it is quarantined and the records behind it are delivered', async () => {
    const sink = new TestSink();
    const { dir, spool, loop, lines } = await setup(sink, { maxBatch: 8 });
    const bad = lifecycle('unreadable');
    const behind = mixed(5);
    await spool.append([bad, ...behind]);
    // Replace the head's file with a directory of the same name: reading it fails with EISDIR,
    // honestly, even as root.
    const head = (await readdir(dir)).filter((n) => n.endsWith('.rec')).sort()[0] as string;
    await unlink(join(dir, head));
    await mkdir(join(dir, head));

    loop.start();
    await until(() => loop.stats().recordsSent === 5, 10_000, 'records behind the bad head delivered');
    expect(sink.records.map((r) => r.recordId)).toEqual(behind.map((r) => r.recordId));
    expect(spool.stats()).toMatchObject({ depth: 0, quarantined: 1 });
    expect(loop.stats().sendFailures).toBeGreaterThanOrEqual(4);
    expect(await readdir(join(dir, 'quarantine'))).toEqual([
      expect.stringMatching(new RegExp(`^${head}\\.`)),
    ]);
    const warn = lines.find((l) => l.level === 'warn' && /quarantined/.test(l.msg));
    expect(warn).toMatchObject({ file: head, seq: 1, reason: expect.stringMatching(/EISDIR/) });
  });
});
