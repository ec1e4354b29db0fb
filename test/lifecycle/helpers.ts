/** Shared builders for the lifecycle tests: IMDS documents, a pipeline-like harness, schema checks. */
import { readFileSync } from 'node:fs';
import type { ScheduledEvent, ScheduledEventsDocument } from '../../src/imds/types.js';
import { EmittedKeys, emittedKeyOf } from '../../src/lifecycle/emitted-keys.js';
import { buildLifecycleRecord } from '../../src/lifecycle/enrich.js';
import type { LifecycleRecord, ShipperRecord, VmIdentity } from '../../src/lifecycle/record.js';
import {
  initialTrackerState,
  type ObserveResult,
  observeDocument,
  type TrackerState,
} from '../../src/lifecycle/tracker.js';
import { assertValidRecord } from '../fixtures/record-schema.js';
import { SHIPPER, VM } from '../fixtures/vm-identity.js';

export { SHIPPER, VM };

export const GAP_MS = 10_000;
export const T0 = Date.UTC(2022, 3, 11, 22, 10, 0);

export function ev(over: Partial<ScheduledEvent> = {}): ScheduledEvent {
  return {
    EventId: 'C7061BAC-AFDC-4513-B24B-AA5F13A16123',
    EventType: 'Freeze',
    ResourceType: 'VirtualMachine',
    Resources: ['WestNO_0', 'WestNO_1'],
    EventStatus: 'Scheduled',
    NotBefore: 'Mon, 11 Apr 2022 22:26:58 GMT',
    Description: 'Virtual machine is being paused because of a memory-preserving Live Migration operation.',
    EventSource: 'Platform',
    DurationInSeconds: 5,
    ...over,
  };
}

export function doc(incarnation: number, ...events: ScheduledEvent[]): ScheduledEventsDocument {
  return { DocumentIncarnation: incarnation, Events: events };
}

/** Freezes an object graph, so that any mutation by the code under test throws (ESM is strict). */
export function deepFreeze<T>(x: T): T {
  if (typeof x === 'object' && x !== null && !Object.isFrozen(x)) {
    Object.freeze(x);
    for (const v of Object.values(x)) deepFreeze(v);
  }
  return x;
}

/** observeDocument with frozen inputs: the tracker must never mutate its state or the document. */
export function observe(state: TrackerState, d: ScheduledEventsDocument, at: number): ObserveResult {
  return observeDocument(deepFreeze(state), deepFreeze(d), at, { gapThresholdMs: GAP_MS });
}

/** Feeds documents one second apart from T0 and collects (phase, eventId) of every transition. */
export function run(docs: ScheduledEventsDocument[], start: TrackerState = initialTrackerState()) {
  let state = start;
  const phases: string[] = [];
  docs.forEach((d, i) => {
    const r = observe(state, d, T0 + i * 1000);
    for (const t of r.transitions) phases.push(`${t.phase}:${t.event.EventId}`);
    state = r.state;
  });
  return { state, phases };
}

export const committedSchema: unknown = JSON.parse(
  readFileSync(new URL('../../schema/record.v1.schema.json', import.meta.url), 'utf8'),
);

/** Asserts that a record is valid against the committed JSON Schema, as it goes on the wire. */
export function expectValidRecord(record: ShipperRecord): void {
  assertValidRecord(JSON.parse(JSON.stringify(record)));
}

/**
 * What the pipeline does per document: observe, drop transitions already emitted, build records
 * (each one validated against the schema), remember their keys, commit the state.
 */
export class Harness {
  state: TrackerState;
  readonly keys: EmittedKeys;
  readonly records: LifecycleRecord[] = [];

  constructor(
    state: TrackerState = initialTrackerState(),
    keys: EmittedKeys = new EmittedKeys({ now: () => T0 }),
  ) {
    this.state = state;
    this.keys = keys;
  }

  feed(d: ScheduledEventsDocument, at: number, vm: VmIdentity | null = VM): LifecycleRecord[] {
    const r = observe(this.state, d, at);
    const fresh = r.transitions.filter((t) => !this.keys.has(emittedKeyOf(t)));
    const built = fresh.map((t) => buildLifecycleRecord(t, vm, SHIPPER));
    for (const rec of built) expectValidRecord(rec);
    for (const t of fresh) this.keys.add(emittedKeyOf(t), t.observedAt);
    this.state = r.state;
    this.records.push(...built);
    return built;
  }
}
