import { ImdsError } from './errors.js';
import type { InstanceCompute, ScheduledEvent, ScheduledEventsDocument } from './types.js';

/**
 * Validation of IMDS bodies. Strict about what the pipeline relies on: the document's shape,
 * DocumentIncarnation, the Events list, each EventId and Resources (a truncated or malformed
 * document must never be mistaken for "no events", which would cancel everything). Tolerant of
 * everything else, so one odd field cannot hide a Preempt in the same document: unknown fields are
 * ignored, unknown enum values (EventType, EventStatus) pass through, a mistyped text field
 * becomes text or '', a mistyped duration -1.
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

/**
 * Text fields the pipeline only carries along: a wrong type must not blind the shipper to every
 * other event of the document, so numbers and booleans become text and anything else ''.
 */
function lenientString(o: Json, key: string): string {
  const v = o[key];
  if (typeof v === 'string') return v;
  if (typeof v === 'number' || typeof v === 'boolean') return String(v);
  return '';
}

/** -1 (unknown) unless an integer or an integer in a string. */
function lenientDuration(v: unknown): number {
  if (typeof v === 'number' && Number.isInteger(v)) return v;
  if (typeof v === 'string' && /^\s*-?\d+\s*$/.test(v)) return Number(v);
  return -1;
}

function parseEvent(raw: unknown, path: string): ScheduledEvent {
  if (!isObject(raw)) throw invalid(path, 'must be an object');
  // Resources decides whether the event is this VM's: a lone name is accepted as a list of one,
  // but a list with non-names is rejected rather than guessed.
  const rawResources = raw.Resources ?? [];
  const resources = typeof rawResources === 'string' ? [rawResources] : rawResources;
  if (!Array.isArray(resources) || resources.some((r) => typeof r !== 'string')) {
    throw invalid(`${path}.Resources`, 'must be an array of strings');
  }
  return {
    EventId: requiredString(raw, 'EventId', path),
    EventType: lenientString(raw, 'EventType'),
    ResourceType: lenientString(raw, 'ResourceType'),
    Resources: resources as string[],
    EventStatus: lenientString(raw, 'EventStatus'),
    NotBefore: lenientString(raw, 'NotBefore').trim(),
    Description: lenientString(raw, 'Description'),
    EventSource: lenientString(raw, 'EventSource'),
    DurationInSeconds: lenientDuration(raw.DurationInSeconds),
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
