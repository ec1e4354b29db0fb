import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Scope } from '../config/options.js';
import type { ImdsClient } from '../imds/client.js';
import { ImdsError } from '../imds/errors.js';
import type { ScheduledEventsDocument } from '../imds/types.js';
import { EmittedKeys, emittedKeyOf } from '../lifecycle/emitted-keys.js';
import { buildLifecycleRecord, inScope, vmIdentityFromCompute } from '../lifecycle/enrich.js';
import type { LifecycleRecord, ShipperIdentity, ShipperRecord } from '../lifecycle/record.js';
import { StateStore } from '../lifecycle/state-store.js';
import {
  initialTrackerState,
  observeDocument,
  type TrackerState,
  type TrackerWarningCode,
} from '../lifecycle/tracker.js';
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import { LogLimiter } from '../observability/log-limiter.js';
import type { IdentityWatcher } from './identity.js';

/** Where records go once derived: the spool in the daemon, a sink directly elsewhere. */
export interface RecordOutput {
  /**
   * Takes the records; throws when it cannot. Resolves `false` when it holds them only in memory
   * (the spool after a disk error), anything else when they are durable or delivered.
   */
  append(records: readonly ShipperRecord[]): Promise<unknown>;
  /** True once nothing handed over is held only in memory any more. */
  isDurable?(): boolean;
}

export interface ShipperOptions {
  imds: ImdsClient;
  identity: IdentityWatcher;
  output: RecordOutput;
  stateDir: string;
  pollIntervalMs: number;
  /** The IMDS request timeout: one slow request must not look like an observation gap. */
  imdsTimeoutMs?: number;
  scope: Scope;
  logger: Logger;
  metrics: Metrics;
  shipper: ShipperIdentity;
  /** Injected clock, epoch ms. */
  now?: () => number;
}

const WARNING_TEXT: Record<TrackerWarningCode, string> = {
  'unknown-event-type': 'unknown EventType passed through verbatim',
  'unknown-event-status': 'unknown EventStatus passed through verbatim',
  'unparseable-not-before': 'NotBefore not in RFC 1123 or ISO 8601; shipped as null',
  'duplicate-event-id': 'the same EventId appears twice in one document; the first is used',
};

/** Persist at least this often even when nothing changed (lastObservedAt for gapSeconds). */
const STATE_REFRESH_MS = 600_000;
const MAX_FAILURE_BACKOFF_MS = 5_000;
/**
 * 400/404 will not fix themselves, so IMDS is not hammered, but a Spot eviction gives 30 s of
 * notice: polling every 10 s still sees it Scheduled.
 */
const NON_RETRYABLE_BACKOFF_MS = 10_000;

/**
 * Time between two good documents beyond which we did not watch continuously: a few poll
 * intervals, and never less than one poll plus one timed-out request and its retry.
 */
export function gapThresholdFor(pollIntervalMs: number, imdsTimeoutMs = 5_000): number {
  return Math.max(5 * pollIntervalMs, pollIntervalMs + imdsTimeoutMs + 2_000);
}

/**
 * The poll loop: IMDS document → tracker → enrich → scope → state file → output.
 *
 * Commit order (a write-ahead): the new tracker state, the emitted keys and the new records
 * ("pending") are saved atomically in one state file, then the records are appended to the
 * spool, then the state is saved again without them. A crash before the first save re-derives
 * the same transitions from the old state (same recordIds); a crash after it finds the records
 * pending in the state file and spools them again (same recordIds). Either way the worst case is
 * a duplicate, never a loss, and never a second, different record for the same ending (which a
 * re-derivation after a restart would make: a Canceled seen live would come back as an inferred
 * Completed).
 */
export class Shipper {
  private tracker: TrackerState;
  private readonly emitted: EmittedKeys;
  private readonly now: () => number;
  private readonly gapThresholdMs: number;
  /** Ends the sleep between polls at once on stop. */
  private readonly stopping = new AbortController();
  /** Cuts an IMDS request still in flight a grace period after stop (the first call may hang 2 min). */
  private readonly requestAbort = new AbortController();
  private loopDone: Promise<void> | undefined;
  private consecutiveFailures = 0;
  private lastPersistAt = 0;
  private lastFailureLogAt = 0;
  private lastFailureKind = '';
  private readonly warnedOnce = new Set<string>();
  private lastDocument: ScheduledEventsDocument | undefined;
  /** The state came from a previous process: whatever ended meanwhile was not watched. */
  private resumedFromDisk = false;
  /** Records committed in the state file and not yet handed to the spool. */
  private pending: LifecycleRecord[] = [];
  /** Records handed to the spool that it holds only in memory (disk error): kept in the state file too. */
  private unconfirmed: LifecycleRecord[] = [];
  private readonly limiter = new LogLimiter(60_000);
  private stateSaveFailing = false;

