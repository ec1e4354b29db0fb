/**
 * The tracker: a pure, synchronous state machine from IMDS Scheduled Events documents to
 * lifecycle transitions. No I/O, no clock reads (time is passed in), no mutation of its inputs:
 * `observeDocument` returns a new state that the caller commits only once the records derived
 * from the transitions are durably spooled. Rules and decisions: docs/lifecycle.md.
 */
import type { ScheduledEvent, ScheduledEventsDocument } from '../imds/types.js';
import { parseNotBefore } from './not-before.js';
import type { LifecyclePhase } from './record.js';

export const TRACKER_STATE_VERSION = 1 as const;

/**
 * Default for `gapThresholdMs`: longer than one poll interval plus an IMDS request timeout and a
 * retry or two, so a slow poll is not a gap, but short enough that a restart or an outage is.
 */
export const DEFAULT_GAP_THRESHOLD_MS = 10_000;

/** The phase of an event still present in the document: the last phase emitted for it. */
export type ActivePhase = 'Scheduled' | 'Rescheduled' | 'Started';

export interface TrackedEvent {
  /** The last version of the event seen in a document, as IMDS gave it. */
  event: ScheduledEvent;
  phase: ActivePhase;
  /** `event.NotBefore` normalised to ISO 8601 UTC with ms; null when blank or unparseable. */
  notBefore: string | null;
}

/** JSON-serialisable tracker state. */
export interface TrackerState {
  version: typeof TRACKER_STATE_VERSION;
  /** observedAt (epoch ms) of the last document; null before the first. */
  lastObservedAt: number | null;
  /** DocumentIncarnation of the last document; null before the first. */
  lastIncarnation: number | null;
  /** Events of the last document, keyed by lower-cased EventId. */
  events: Record<string, TrackedEvent>;
}

export interface Transition {
  phase: LifecyclePhase;
  /** True for an ending seen only across an observation gap. */
  inferred: boolean;
  /** Length of that gap in whole seconds; 0 when not inferred. */
  gapSeconds: number;
  /** The last known version of the event (for Completed/Canceled: from the last document showing it). */
  event: ScheduledEvent;
  /** ISO 8601 UTC with ms, or null. */
  notBefore: string | null;
  /** epoch ms of the document that showed the transition. */
  observedAt: number;
  documentIncarnation: number;
}

export type TrackerWarningCode =
  'unknown-event-status' | 'unknown-event-type' | 'unparseable-not-before' | 'duplicate-event-id';

/**
 * Something the caller should log (once per code and value, at warn): never an error. Raised
 * only when an event first appears or the offending field changes, not on every poll.
 */
export interface TrackerWarning {
  code: TrackerWarningCode;
  eventId: string;
  /** The offending value, verbatim. */
  value: string;
}

export interface ObserveOptions {
  /** observedAt − lastObservedAt beyond this (either direction) is an observation gap. */
  gapThresholdMs: number;
}

export interface ObserveResult {
  state: TrackerState;
  transitions: readonly Transition[];
  warnings: readonly TrackerWarning[];
}

export const KNOWN_EVENT_TYPES: readonly string[] = ['Freeze', 'Reboot', 'Redeploy', 'Preempt', 'Terminate'];

const NO_TRANSITIONS: readonly Transition[] = Object.freeze([]);
const NO_WARNINGS: readonly TrackerWarning[] = Object.freeze([]);

/** A prototype-less map, so that no EventId (not even `__proto__`) can collide with Object's keys. */
function emptyEvents(): Record<string, TrackedEvent> {
  return Object.create(null) as Record<string, TrackedEvent>;
}

export function initialTrackerState(): TrackerState {
  return {
    version: TRACKER_STATE_VERSION,
    lastObservedAt: null,
    lastIncarnation: null,
    events: emptyEvents(),
  };
}

function sameIgnoreCase(a: string, b: string): boolean {
  return a === b || (a.length === b.length && a.toLowerCase() === b.toLowerCase());
}

type StatusClass = 'scheduled' | 'started' | 'unknown';

function statusClass(status: string): StatusClass {
  if (sameIgnoreCase(status, 'Scheduled')) return 'scheduled';
  if (sameIgnoreCase(status, 'Started')) return 'started';
  return 'unknown';
}

function isKnownType(type: string): boolean {
  for (const known of KNOWN_EVENT_TYPES) if (sameIgnoreCase(type, known)) return true;
  return false;
}

