/** Small helpers for validating untrusted JSON with errors that name the offending field. */

export class ValidationError extends Error {
  constructor(
    readonly path: string,
    readonly problem: string,
  ) {
    super(`${path}: ${problem}`);
    this.name = 'ValidationError';
  }
}

export function describe(value: unknown): string {
  if (value === undefined) return 'nothing';
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'string') return JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value);
  if (typeof value === 'object') return 'an object';
  // What is left is a number, boolean, bigint, symbol or function: each has its own String() form.
  const rest = value as number | boolean | bigint | symbol | ((...args: never[]) => unknown);
  return `${typeof rest} ${String(rest)}`;
}

export function expectObject(value: unknown, path: string): Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new ValidationError(path, `expected an object, got ${describe(value)}`);
  }
  return value as Record<string, unknown>;
}

export function rejectUnknownKeys(
  obj: Record<string, unknown>,
  allowed: readonly string[],
  path: string,
): void {
  for (const key of Object.keys(obj)) {
    if (!allowed.includes(key)) {
      throw new ValidationError(`${path}.${key}`, `unknown field (allowed: ${allowed.join(', ')})`);
    }
  }
}

export function expectString(value: unknown, path: string, opts: { nonEmpty?: boolean } = {}): string {
  if (typeof value !== 'string') throw new ValidationError(path, `expected a string, got ${describe(value)}`);
  if (opts.nonEmpty && value.trim() === '') throw new ValidationError(path, 'must not be empty');
  return value;
}

export function optionalString(
  value: unknown,
  path: string,
  opts: { nonEmpty?: boolean } = {},
): string | undefined {
  return value === undefined ? undefined : expectString(value, path, opts);
}

export function expectNumber(
  value: unknown,
  path: string,
  opts: { min?: number; max?: number; integer?: boolean; unit?: string } = {},
): number {
  const unit = opts.unit ? ` ${opts.unit}` : '';
  if (typeof value !== 'number' || !Number.isFinite(value)) {
    throw new ValidationError(
      path,
      `expected a number${opts.unit ? ` of${unit}` : ''}, got ${describe(value)}`,
    );
  }
  if (opts.integer && !Number.isInteger(value))
    throw new ValidationError(path, `expected an integer${unit}, got ${value}`);
  if (opts.min !== undefined && value < opts.min)
    throw new ValidationError(path, `must be ≥ ${opts.min}${unit}, got ${value}`);
  if (opts.max !== undefined && value > opts.max)
    throw new ValidationError(path, `must be ≤ ${opts.max}${unit}, got ${value}`);
  return value;
}

export function optionalNumber(
  value: unknown,
  path: string,
  opts: { min?: number; max?: number; integer?: boolean; unit?: string } = {},
): number | undefined {
  return value === undefined ? undefined : expectNumber(value, path, opts);
}

export function optionalBoolean(value: unknown, path: string): boolean | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'boolean')
    throw new ValidationError(path, `expected true or false, got ${describe(value)}`);
  return value;
}

export function expectOneOf<T extends string>(value: unknown, allowed: readonly T[], path: string): T {
  if (typeof value !== 'string' || !(allowed as readonly string[]).includes(value)) {
    throw new ValidationError(
      path,
      `expected one of ${allowed.map((a) => JSON.stringify(a)).join(', ')}, got ${describe(value)}`,
    );
  }
  return value as T;
}
