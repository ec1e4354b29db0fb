/**
 * The delivery loop: moves records from the spool to the sink, in order, at least once.
 *
 * - It takes up to `maxBatch` of the oldest spooled records, sends them, and acks them (removes
 *   them from the spool) only after `sink.send` resolved. The 1 Hz poll never waits on it: the
 *   poll only waits for `spool.append` (durable), and the spool wakes the loop.
 * - A failed send is retried forever with capped, jittered exponential backoff (p-retry:
 *   `minBackoffMs` × 2^n × random[1, 2); once that reaches the cap, a random delay in
 *   [0.8, 1] × `maxBackoffMs`). Each retry re-reads the
 *   head of the spool, so records appended meanwhile join the batch and heartbeats dropped by
 *   the spool's bounds leave it. Errors with `retryable: false` (bad credentials, missing hub)
 *   are retried the same way, since an operator may fix them, but logged at error level, rate
 *   limited. Records are never dropped here.
 *
 * Contract for "too large" (what a sink must do, what the loop does):
 * - A sink throws `SinkError` with `tooLarge: true` (retryable or not) when the batch as a whole
 *   cannot be sent in one go because of a size limit (Event Hubs: the batch does not fit in one
 *   `EventDataBatch` / the service answers MessageSizeExceeded). It must not send a part and
 *   drop the rest; sending a part and throwing is fine (duplicates are allowed).
 * - The loop then halves the batch size limit (at least 1) and retries at once, without backoff.
 *   After each successful send the limit doubles again, up to `maxBatch`.
 * - A batch of a single record flagged `tooLarge` can never be delivered: the record is moved to
 *   the spool's `rejected/` directory (kept on disk, logged at error level with its recordId,
 *   counted in `rejected`) so that it does not wedge every record behind it.
 *
 * Stop: `stop({ flushTimeoutMs })` keeps delivering until the spool is empty or the timeout
 * expires, then aborts the in-flight send (through the AbortSignal given to `sink.send`, and by no
 * longer waiting for it) and resolves; undelivered records stay in the spool for the next start.
 */
import { inspect } from 'node:util';
import pRetry from 'p-retry';
import type { Logger } from '../observability/logger.js';
import { type Sink, SinkError } from '../sinks/sink.js';
import { LogLimiter } from '../observability/log-limiter.js';
import type { Spool, SpoolEntry } from '../spool/spool.js';

export const DEFAULT_MAX_BATCH = 256;
export const DEFAULT_MIN_BACKOFF_MS = 500;
export const DEFAULT_MAX_BACKOFF_MS = 30_000;
export const DEFAULT_SEND_TIMEOUT_MS = 60_000;
export const DEFAULT_FLUSH_TIMEOUT_MS = 5_000;

export interface DeliveryOptions {
  spool: Spool;
  sink: Sink;
  logger: Logger;
  /** Most records per `sink.send`. Default 256. */
  maxBatch?: number;
  /** First retry delay (before jitter). Default 500 ms. */
  minBackoffMs?: number;
  /** Cap of the retry delay. Default 30 s. */
  maxBackoffMs?: number;
  /** A send that has not settled by then is aborted and counted as a retryable failure. Default 60 s. */
  sendTimeoutMs?: number;
  /** Minimum interval between repeated failure log lines of the same kind. Default 60 s. */
  errorLogIntervalMs?: number;
  /** Aborting it stops the loop at once, like `stop({ flushTimeoutMs: 0 })`. */
  signal?: AbortSignal;
}

export interface DeliveryStats {
  running: boolean;
  recordsSent: number;
  batchesSent: number;
  /** Failed `sink.send` calls (any error). */
  sendFailures: number;
  /** Of which flagged `retryable: false`. */
  nonRetryableFailures: number;
  /** Sends attempted again after a failure (with backoff; splits excluded). */
  retries: number;
  /** Times a batch was halved after a `tooLarge` error. */
  splits: number;
  /** Records moved to `rejected/` (a single record larger than the sink accepts). */
  rejected: number;
  consecutiveFailures: number;
  batchLimit: number;
  /** Epoch ms of the last confirmed send; null before the first. */
  lastSuccessAt: number | null;
  lastError: string | null;
  spoolDepth: number;
  spoolBytes: number;
  memoryHeld: number;
}

