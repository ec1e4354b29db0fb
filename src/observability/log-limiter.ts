/**
 * Rate limiter for repeated log lines (a dead sink or a full disk must not flood the journal).
 * `take(key)` answers whether a line for `key` may be written now; when it may, it also says how
 * many lines for that key were suppressed since the last one, so the written line can report it.
 *
 * Bounded: it remembers at most `maxKeys` keys; when a new key would exceed that, the key whose
 * last line was written longest ago is forgotten (its next line is then written at once). So a
 * caller that keys on something unbounded costs memory only up to the cap, never more.
 */
export const DEFAULT_LOG_LIMITER_MAX_KEYS = 256;

export class LogLimiter {
  /** Ordered by the time of the last written line: the first key is the oldest. */
  private readonly last = new Map<string, { at: number; suppressed: number }>();

  constructor(
    private readonly intervalMs: number,
    private readonly now: () => number = Date.now,
    private readonly maxKeys: number = DEFAULT_LOG_LIMITER_MAX_KEYS,
  ) {
    if (!Number.isInteger(maxKeys) || maxKeys < 1) throw new RangeError('maxKeys must be an integer >= 1');
  }

  /** `null`: suppress this line. A number: write it; that many were suppressed before it. */
  take(key: string): number | null {
    const t = this.now();
    const seen = this.last.get(key);
    if (seen && t - seen.at < this.intervalMs) {
      seen.suppressed += 1;
      return null;
    }
    const suppressed = seen?.suppressed ?? 0;
    // Re-insert so that Map order stays "oldest written line first".
    this.last.delete(key);
    while (this.last.size >= this.maxKeys) {
      const oldest = this.last.keys().next();
      if (oldest.done) break;
      this.last.delete(oldest.value);
    }
    this.last.set(key, { at: t, suppressed: 0 });
    return suppressed;
  }

  /** Forgets `key` (e.g. after recovery), so the next failure is logged at once. */
  reset(key?: string): void {
    if (key === undefined) this.last.clear();
    else this.last.delete(key);
  }

  /** How many keys are remembered (at most `maxKeys`). */
  get size(): number {
    return this.last.size;
  }
}
