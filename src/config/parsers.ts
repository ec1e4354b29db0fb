import { ConfigError } from './errors.js';

/** Value parsers shared by every option. `raw` is a string from flags/env or any JSON value from the file. */
export type Parser<T> = (raw: unknown) => T;

const fail = (problem: string): never => {
  throw new ConfigError(problem);
};

export function integer(min: number, max = Number.MAX_SAFE_INTEGER): Parser<number> {
  return (raw) => {
    const n =
      typeof raw === 'number'
        ? raw
        : typeof raw === 'string' && /^-?\d+$/.test(raw.trim())
          ? Number(raw)
          : Number.NaN;
    if (!Number.isSafeInteger(n)) return fail('must be a whole number');
    if (n < min || n > max) return fail(`must be between ${min} and ${max}`);
    return n;
  };
}

export function oneOf<const T extends string>(choices: readonly T[]): Parser<T> {
  return (raw) => {
    const s = typeof raw === 'string' ? raw.trim().toLowerCase() : '';
    const hit = choices.find((c) => c.toLowerCase() === s);
    return hit ?? fail(`must be one of ${choices.join(', ')}`);
  };
}

export function text(options: { allowEmpty?: boolean } = {}): Parser<string> {
  return (raw) => {
    if (typeof raw !== 'string') return fail('must be a string');
    const s = raw.trim();
    if (!s && !options.allowEmpty) return fail('must not be empty');
    return s;
  };
}

export function httpUrl(protocols: readonly string[] = ['http:', 'https:']): Parser<string> {
  return (raw) => {
    const s = text()(raw);
    let u: URL;
    try {
      u = new URL(s);
    } catch {
      return fail('must be an absolute URL such as http://169.254.169.254');
    }
    if (!protocols.includes(u.protocol)) {
      return fail(`must be a ${protocols.map((p) => `${p.replace(':', '')}://`).join(' or ')} URL`);
    }
    return s.replace(/\/+$/, '');
  };
}

/** A TCP port; 0 means "off" for servers we may run. */
export function port(): Parser<number> {
  return integer(0, 65535);
}

export function bytesSize(min: number): Parser<number> {
  return (raw) => {
    if (typeof raw === 'number') return integer(min)(raw);
    const m = typeof raw === 'string' ? /^\s*(\d+)\s*([kmg]i?b?|b)?\s*$/i.exec(raw) : null;
    if (!m) return fail('must be a size such as 64MiB, 512k or 1048576');
    const unit = (m[2] ?? 'b').toLowerCase()[0];
    const mult = unit === 'k' ? 1024 : unit === 'm' ? 1024 ** 2 : unit === 'g' ? 1024 ** 3 : 1;
    return integer(min)(Number(m[1]) * mult);
  };
}