/** Thrown inside the retry loop to retry at once with a smaller batch (no backoff consumed). */
class SplitRequest extends Error {
  constructor() {
    super('batch too large: splitting');
    this.name = 'SplitRequest';
  }
}

/**
 * The signal's abort reason as an Error: the reason itself when it is one (a SinkError for a send
 * timeout stays that exact object), else an Error naming it. `attempt` rethrows the halt signal's
 * own reason, so a non-Error halt reason is never replaced by this wrapper outside this module.
 */
function abortError(signal: AbortSignal): Error {
  const reason: unknown = signal.reason;
  if (reason instanceof Error) return reason;
  return new Error(`aborted: ${typeof reason === 'string' ? reason : inspect(reason)}`, { cause: reason });
}

function abortable<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(abortError(signal));
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => reject(abortError(signal));
    signal.addEventListener('abort', onAbort, { once: true });
    const settle = (): void => {
      signal.removeEventListener('abort', onAbort);
      // Adopt the send's own outcome: its value, or its rejection reason untouched (whatever it is).
      resolve(promise);
    };
    promise.then(settle, settle);
  });
}

function describe(err: unknown): string {
  return err instanceof Error ? `${err.name}: ${err.message}` : String(err);
}

export class DeliveryLoop {
  private readonly spool: Spool;
  private readonly sink: Sink;
  private readonly logger: Logger;
  private readonly maxBatch: number;
  private readonly minBackoffMs: number;
  private readonly maxBackoffMs: number;
  private readonly sendTimeoutMs: number;
  private readonly limiter: LogLimiter;
  private readonly halt = new AbortController();

  private runPromise: Promise<void> | null = null;
  private running = false;
  private stopping = false;
  private woken = false;
  private wakeWaiter: (() => void) | null = null;
  private unsubscribe: (() => void) | null = null;
  private batchLimit: number;
  private ackInFlight: Promise<void> = Promise.resolve();

  private readonly counters = {
    recordsSent: 0,
    batchesSent: 0,
    sendFailures: 0,
    nonRetryableFailures: 0,
    retries: 0,
    splits: 0,
    rejected: 0,
    consecutiveFailures: 0,
  };
  private lastSuccessAt: number | null = null;
  private lastError: string | null = null;

  constructor(options: DeliveryOptions) {
    this.spool = options.spool;
    this.sink = options.sink;
    this.logger = options.logger.child({ component: 'delivery', sink: options.sink.name });
    this.maxBatch = options.maxBatch ?? DEFAULT_MAX_BATCH;
    this.minBackoffMs = options.minBackoffMs ?? DEFAULT_MIN_BACKOFF_MS;
    this.maxBackoffMs = options.maxBackoffMs ?? DEFAULT_MAX_BACKOFF_MS;
    this.sendTimeoutMs = options.sendTimeoutMs ?? DEFAULT_SEND_TIMEOUT_MS;
    this.limiter = new LogLimiter(options.errorLogIntervalMs ?? 60_000);
    if (!Number.isInteger(this.maxBatch) || this.maxBatch < 1)
      throw new RangeError('maxBatch must be an integer >= 1');
    if (!(this.minBackoffMs >= 0) || !(this.maxBackoffMs >= this.minBackoffMs)) {
      throw new RangeError('need 0 <= minBackoffMs <= maxBackoffMs');
    }
    this.batchLimit = this.maxBatch;
    const external = options.signal;
    if (external) {
      if (external.aborted) this.halt.abort(external.reason);
      else external.addEventListener('abort', () => this.hardStop(external.reason), { once: true });
    }
  }

  /** Starts delivering (whatever the spool holds first, then records as they are appended). */
  start(): void {
    if (this.runPromise) return;
    if (this.stopping) throw new Error('delivery loop was stopped; create a new one');
    this.unsubscribe = this.spool.subscribe(() => this.wake());
    this.running = true;
    this.runPromise = this.run().finally(() => {
      this.running = false;
      this.unsubscribe?.();
      this.unsubscribe = null;
    });
  }

