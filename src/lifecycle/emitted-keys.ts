/**
 * A bounded memory of the transitions already emitted, keyed by (eventId lower-cased, phase[,
 * notBefore for Rescheduled]): the same key is never emitted twice while remembered, which
 * guards against re-emission after tracker-state loss and against flapping documents (an event
 * that drops out of one document and comes back). Bounded by count (LRU) and by age (TTL).
 *
 * Lives outside the pure tracker because lru-cache reads a clock. The clock is epoch ms
 * (`Date.now` unless injected) so that persisted entries keep their age across restarts.
 */
import { LRUCache } from 'lru-cache';
import type { Transition } from './tracker.js';

export const DEFAULT_EMITTED_KEYS_MAX = 10_000;
/** Seven days: longer than any event lives in a document (degraded-hardware notices give days). */
export const DEFAULT_EMITTED_KEYS_TTL_MS = 7 * 24 * 3600 * 1000;

/** Persisted form: `[key, emittedAt epoch ms]`, least recently used first. */
export interface EmittedKeysDump {
  version: 1;
  entries: [string, number][];
}

export interface EmittedKeysOptions {
  max?: number;
  ttlMs?: number;
  /** Epoch-ms clock; tests inject one. */
  now?: () => number;
}

/**
 * What distinguishes one Rescheduled of an event from another: the new NotBefore, Resources
 * (order- and case-insensitive) and duration. Two reschedules that differ only in Resources are
 * two transitions, so both are shipped; the same reschedule seen twice is one.
 */
export function rescheduleVariant(
  notBefore: string | null,
  resources: readonly string[],
  durationInSeconds: number,
): string {
  const names = resources.map((r) => r.toLowerCase()).sort();
  return `${notBefore ?? ''}|${names.join(',')}|${durationInSeconds}`;
}

/** The dedup key of a transition. Rescheduled includes what was rescheduled (see rescheduleVariant). */
export function emittedKeyOf(t: Pick<Transition, 'event' | 'phase' | 'notBefore'>): string {
  const id = t.event.EventId.toLowerCase();
  return t.phase === 'Rescheduled'
    ? `${id}|Rescheduled|${rescheduleVariant(t.notBefore, t.event.Resources, t.event.DurationInSeconds)}`
    : `${id}|${t.phase}`;
}

export class EmittedKeys {
  readonly #cache: LRUCache<string, number>;
  readonly #now: () => number;
  readonly #ttlMs: number;

  constructor(options: EmittedKeysOptions = {}) {
    this.#now = options.now ?? Date.now;
    this.#ttlMs = options.ttlMs ?? DEFAULT_EMITTED_KEYS_TTL_MS;
    this.#cache = new LRUCache<string, number>({
      max: options.max ?? DEFAULT_EMITTED_KEYS_MAX,
      ttl: this.#ttlMs,
      ttlAutopurge: false,
      // No cached clock reading (lru-cache otherwise keeps one for 1 ms behind a setTimeout).
      ttlResolution: 0,
      perf: { now: this.#now },
    });
  }

  get size(): number {
    return this.#cache.size;
  }

  has(key: string): boolean {
    return this.#cache.has(key);
  }

  add(key: string, emittedAt: number = this.#now()): void {
    this.#cache.set(key, emittedAt, { start: emittedAt });
  }

  dump(): EmittedKeysDump {
    const entries: [string, number][] = [];
    // rentries(): least recently used first, so that load() rebuilds the same recency order.
    for (const [key, emittedAt] of this.#cache.rentries() as Iterable<[string, number]>) {
      entries.push([key, emittedAt]);
    }
    return { version: 1, entries };
  }

  /** Adds persisted entries (expired ones are skipped). Malformed entries are ignored. */
  load(dump: EmittedKeysDump): void {
    const now = this.#now();
    for (const entry of dump.entries) {
      if (!Array.isArray(entry)) continue;
      const [key, emittedAt] = entry;
      if (typeof key !== 'string' || typeof emittedAt !== 'number' || !Number.isFinite(emittedAt)) continue;
      if (now - emittedAt >= this.#ttlMs) continue;
      this.add(key, emittedAt);
    }
  }
}

/** Validates a persisted dump; null when it is not one. */
export function parseEmittedKeysDump(x: unknown): EmittedKeysDump | null {
  if (typeof x !== 'object' || x === null) return null;
  const d = x as { version?: unknown; entries?: unknown };
  if (d.version !== 1 || !Array.isArray(d.entries)) return null;
  return { version: 1, entries: d.entries as [string, number][] };
}
