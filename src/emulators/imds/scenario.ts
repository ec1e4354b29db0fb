import { readFile } from 'node:fs/promises';
import { type FaultSpec, parseFault } from './faults.js';
import {
  describe,
  expectNumber,
  expectObject,
  expectOneOf,
  expectString,
  optionalBoolean,
  optionalNumber,
  optionalString,
  rejectUnknownKeys,
  ValidationError,
} from './validate.js';

/**
 * A scenario is a timeline of steps. Times are seconds of *scenario time* (real Azure timings);
 * the emulator divides them by its speed factor. `notBefore` values are seconds of notice counted
 * from the step that sets them.
 */
export interface Scenario {
  name: string;
  description: string;
  /** Speed factor used when the caller does not give one (default 1 = real timings). */
  speed?: number;
  /** What happens after the last step: `stay` (default) keeps the final state, `loop` replays. */
  after?: 'stay' | 'loop';
  /** With `after: loop`, scenario seconds between two starts of the timeline (default: last step + 60). */
  loopPeriod?: number;
  steps: ScenarioStep[];
}

export type EventStatus = 'Scheduled' | 'Started';

/** An event as a scenario declares it. */
export interface EventSpec {
  /** Name of the event inside the scenario; later steps refer to it. */
  ref: string;
  /** EventId served verbatim; default: a GUID derived from scenario name, ref and loop iteration. */
  eventId?: string;
  /** Freeze, Reboot, Redeploy, Preempt, Terminate, or any other string (served verbatim). */
  type: string;
  /**
   * Affected VMs. `$self` is this VM's name, `$peer:N` another instance of the same scale set
   * (`{scaleSet}_N`); anything else is used verbatim. Default `["$self"]`.
   */
  resources?: string[];
  /** Seconds of notice before NotBefore (Scheduled events). */
  notBefore?: number;
  /** DurationInSeconds; default 5 for Freeze, -1 (unknown) otherwise. */
  duration?: number;
  /** Platform (default) or User. */
  source?: string;
  description?: string;
  resourceType?: string;
  /** Scenario seconds the event stays Started before it disappears; null = until a `complete` step. */
  startedFor?: number | null;
  /** Start by itself when NotBefore passes without approval (default true, as Azure does). */
  autoStart?: boolean;
}

export type ScenarioStep =
  | { at: number; action: 'schedule'; event: EventSpec }
  | { at: number; action: 'start'; event: EventSpec }
  | { at: number; action: 'start'; ref: string }
  | {
      at: number;
      action: 'reschedule';
      ref: string;
      notBefore: number;
      resources?: string[];
      duration?: number;
    }
  | { at: number; action: 'cancel'; ref: string }
  | { at: number; action: 'complete'; ref: string }
  | { at: number; action: 'fault'; fault: FaultSpec };

export const STEP_ACTIONS = ['schedule', 'start', 'reschedule', 'cancel', 'complete', 'fault'] as const;

export const DEFAULT_STARTED_FOR: Record<string, number> = {
  Freeze: 60,
  Reboot: 300,
  Redeploy: 600,
  Preempt: 120,
  Terminate: 120,
};

export const DEFAULT_DESCRIPTION: Record<string, string> = {
  Freeze: 'Virtual machine is being paused because of a memory-preserving Live Migration operation.',
  Reboot: 'Virtual machine is going to be restarted as requested by authorized user.',
  Redeploy: 'Virtual machine is going to be moved to a different host because of a hardware issue.',
  Preempt: 'Virtual machine is being evicted (Spot).',
  Terminate: 'Virtual machine is going to be deleted as requested by authorized user.',
};