  /** Tells the loop there may be new records (the spool does this on every append). */
  wake(): void {
    this.woken = true;
    const waiter = this.wakeWaiter;
    this.wakeWaiter = null;
    waiter?.();
  }

  /**
   * Stops taking new work: delivers what the spool holds for at most `flushTimeoutMs` (default
   * 5 s), then aborts the in-flight send and resolves. What is left stays in the spool.
   */
  async stop(options: { flushTimeoutMs?: number } = {}): Promise<void> {
    const flushTimeoutMs = options.flushTimeoutMs ?? DEFAULT_FLUSH_TIMEOUT_MS;
    this.stopping = true;
    if (!this.runPromise) return;
    const timer = setTimeout(() => this.hardStop(new Error('delivery flush timeout')), flushTimeoutMs);
    this.wake();
    try {
      await this.runPromise;
    } finally {
      clearTimeout(timer);
    }
    const left = this.spool.depth;
    const fields = { left, recordsSent: this.counters.recordsSent, flushTimeoutMs };
    if (left > 0)
      this.logger.warn(fields, 'delivery stopped; undelivered records stay in the spool for the next start');
    else this.logger.info(fields, 'delivery stopped; spool empty');
  }

  stats(): DeliveryStats {
    const s = this.spool.stats();
    return {
      running: this.running,
      ...this.counters,
      batchLimit: this.batchLimit,
      lastSuccessAt: this.lastSuccessAt,
      lastError: this.lastError,
      spoolDepth: s.depth,
      spoolBytes: s.bytes,
      memoryHeld: s.memoryHeld,
    };
  }

  // ---- internals ----

  private hardStop(reason: unknown): void {
    if (!this.halt.signal.aborted) this.halt.abort(reason);
    this.wake();
  }

  private async run(): Promise<void> {
    try {
      await this.loop();
    } finally {
      await this.ackInFlight;
    }
  }

  private async loop(): Promise<void> {
    while (!this.halt.signal.aborted) {
      this.woken = false;
      if (this.spool.depth === 0) {
        if (this.stopping) return;
        await this.waitForWake();
        continue;
      }
      try {
        await pRetry(() => this.attempt(), {
          retries: Number.POSITIVE_INFINITY,
          factor: 2,
          minTimeout: this.minBackoffMs,
          // p-retry jitters by ×[1, 2) and then caps, so every delay at the cap would be equal;
          // it caps at 80% and `capJitter` adds up to the last 20%, keeping a fleet of VMs that
          // lost the same hub from retrying in lockstep.
          maxTimeout: this.capBase(),
          randomize: true,
          signal: this.halt.signal,
          onFailedAttempt: async ({ error, retriesConsumed }) => {
            this.onFailure(error);
            await this.capJitter(error, retriesConsumed);
          },
          shouldConsumeRetry: ({ error }) => !(error instanceof SplitRequest),
        });
      } catch (err) {
        if (this.halt.signal.aborted) return;
        // Defensive: pRetry gives up only on abort; anything else is a bug worth a line and a pause.
        this.logger.error({ err }, 'delivery loop error; continuing');
        await this.sleep(this.maxBackoffMs);
      }
    }
  }

