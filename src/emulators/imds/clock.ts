/**
 * Time source of the emulator. Everything the emulator derives from time (scenario steps, NotBefore,
 * automatic starts and ends, the rate limit) reads this clock, so tests can replace it with a manual
 * clock and jump through real timings without sleeping.
 */
export interface Clock {
  /** Milliseconds since the Unix epoch. */
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };

/** A clock that only moves when told to. */
export interface ManualClock extends Clock {
  /** Moves the clock forward by `ms` (negative values are rejected). */
  advance(ms: number): void;
  /** Sets the clock to `epochMs`; it may not go backwards. */
  set(epochMs: number): void;
}

export function createManualClock(startEpochMs: number = Date.now()): ManualClock {
  let current = startEpochMs;
  return {
    now: () => current,
    advance(ms: number) {
      if (!Number.isFinite(ms) || ms < 0) throw new RangeError(`cannot advance a clock by ${ms} ms`);
      current += ms;
    },
    set(epochMs: number) {
      if (!Number.isFinite(epochMs) || epochMs < current) {
        throw new RangeError(`cannot move a clock back from ${current} to ${epochMs}`);
      }
      current = epochMs;
    },
  };
}