  private constructor(
    private readonly options: ShipperOptions,
    private readonly store: StateStore,
    tracker: TrackerState,
    emitted: EmittedKeys,
  ) {
    this.tracker = tracker;
    this.emitted = emitted;
    this.now = options.now ?? Date.now;
    this.gapThresholdMs = gapThresholdFor(options.pollIntervalMs, options.imdsTimeoutMs);
  }

  /** Loads persisted state from the state dir (a missing or corrupt file starts fresh). */
  static async open(options: ShipperOptions): Promise<Shipper> {
    const store = new StateStore(options.stateDir, { logger: options.logger });
    const saved = await store.load();
    const emitted = new EmittedKeys();
    if (saved) emitted.load(saved.emittedKeys);
    const shipper = new Shipper(options, store, saved?.tracker ?? initialTrackerState(), emitted);
    shipper.resumedFromDisk = saved !== null;
    // Whatever a previous run had not confirmed is spooled again (same recordIds).
    shipper.pending = saved?.pending ?? [];
    if (saved) {
      options.logger.info(
        {
          trackedEvents: Object.keys(saved.tracker.events).length,
          lastObservedAt: saved.tracker.lastObservedAt,
        },
        'resumed from saved state',
      );
    }
    return shipper;
  }

  get activeEvents(): number {
    return this.lastDocument?.Events.length ?? 0;
  }

  start(): void {
    this.loopDone ??= this.loop();
  }

  private async loop(): Promise<void> {
    const { pollIntervalMs } = this.options;
    while (!this.stopping.signal.aborted) {
      // Monotonic: a wall-clock step during a poll must not stretch the sleep after it.
      const startedAt = performance.now();
      const failure = await this.pollOnce();
      if (this.stopping.signal.aborted) break;
      let delay = pollIntervalMs - (performance.now() - startedAt);
      if (failure instanceof ImdsError && failure.kind === 'http' && !failure.retryable) {
        delay = NON_RETRYABLE_BACKOFF_MS;
      } else if (failure && !(failure instanceof ImdsError && failure.kind === 'document')) {
        delay = Math.min(
          Math.max(pollIntervalMs, MAX_FAILURE_BACKOFF_MS),
          pollIntervalMs * 2 ** (this.consecutiveFailures - 1),
        );
      }
      try {
        await sleep(Math.max(0, delay), undefined, { signal: this.stopping.signal });
      } catch {
        break; // aborted by stop()
      }
    }
  }

  /** One poll. Returns the failure, if any; never throws. */
  async pollOnce(): Promise<unknown> {
    const { imds, metrics, logger } = this.options;
    // Left from a previous run or a refused append; polling goes on either way.
    await this.flushPending(this.now());
    let document: ScheduledEventsDocument;
    try {
      const result = await imds.getScheduledEvents(this.requestAbort.signal);
      document = result.document;
      if (result.notModified) metrics.inc('pollsNotModified');
    } catch (err) {
      if (this.requestAbort.signal.aborted) return undefined;
      metrics.inc('pollsFailed');
      this.consecutiveFailures++;
      this.logPollFailure(err);
      return err;
    }
    metrics.inc('pollsOk');
    const observedAt = this.now();
    metrics.set('lastPollOkTimestampSeconds', Math.floor(observedAt / 1000));
    if (this.consecutiveFailures > 0) {
      logger.info({ failures: this.consecutiveFailures }, 'IMDS answering again');
      this.consecutiveFailures = 0;
      this.lastFailureKind = '';
    }
    await this.process(document, observedAt);
    return undefined;
  }

  private async process(document: ScheduledEventsDocument, observedAt: number): Promise<void> {
    const { metrics, logger, scope } = this.options;
    this.lastDocument = document;
    metrics.set('activeEvents', document.Events.length);
    metrics.set('lastIncarnation', document.DocumentIncarnation);

    const observed = observeDocument(this.tracker, document, observedAt, {
      // Right after a restart any ending is inferred, however short the downtime was.
      gapThresholdMs: this.resumedFromDisk ? -1 : this.gapThresholdMs,
    });
    for (const w of observed.warnings) {
      this.warnOnce(
        `${w.code}:${w.value}`,
        { code: w.code, eventId: w.eventId, value: w.value },
        WARNING_TEXT[w.code],
      );
    }

    const keys: string[] = [];
    const observedKeyTimes: number[] = [];
    const records: LifecycleRecord[] = [];
    if (observed.transitions.length > 0) {
      metrics.inc('transitions', observed.transitions.length);
      const compute = this.options.identity.current;
      const vm = compute ? vmIdentityFromCompute(compute) : null;
      for (const transition of observed.transitions) {
        const key = emittedKeyOf(transition);
        if (this.emitted.has(key)) continue;
        keys.push(key);
        observedKeyTimes.push(transition.observedAt);
        const record = buildLifecycleRecord(transition, vm, this.options.shipper);
        if (!inScope(record, scope)) {
          metrics.inc('recordsSkippedScope');
          continue;
        }
        records.push(record);
      }
    }
    for (let i = 0; i < keys.length; i++) this.emitted.add(keys[i] as string, observedKeyTimes[i]);
    const changed = observed.transitions.length > 0;
    this.tracker = observed.state;
    this.resumedFromDisk = false;
    if (records.length > 0) {
      for (const r of records) {
        logger.info(
          {
            phase: r.phase,
            eventId: r.eventId,
            eventType: r.eventType,
            notBefore: r.notBefore,
            inferred: r.inferred,
            affectsThisVm: r.affectsThisVm,
          },
          'lifecycle transition',
        );
      }
      this.pending.push(...records);
    }
    if (changed || observedAt - this.lastPersistAt >= STATE_REFRESH_MS) await this.persist(observedAt);
    await this.flushPending(observedAt);
  }

