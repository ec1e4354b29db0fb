/**
 * Rate limiter for repeated log lines (a dead sink or a full disk must not flood the journal).
 * `take(key)` answers whether a line for `key` may be written now; when it may, it also says how
 * many lines for that key were suppressed since the last one, so the written line can report it.
 */
export class LogLimiter {
  private readonly last = new Map<string, { at: number; suppressed: number }>();

  constructor(
    private readonly intervalMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  /** `null`: suppress this line. A number: write it; that many were suppressed before it. */
  take(key: string): number | null {
    const t = this.now();
    const seen = this.last.get(key);
    if (seen && t - seen.at < this.intervalMs) {
      seen.suppressed += 1;
      return null;
    }
    const suppressed = seen?.suppressed ?? 0;
    this.last.set(key, { at: t, suppressed: 0 });
    return suppressed;
  }

  /** Forgets `key` (e.g. after recovery), so the next failure is logged at once. */
  reset(key?: string): void {
    if (key === undefined) this.last.clear();
    else this.last.delete(key);
  }
}
