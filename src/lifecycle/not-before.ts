/**
 * `NotBefore` normalisation. IMDS sends RFC 1123 (`Mon, 11 Apr 2022 22:26:58 GMT`) in
 * production, some emulators and older docs ISO 8601 (`2016-09-19T18:29:47Z`), and '' once an
 * event has started. Records carry ISO 8601 UTC with milliseconds, or null.
 *
 * Parsing is strict and explicit (no `Date.parse`, whose accepted formats are
 * implementation-defined): a value that is neither format, or names a date that does not exist,
 * is reported as unparseable and never throws.
 */

export type NotBeforeParse =
  { readonly ok: true; readonly iso: string | null } | { readonly ok: false; readonly iso: null };

const BLANK: NotBeforeParse = Object.freeze({ ok: true, iso: null });
const BAD: NotBeforeParse = Object.freeze({ ok: false, iso: null });

const MONTHS: Record<string, number> = {
  jan: 0,
  feb: 1,
  mar: 2,
  apr: 3,
  may: 4,
  jun: 5,
  jul: 6,
  aug: 7,
  sep: 8,
  oct: 9,
  nov: 10,
  dec: 11,
};

// [Day, ]DD Mon YYYY HH:MM[:SS] (GMT|UT|UTC|Z|+hhmm|-hhmm). The weekday is accepted and ignored.
const RFC1123 =
  /^(?:[A-Za-z]{3},?\s+)?(\d{1,2})\s+([A-Za-z]{3})\s+(\d{4})\s+(\d{2}):(\d{2})(?::(\d{2}))?\s*(GMT|UTC?|Z|[+-]\d{4})$/i;

// YYYY-MM-DD[T ]HH:MM[:SS[.fff]][Z|+hh:mm|+hhmm|+hh]; no zone is read as UTC (IMDS speaks UTC).
const ISO8601 =
  /^(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d{1,9}))?)?\s*(Z|[+-]\d{2}(?::?\d{2})?)?$/i;

/** Minutes east of UTC for `Z`, `GMT`, `+0130`, `-05:00`, `+02`. */
function offsetMinutes(zone: string | undefined): number {
  if (zone === undefined) return 0;
  const c = zone[0];
  if (c !== '+' && c !== '-') return 0;
  const digits = zone.slice(1).replace(':', '');
  const hours = Number(digits.slice(0, 2));
  const minutes = digits.length > 2 ? Number(digits.slice(2, 4)) : 0;
  const total = hours * 60 + minutes;
  return c === '-' ? -total : total;
}

const DAYS_IN_MONTH = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];

function daysInMonth(year: number, month: number): number {
  if (month !== 1) return DAYS_IN_MONTH[month] as number;
  return (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0 ? 29 : 28;
}

function build(
  year: number,
  month: number,
  day: number,
  hour: number,
  minute: number,
  second: number,
  millis: number,
  offsetMin: number,
): NotBeforeParse {
  // Reject days that do not exist (31 Apr, 29 Feb 2023): Date.UTC would silently roll over.
  if (month < 0 || month > 11 || day < 1 || day > daysInMonth(year, month)) return BAD;
  if (hour > 23 || minute > 59 || second > 60) return BAD;
  const ms = Date.UTC(year, month, day, hour, minute, second, millis) - offsetMin * 60_000;
  if (!Number.isFinite(ms)) return BAD;
  return { ok: true, iso: new Date(ms).toISOString() };
}

/**
 * Parses a raw IMDS `NotBefore`. Blank (or whitespace) means none: `{ ok: true, iso: null }`.
 * An unparseable value gives `{ ok: false, iso: null }` so the caller can warn.
 */
export function parseNotBefore(raw: string): NotBeforeParse {
  const s = raw.trim();
  if (s === '') return BLANK;
  let m = RFC1123.exec(s);
  if (m !== null) {
    const month = MONTHS[(m[2] as string).toLowerCase()];
    if (month === undefined) return BAD;
    return build(
      Number(m[3]),
      month,
      Number(m[1]),
      Number(m[4]),
      Number(m[5]),
      m[6] === undefined ? 0 : Number(m[6]),
      0,
      offsetMinutes(m[7]),
    );
  }
  m = ISO8601.exec(s);
  if (m !== null) {
    const fraction = m[7] === undefined ? 0 : Number(m[7].slice(0, 3).padEnd(3, '0'));
    return build(
      Number(m[1]),
      Number(m[2]) - 1,
      Number(m[3]),
      Number(m[4]),
      Number(m[5]),
      m[6] === undefined ? 0 : Number(m[6]),
      fraction,
      offsetMinutes(m[8]),
    );
  }
  return BAD;
}