/** Same affected VMs, ignoring order and case (IMDS gives names; Azure names are case-insensitive). */
function sameResources(a: readonly string[], b: readonly string[]): boolean {
  if (a.length !== b.length) return false;
  let inOrder = true;
  for (let i = 0; i < a.length; i++) {
    if (!sameIgnoreCase(a[i] as string, b[i] as string)) {
      inOrder = false;
      break;
    }
  }
  if (inOrder) return true;
  const left = a.map((r) => r.toLowerCase()).sort();
  const right = b.map((r) => r.toLowerCase()).sort();
  return left.every((r, i) => r === right[i]);
}

function sameEvent(a: ScheduledEvent, b: ScheduledEvent): boolean {
  return (
    a.EventId === b.EventId &&
    a.EventType === b.EventType &&
    a.ResourceType === b.ResourceType &&
    a.EventStatus === b.EventStatus &&
    a.NotBefore === b.NotBefore &&
    a.Description === b.Description &&
    a.EventSource === b.EventSource &&
    a.DurationInSeconds === b.DurationInSeconds &&
    a.Resources.length === b.Resources.length &&
    a.Resources.every((r, i) => r === b.Resources[i])
  );
}

function copyEvent(e: ScheduledEvent): ScheduledEvent {
  return {
    EventId: e.EventId,
    EventType: e.EventType,
    ResourceType: e.ResourceType,
    Resources: e.Resources.slice(),
    EventStatus: e.EventStatus,
    NotBefore: e.NotBefore,
    Description: e.Description,
    EventSource: e.EventSource,
    DurationInSeconds: e.DurationInSeconds,
  };
}

/**
 * Feeds one validated document observed at `observedAt` (epoch ms). Returns the new state, the
 * transitions it shows (at most one per event) and warnings; `state` is not modified.
 */
export function observeDocument(
  state: TrackerState,
  doc: ScheduledEventsDocument,
  observedAt: number,
  options: ObserveOptions,
): ObserveResult {
  const last = state.lastObservedAt;
  const delta = last === null ? 0 : observedAt - last;
  const gap = delta > options.gapThresholdMs || -delta > options.gapThresholdMs;

  // Fast path: while watched continuously, the same incarnation is the same document.
  if (!gap && last !== null && doc.DocumentIncarnation === state.lastIncarnation) {
    return {
      state:
        observedAt === last
          ? state
          : {
              version: TRACKER_STATE_VERSION,
              lastObservedAt: observedAt,
              lastIncarnation: state.lastIncarnation,
              events: state.events,
            },
      transitions: NO_TRANSITIONS,
      warnings: NO_WARNINGS,
    };
  }

  const incarnation = doc.DocumentIncarnation;
  const prevEvents = state.events;
  const nextEvents = emptyEvents();
  const present: Transition[] = [];
  const ended: Transition[] = [];
  const warnings: TrackerWarning[] = [];
  const warn = (code: TrackerWarningCode, eventId: string, value: string) => {
    warnings.push({ code, eventId, value });
  };

  for (const ev of doc.Events) {
    const key = ev.EventId.toLowerCase();
    if (Object.hasOwn(nextEvents, key)) {
      warn('duplicate-event-id', ev.EventId, ev.EventId);
      continue;
    }
    const prev = Object.hasOwn(prevEvents, key) ? prevEvents[key] : undefined;
    if (prev !== undefined && sameEvent(prev.event, ev)) {
      nextEvents[key] = prev;
      continue;
    }

    const cls = statusClass(ev.EventStatus);
    // The same raw NotBefore parses to what is already tracked (and was warned about, if bad).
    const nb =
      prev !== undefined && prev.event.NotBefore === ev.NotBefore
        ? { ok: true, iso: prev.notBefore }
        : parseNotBefore(ev.NotBefore);
    if (prev === undefined || prev.event.EventStatus !== ev.EventStatus) {
      if (cls === 'unknown') warn('unknown-event-status', ev.EventId, ev.EventStatus);
    }
    if (prev === undefined || prev.event.EventType !== ev.EventType) {
      if (!isKnownType(ev.EventType)) warn('unknown-event-type', ev.EventId, ev.EventType);
    }
    if (!nb.ok && (prev === undefined || prev.event.NotBefore !== ev.NotBefore)) {
      warn('unparseable-not-before', ev.EventId, ev.NotBefore);
    }

    const event = copyEvent(ev);
    let phase: ActivePhase;
    let emit: LifecyclePhase | null = null;
    if (prev === undefined) {
      // First seen: Started directly is a hardware failure (or a missed Scheduled); anything
      // else, including an unknown status, is an announcement.
      phase = cls === 'started' ? 'Started' : 'Scheduled';
      emit = phase;
    } else if (prev.phase === 'Started') {
      // Once started, stays started until it leaves the document; later changes (more short
      // impacts, a status IMDS never sends) only update the last known version.
      phase = 'Started';
    } else if (cls === 'started') {
      phase = 'Started';
      emit = 'Started';
    } else if (
      nb.iso !== prev.notBefore ||
      ev.DurationInSeconds !== prev.event.DurationInSeconds ||
      !sameResources(ev.Resources, prev.event.Resources)
    ) {
      phase = 'Rescheduled';
      emit = 'Rescheduled';
    } else {
      phase = prev.phase;
    }

    nextEvents[key] = { event, phase, notBefore: nb.iso };
    if (emit !== null) {
      present.push({
        phase: emit,
        inferred: false,
        gapSeconds: 0,
        event,
        notBefore: nb.iso,
        observedAt,
        documentIncarnation: incarnation,
      });
    }
  }

  const gapSeconds = gap ? Math.round(Math.abs(delta) / 1000) : 0;
  for (const key in prevEvents) {
    if (!Object.hasOwn(prevEvents, key) || Object.hasOwn(nextEvents, key)) continue;
    const gone = prevEvents[key] as TrackedEvent;
    // Canceled only when we watched it leave while it was plainly Scheduled; an unknown
    // status might have been in progress, and across a gap it may have run: Completed.
    const canceled = !gap && gone.phase !== 'Started' && statusClass(gone.event.EventStatus) === 'scheduled';
    ended.push({
      phase: canceled ? 'Canceled' : 'Completed',
      inferred: gap,
      gapSeconds,
      event: gone.event,
      notBefore: gone.notBefore,
      observedAt,
      documentIncarnation: incarnation,
    });
  }

  const transitions =
    ended.length === 0 ? (present.length === 0 ? NO_TRANSITIONS : present) : ended.concat(present);
  return {
    state: {
      version: TRACKER_STATE_VERSION,
      lastObservedAt: observedAt,
      lastIncarnation: incarnation,
      events: nextEvents,
    },
    transitions,
    warnings: warnings.length === 0 ? NO_WARNINGS : warnings,
  };
}

