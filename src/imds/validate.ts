import { ImdsError } from './errors.js';
import type { InstanceCompute, ScheduledEvent, ScheduledEventsDocument } from './types.js';

/**
 * Validation of IMDS bodies. Strict about what the pipeline relies on (a truncated or
 * malformed document must never be mistaken for "no events", which would cancel everything),
 * tolerant of what IMDS may add later: unknown fields are ignored and unknown enum values
 * (EventType, EventStatus) pass through as strings.
 */

function invalid(path: string, problem: string): ImdsError {
  return new ImdsError(`malformed scheduled events document: ${path} ${problem}`, {
    kind: 'document',
    retryable: true,
  });
}

type Json = Record<string, unknown>;

function isObject(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function requiredString(o: Json, key: string, path: string): string {
  const v = o[key];
  if (typeof v !== 'string' || v.length === 0) throw invalid(`${path}.${key}`, 'must be a non-empty string');
  return v;
}

function optionalString(o: Json, key: string, path: string): string {
  const v = o[key];
  if (v === undefined || v === null) return '';
  if (typeof v !== 'string') throw invalid(`${path}.${key}`, 'must be a string');
  return v;
}

function parseEvent(raw: unknown, path: string): ScheduledEvent {
  if (!isObject(raw)) throw invalid(path, 'must be an object');
  const resources = raw.Resources ?? [];
  if (!Array.isArray(resources) || resources.some((r) => typeof r !== 'string')) {
    throw invalid(`${path}.Resources`, 'must be an array of strings');
  }
  const duration = raw.DurationInSeconds;
  if (duration !== undefined && duration !== null && !Number.isInteger(duration)) {
    throw invalid(`${path}.DurationInSeconds`, 'must be an integer');
  }
  return {
    EventId: requiredString(raw, 'EventId', path),
    EventType: requiredString(raw, 'EventType', path),
    ResourceType: optionalString(raw, 'ResourceType', path),
    Resources: resources as string[],
    EventStatus: requiredString(raw, 'EventStatus', path),
    NotBefore: optionalString(raw, 'NotBefore', path).trim(),
    Description: optionalString(raw, 'Description', path),
    EventSource: optionalString(raw, 'EventSource', path),
    DurationInSeconds: typeof duration === 'number' ? duration : -1,
  };
}

/** Parses and validates a scheduled events body; throws ImdsError(kind 'document') with the bad field. */
export function parseScheduledEventsDocument(body: string): ScheduledEventsDocument {
  let raw: unknown;
  try {
    raw = JSON.parse(body);
  } catch (err) {
    throw new ImdsError(
      `malformed scheduled events document: not JSON (${(err as Error).message}; ${body.length} bytes)`,
      { kind: 'document', retryable: true, cause: err },
    );
  }
  if (!isObject(raw)) throw invalid('document', 'must be a JSON object');
  const incarnation = raw.DocumentIncarnation;
  if (!Number.isSafeInteger(incarnation)) throw invalid('DocumentIncarnation', 'must be an integer');
  if (!Array.isArray(raw.Events)) throw invalid('Events', 'must be an array');
  return {
    DocumentIncarnation: incarnation as number,
    Events: raw.Events.map((e, i) => parseEvent(e, `Events[${i}]`)),
  };
}

/** Parses `/metadata/instance` (or its `compute` part); every missing value becomes ''. */
export function parseInstanceCompute(body: string): InstanceCompute {
  let raw: unknown;
  try {
    raw = JSON.parse(body);
  } catch (err) {
    throw new ImdsError(`malformed instance metadata: not JSON (${(err as Error).message})`, {
      kind: 'document',
      retryable: true,
      cause: err,
    });
  }
  if (!isObject(raw))
    throw new ImdsError('malformed instance metadata: not an object', { kind: 'document', retryable: true });
  const compute = isObject(raw.compute) ? raw.compute : raw;
  const str = (v: unknown) => (typeof v === 'string' ? v : '');
  const osProfile = isObject(compute.osProfile) ? compute.osProfile : {};
  return {
    name: str(compute.name),
    vmId: str(compute.vmId),
    resourceId: str(compute.resourceId),
    subscriptionId: str(compute.subscriptionId),
    resourceGroupName: str(compute.resourceGroupName),
    location: str(compute.location),
    zone: str(compute.zone),
    vmSize: str(compute.vmSize),
    osType: str(compute.osType),
    priority: str(compute.priority),
    evictionPolicy: str(compute.evictionPolicy),
    vmScaleSetName: str(compute.vmScaleSetName),
    computerName: str(osProfile.computerName),
  };
}