/** Parses and validates a scenario; errors name the offending field (`scenario.steps[2].event.type`). */
export function parseScenario(value: unknown, origin = 'scenario'): Scenario {
  const root = expectObject(value, origin);
  rejectUnknownKeys(
    root,
    ['$schema', 'name', 'description', 'speed', 'after', 'loopPeriod', 'steps'],
    origin,
  );
  const name = expectString(root.name, `${origin}.name`, { nonEmpty: true });
  const description = optionalString(root.description, `${origin}.description`) ?? '';
  const speed = optionalNumber(root.speed, `${origin}.speed`, { min: 0.001, max: 1_000_000 });
  const after =
    root.after === undefined
      ? undefined
      : expectOneOf(root.after, ['stay', 'loop'] as const, `${origin}.after`);
  const loopPeriod = optionalNumber(root.loopPeriod, `${origin}.loopPeriod`, { min: 1, unit: 'seconds' });
  if (!Array.isArray(root.steps)) {
    throw new ValidationError(`${origin}.steps`, `expected an array of steps, got ${describe(root.steps)}`);
  }
  const steps = root.steps.map((s, i) => parseStep(s, `${origin}.steps[${i}]`));
  // Refs must be declared (schedule/start with an event) before they are used, in time order.
  const order = steps.map((s, i) => ({ s, i })).sort((a, b) => a.s.at - b.s.at || a.i - b.i);
  const declared = new Set<string>();
  for (const { s, i } of order) {
    const path = `${origin}.steps[${i}]`;
    if ('event' in s) {
      if (declared.has(s.event.ref)) {
        throw new ValidationError(
          `${path}.event.ref`,
          `event ref ${JSON.stringify(s.event.ref)} is declared twice`,
        );
      }
      declared.add(s.event.ref);
    } else if ('ref' in s && !declared.has(s.ref)) {
      throw new ValidationError(
        `${path}.ref`,
        `no event with ref ${JSON.stringify(s.ref)} is declared by an earlier schedule/start step`,
      );
    }
  }
  const lastAt = order.length === 0 ? 0 : (order[order.length - 1]?.s.at ?? 0);
  if (loopPeriod !== undefined && loopPeriod < lastAt) {
    throw new ValidationError(
      `${origin}.loopPeriod`,
      `must be ≥ the last step's time (${lastAt} s), got ${loopPeriod}`,
    );
  }
  const scenario: Scenario = { name, description, steps: order.map((o) => o.s) };
  if (speed !== undefined) scenario.speed = speed;
  if (after !== undefined) scenario.after = after;
  if (loopPeriod !== undefined) scenario.loopPeriod = loopPeriod;
  return scenario;
}

function parseResources(value: unknown, path: string): string[] | undefined {
  if (value === undefined) return undefined;
  if (!Array.isArray(value))
    throw new ValidationError(path, `expected an array of VM names, got ${describe(value)}`);
  return value.map((r, i) => {
    const s = expectString(r, `${path}[${i}]`, { nonEmpty: true });
    if (s.startsWith('$') && s !== '$self' && !/^\$peer:[A-Za-z0-9-]+$/.test(s)) {
      throw new ValidationError(
        `${path}[${i}]`,
        `unknown placeholder ${JSON.stringify(s)} (use "$self" or "$peer:N")`,
      );
    }
    return s;
  });
}