  private waitForWake(): Promise<void> {
    if (this.woken || this.halt.signal.aborted) return Promise.resolve();
    return new Promise((resolve) => {
      this.wakeWaiter = resolve;
    });
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      const signal = this.halt.signal;
      function done(): void {
        clearTimeout(timer);
        signal.removeEventListener('abort', done);
        resolve();
      }
      signal.addEventListener('abort', done, { once: true });
    });
  }

  /** One try: read the head of the spool, send it, ack it. Throws to make pRetry retry. */
  private async attempt(): Promise<void> {
    let entries: SpoolEntry[];
    try {
      entries = await this.spool.peek(this.batchLimit);
    } catch (err) {
      throw new SinkError(`reading the spool failed: ${describe(err)}`, { retryable: true, cause: err });
    }
    if (entries.length === 0) return;
    const perSend = new AbortController();
    const signal = AbortSignal.any([this.halt.signal, perSend.signal]);
    const timer = setTimeout(
      () =>
        perSend.abort(new SinkError(`send timed out after ${this.sendTimeoutMs} ms`, { retryable: true })),
      this.sendTimeoutMs,
    );
    try {
      await abortable(
        this.sink.send(
          entries.map((e) => e.record),
          signal,
        ),
        signal,
      );
    } catch (err) {
      if (this.halt.signal.aborted) throw this.halt.signal.reason;
      if (err instanceof SinkError && err.tooLarge) {
        if (entries.length > 1) {
          this.batchLimit = Math.max(1, Math.floor(entries.length / 2));
          this.counters.splits += 1;
          this.logger.warn(
            { batch: entries.length, newLimit: this.batchLimit, err },
            'sink says the batch is too large; halving it',
          );
          throw new SplitRequest();
        }
        await this.spool.reject(entries, describe(err));
        this.counters.rejected += entries.length;
        return;
      }
      throw err instanceof SinkError ? err : new SinkError(describe(err), { retryable: true, cause: err });
    } finally {
      clearTimeout(timer);
    }
    // The records leave the queue now (ack takes them out of the index before the next peek can
    // run); their unlinks overlap with the next batch, at most one batch behind.
    const acked = this.spool.ack(entries).catch((err: unknown) => {
      this.logger.error({ err }, 'acknowledging delivered records failed; they may be sent again');
    });
    const previous = this.ackInFlight;
    this.ackInFlight = acked;
    await previous;
    this.onSuccess(entries.length);
  }

  private onSuccess(count: number): void {
    this.counters.recordsSent += count;
    this.counters.batchesSent += 1;
    this.lastSuccessAt = Date.now();
    if (this.counters.consecutiveFailures > 0) {
      this.logger.info(
        { failedAttempts: this.counters.consecutiveFailures, lastError: this.lastError },
        'sink recovered; delivering again',
      );
      this.limiter.reset();
    }
    this.counters.consecutiveFailures = 0;
    if (this.batchLimit < this.maxBatch) this.batchLimit = Math.min(this.maxBatch, this.batchLimit * 2);
  }

  private capBase(): number {
    return Math.max(this.minBackoffMs, Math.floor(this.maxBackoffMs * 0.8));
  }

  /** Extra random wait once the exponential delay has reached the cap (see `run`). */
  private async capJitter(error: Error, retriesConsumed: number): Promise<void> {
    if (error instanceof SplitRequest || this.halt.signal.aborted) return;
    const base = this.capBase();
    if (this.minBackoffMs * 2 ** retriesConsumed < base) return;
    const extra = Math.floor(Math.random() * (this.maxBackoffMs - base));
    if (extra > 0) await this.sleep(extra);
  }

  private onFailure(error: Error): void {
    if (error instanceof SplitRequest) return;
    if (this.halt.signal.aborted) return;
    this.counters.sendFailures += 1;
    this.counters.retries += 1;
    this.counters.consecutiveFailures += 1;
    this.lastError = describe(error);
    const retryable = !(error instanceof SinkError) || error.retryable;
    const fields = {
      err: error,
      retryable,
      consecutiveFailures: this.counters.consecutiveFailures,
      spoolDepth: this.spool.depth,
    };
    if (!retryable) {
      this.counters.nonRetryableFailures += 1;
      // Keyed on the error's kind, not its message: service messages carry per-request text
      // (TrackingId, timestamps) that would make every failure a new key.
      const suppressed = this.limiter.take(`fatal:${error.code ?? error.name}`);
      if (suppressed === null) return;
      this.logger.error(
        { ...fields, suppressed },
        'sink rejected the batch with a non-retryable error (check credentials, hub name, permissions, sizes); records are kept in the spool and retried with backoff',
      );
      return;
    }
    const suppressed = this.limiter.take('retryable');
    if (suppressed === null) return;
    this.logger.warn({ ...fields, suppressed }, 'send failed; records kept, retrying with backoff');
  }
}