  /**
   * Hands the pending records to the spool, then saves the state without them. Records the spool
   * could only hold in memory stay in the state file until it has written them. Never throws: a
   * refused append keeps the records pending for the next poll.
   */
  private async flushPending(at: number): Promise<void> {
    const { output, logger, metrics } = this.options;
    if (this.unconfirmed.length > 0 && output.isDurable?.() !== false) {
      this.unconfirmed = [];
      if (this.pending.length === 0) await this.persist(at);
    }
    if (this.pending.length === 0) return;
    const records = this.pending;
    let durable: boolean;
    try {
      durable = (await output.append(records)) !== false;
    } catch (err) {
      const suppressed = this.limiter.take('append');
      if (suppressed !== null) {
        logger.error(
          { err, pending: records.length, suppressed },
          'could not hand records to the spool; they stay in the state file and are retried every poll',
        );
      }
      return;
    }
    metrics.inc('recordsSpooled', records.length);
    this.pending = this.pending.slice(records.length);
    if (!durable) this.unconfirmed.push(...records);
    await this.persist(at);
  }

  private async persist(at: number): Promise<void> {
    try {
      const pending = [...this.unconfirmed, ...this.pending];
      await this.store.save({
        tracker: this.tracker,
        emittedKeys: this.emitted.dump(),
        ...(pending.length > 0 ? { pending } : {}),
      });
      this.lastPersistAt = at;
      if (this.stateSaveFailing) {
        this.stateSaveFailing = false;
        this.limiter.reset('state');
        this.options.logger.info({ stateDir: this.options.stateDir }, 'tracker state saved again');
      }
    } catch (err) {
      // Not fatal: the records still go to the spool, and the state on disk stays the previous
      // one, from which a restart re-derives the same transitions (same recordIds).
      this.stateSaveFailing = true;
      this.options.metrics.inc('stateSaveFailures');
      const suppressed = this.limiter.take('state');
      if (suppressed !== null) {
        this.options.logger.error(
          { err, stateDir: this.options.stateDir, suppressed },
          'cannot save tracker state (records still flow; a restart may repeat some, same recordIds)',
        );
      }
    }
  }

  private warnOnce(key: string, fields: Record<string, unknown>, message: string): void {
    if (this.warnedOnce.has(key)) return;
    if (this.warnedOnce.size < 1000) this.warnedOnce.add(key);
    this.options.logger.warn(fields, message);
  }

  private logPollFailure(err: unknown): void {
    const now = this.now();
    const kind = err instanceof ImdsError ? `${err.kind}:${err.status ?? ''}` : 'other';
    // A new kind of failure is logged at once; the same one again at most once a minute.
    if (kind !== this.lastFailureKind || now - this.lastFailureLogAt >= 60_000) {
      this.lastFailureKind = kind;
      this.lastFailureLogAt = now;
      const fields = { err, failures: this.consecutiveFailures, keepingState: true };
      if (err instanceof ImdsError && err.kind === 'document') {
        this.options.logger.error(
          fields,
          'IMDS sent a malformed document; ignored, keeping the last known state',
        );
      } else {
        this.options.logger.warn(fields, 'IMDS scheduled events poll failed; keeping the last known state');
      }
    } else {
      this.options.logger.debug({ err, failures: this.consecutiveFailures }, 'IMDS poll failed');
    }
  }

  /** Lets the poll in progress finish (up to `graceMs`), then saves state. */
  async stop(graceMs = 3_000): Promise<void> {
    this.stopping.abort();
    const cut = setTimeout(() => this.requestAbort.abort(), graceMs);
    await this.loopDone;
    clearTimeout(cut);
    await this.persist(this.now());
  }
}