/** Parses an event declaration; `needsNotBefore` for events that appear Scheduled. */
export function parseEvent(value: unknown, path: string, needsNotBefore: boolean): EventSpec {
  const obj = expectObject(value, path);
  rejectUnknownKeys(
    obj,
    [
      'ref',
      'eventId',
      'type',
      'resources',
      'notBefore',
      'duration',
      'source',
      'description',
      'resourceType',
      'startedFor',
      'autoStart',
    ],
    path,
  );
  const event: EventSpec = {
    ref: expectString(obj.ref, `${path}.ref`, { nonEmpty: true }),
    type: expectString(obj.type, `${path}.type`, { nonEmpty: true }),
  };
  const eventId = optionalString(obj.eventId, `${path}.eventId`, { nonEmpty: true });
  if (eventId !== undefined) event.eventId = eventId;
  const resources = parseResources(obj.resources, `${path}.resources`);
  if (resources !== undefined) event.resources = resources;
  if (needsNotBefore) {
    event.notBefore = expectNumber(obj.notBefore, `${path}.notBefore`, { min: 0, unit: 'seconds of notice' });
  } else if (obj.notBefore !== undefined) {
    throw new ValidationError(`${path}.notBefore`, 'an event that appears Started has no NotBefore');
  }
  const duration = optionalNumber(obj.duration, `${path}.duration`, { integer: true, min: -1 });
  if (duration !== undefined) event.duration = duration;
  const source = optionalString(obj.source, `${path}.source`, { nonEmpty: true });
  if (source !== undefined) event.source = source;
  const description = optionalString(obj.description, `${path}.description`);
  if (description !== undefined) event.description = description;
  const resourceType = optionalString(obj.resourceType, `${path}.resourceType`, { nonEmpty: true });
  if (resourceType !== undefined) event.resourceType = resourceType;
  if (obj.startedFor === null) event.startedFor = null;
  else {
    const startedFor = optionalNumber(obj.startedFor, `${path}.startedFor`, { min: 0, unit: 'seconds' });
    if (startedFor !== undefined) event.startedFor = startedFor;
  }
  const autoStart = optionalBoolean(obj.autoStart, `${path}.autoStart`);
  if (autoStart !== undefined) event.autoStart = autoStart;
  return event;
}

/** Parses one step (also used by the control API, where `at` is absent and means "now"). */
export function parseStep(value: unknown, path: string, opts: { requireAt?: boolean } = {}): ScenarioStep {
  const obj = expectObject(value, path);
  const at =
    opts.requireAt === false && obj.at === undefined
      ? 0
      : expectNumber(obj.at, `${path}.at`, { min: 0, unit: 'seconds' });
  const action = expectOneOf(obj.action, STEP_ACTIONS, `${path}.action`);
  switch (action) {
    case 'schedule':
      rejectUnknownKeys(obj, ['at', 'action', 'event'], path);
      return { at, action, event: parseEvent(obj.event, `${path}.event`, true) };
    case 'start':
      if (obj.event !== undefined) {
        rejectUnknownKeys(obj, ['at', 'action', 'event'], path);
        return { at, action, event: parseEvent(obj.event, `${path}.event`, false) };
      }
      rejectUnknownKeys(obj, ['at', 'action', 'ref'], path);
      return { at, action, ref: expectString(obj.ref, `${path}.ref`, { nonEmpty: true }) };
    case 'reschedule': {
      rejectUnknownKeys(obj, ['at', 'action', 'ref', 'notBefore', 'resources', 'duration'], path);
      const step: ScenarioStep = {
        at,
        action,
        ref: expectString(obj.ref, `${path}.ref`, { nonEmpty: true }),
        notBefore: expectNumber(obj.notBefore, `${path}.notBefore`, { min: 0, unit: 'seconds of notice' }),
      };
      const resources = parseResources(obj.resources, `${path}.resources`);
      if (resources !== undefined) step.resources = resources;
      const duration = optionalNumber(obj.duration, `${path}.duration`, { integer: true, min: -1 });
      if (duration !== undefined) step.duration = duration;
      return step;
    }
    case 'cancel':
    case 'complete':
      rejectUnknownKeys(obj, ['at', 'action', 'ref'], path);
      return { at, action, ref: expectString(obj.ref, `${path}.ref`, { nonEmpty: true }) };
    case 'fault':
      rejectUnknownKeys(obj, ['at', 'action', 'fault'], path);
      return { at, action, fault: parseFault(obj.fault, `${path}.fault`) };
  }
}

/** Reads and validates a scenario file; errors start with the file name. */
export async function loadScenarioFile(file: string): Promise<Scenario> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    throw new Error(`cannot read scenario file ${file}: ${(err as Error).message}`, { cause: err });
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    throw new Error(`scenario file ${file} is not valid JSON: ${(err as Error).message}`, { cause: err });
  }
  try {
    return parseScenario(json, 'scenario');
  } catch (err) {
    if (err instanceof ValidationError)
      throw new Error(`scenario file ${file}: ${err.message}`, { cause: err });
    throw err;
  }
}