/** Number of events in the last document (for heartbeats). */
export function activeEventCount(state: TrackerState): number {
  let n = 0;
  for (const key in state.events) if (Object.hasOwn(state.events, key)) n++;
  return n;
}

const ACTIVE_PHASES: readonly string[] = ['Scheduled', 'Rescheduled', 'Started'];

function isRecord(x: unknown): x is Record<string, unknown> {
  return typeof x === 'object' && x !== null && !Array.isArray(x);
}

function isScheduledEvent(x: unknown): x is ScheduledEvent {
  if (!isRecord(x)) return false;
  for (const f of [
    'EventId',
    'EventType',
    'ResourceType',
    'EventStatus',
    'NotBefore',
    'Description',
    'EventSource',
  ]) {
    if (typeof x[f] !== 'string') return false;
  }
  return (
    Array.isArray(x.Resources) &&
    x.Resources.every((r) => typeof r === 'string') &&
    typeof x.DurationInSeconds === 'number' &&
    Number.isFinite(x.DurationInSeconds)
  );
}

function isFiniteOrNull(x: unknown): x is number | null {
  return x === null || (typeof x === 'number' && Number.isFinite(x));
}

/**
 * Validates a tracker state read back from disk (or anywhere untrusted). Returns null when it is
 * not a version-1 state, so that a damaged file is treated like a missing one.
 */
export function parseTrackerState(x: unknown): TrackerState | null {
  if (!isRecord(x) || x.version !== TRACKER_STATE_VERSION) return null;
  if (!isFiniteOrNull(x.lastObservedAt) || !isFiniteOrNull(x.lastIncarnation)) return null;
  if (!isRecord(x.events)) return null;
  const events = emptyEvents();
  for (const [key, value] of Object.entries(x.events)) {
    if (!isRecord(value) || !isScheduledEvent(value.event)) return null;
    if (typeof value.phase !== 'string' || !ACTIVE_PHASES.includes(value.phase)) return null;
    if (value.notBefore !== null && typeof value.notBefore !== 'string') return null;
    if (key !== value.event.EventId.toLowerCase()) return null;
    events[key] = {
      event: copyEvent(value.event),
      phase: value.phase as ActivePhase,
      notBefore: value.notBefore,
    };
  }
  return {
    version: TRACKER_STATE_VERSION,
    lastObservedAt: x.lastObservedAt,
    lastIncarnation: x.lastIncarnation,
    events,
  };
}
