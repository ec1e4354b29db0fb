import {
  expectNumber,
  expectObject,
  expectOneOf,
  optionalNumber,
  rejectUnknownKeys,
  ValidationError,
} from './validate.js';

/** Which IMDS routes a fault applies to. */
export type FaultRoute = 'scheduledevents' | 'instance' | 'any';
export const FAULT_ROUTES: readonly FaultRoute[] = ['scheduledevents', 'instance', 'any'];

export const FAULT_KINDS = [
  'status',
  'latency',
  'hang',
  'drop',
  'malformed',
  'truncated',
  'wrong-shape',
  'enrolment',
] as const;
export type FaultKind = (typeof FAULT_KINDS)[number];

/**
 * A fault applies to the next `count` matching requests, in the order faults were added.
 * - `status`: answer with HTTP `status` (410, 429, 500, …) and an IMDS-like error body.
 * - `latency`: answer normally after `ms` milliseconds of wall time.
 * - `hang`: never answer (the socket stays open until the client gives up or the emulator stops).
 * - `drop`: destroy the connection without answering.
 * - `malformed`: 200 with a body that is not JSON.
 * - `truncated`: 200 announcing the full Content-Length, then only half the body and a closed socket.
 * - `wrong-shape`: 200 with valid JSON that is not a scheduled-events document.
 * - `enrolment`: the "first call enables the service" delay: the next request waits `seconds`
 *   (default 120, divided by the speed factor) before it is answered.
 */
export interface FaultSpec {
  kind: FaultKind;
  /** Number of requests affected; default 1 (`enrolment` always 1). */
  count?: number;
  route?: FaultRoute;
  /** `status` only: the HTTP status code. */
  status?: number;
  /** `latency` only: milliseconds of wall time. */
  ms?: number;
  /** `enrolment` only: seconds of scenario time (scaled by the speed factor), ≤ 120. */
  seconds?: number;
}

export interface ActiveFault {
  id: number;
  spec: Required<Pick<FaultSpec, 'kind' | 'route'>> & FaultSpec;
  remaining: number;
}

export function parseFault(value: unknown, path: string): FaultSpec {
  const obj = expectObject(value, path);
  const kind = expectOneOf(obj.kind, FAULT_KINDS, `${path}.kind`);
  const allowed = ['kind', 'count', 'route'];
  if (kind === 'status') allowed.push('status');
  if (kind === 'latency') allowed.push('ms');
  if (kind === 'enrolment') allowed.push('seconds');
  rejectUnknownKeys(obj, allowed, path);
  const spec: FaultSpec = { kind };
  const count = optionalNumber(obj.count, `${path}.count`, { integer: true, min: 1, max: 1_000_000 });
  if (count !== undefined) {
    if (kind === 'enrolment' && count !== 1)
      throw new ValidationError(`${path}.count`, 'enrolment applies to one request');
    spec.count = count;
  }
  if (obj.route !== undefined) spec.route = expectOneOf(obj.route, FAULT_ROUTES, `${path}.route`);
  if (kind === 'status') {
    spec.status = expectNumber(obj.status, `${path}.status`, { integer: true, min: 400, max: 599 });
  }
  if (kind === 'latency') spec.ms = expectNumber(obj.ms, `${path}.ms`, { min: 0, max: 600_000, unit: 'ms' });
  if (kind === 'enrolment') {
    spec.seconds = optionalNumber(obj.seconds, `${path}.seconds`, { min: 0, max: 120, unit: 'seconds' });
  }
  return spec;
}
