import { createHash, randomUUID } from 'node:crypto';
import type { ScheduledEvent, ScheduledEventsDocument } from '../../imds/types.js';
import type { LifecyclePhase } from '../../lifecycle/record.js';
import type { Logger } from '../../observability/logger.js';
import type { Clock } from './clock.js';
import type { ActiveFault, FaultRoute, FaultSpec } from './faults.js';
import { peerName, type VmIdentity } from './identity.js';
import {
  DEFAULT_DESCRIPTION,
  DEFAULT_STARTED_FOR,
  type EventSpec,
  type EventStatus,
  type Scenario,
  type ScenarioStep,
} from './scenario.js';

export type NotBeforeFormat = 'rfc1123' | 'iso';

/** An event currently in the document. Times are epoch ms of the emulator clock. */
export interface EmulatedEvent {
  eventId: string;
  ref: string;
  type: string;
  resourceType: string;
  resources: string[];
  status: EventStatus;
  notBeforeMs: number | null;
  duration: number;
  source: string;
  description: string;
  /** Wall-clock ms (already scaled) the event stays Started; null = until removed by a step. */
  startedForMs: number | null;
  autoStart: boolean;
  appearedAtMs: number;
  startedAtMs: number | null;
  approved: boolean;
}

export type ChangeCause = 'scenario' | 'control' | 'approval' | 'notBefore' | 'startedFor' | 'load';

/** One change of the document, as the emulator made it (ground truth for tests). */
export interface HistoryEntry {
  at: string;
  atMs: number;
  change: 'scheduled' | 'started' | 'rescheduled' | 'canceled' | 'completed';
  eventId: string;
  ref: string;
  eventType: string;
  resources: string[];
  affectsThisVm: boolean;
  cause: ChangeCause;
  incarnation: number;
}

/**
 * The lifecycle phase a shipper is expected to report for each change the emulator made: what
 * tests and the demo compare the shipper's records with.
 */
export const LIFECYCLE_PHASE_OF_CHANGE: Readonly<Record<HistoryEntry['change'], LifecyclePhase>> = {
  scheduled: 'Scheduled',
  rescheduled: 'Rescheduled',
  started: 'Started',
  canceled: 'Canceled',
  completed: 'Completed',
};

export interface ApprovalRecord {
  at: string;
  atMs: number;
  client: string;
  eventIds: string[];
  outcome: 'accepted' | 'rejected';
  /** For accepted approvals: what each id was before (ended = known but no longer in the document). */
  effects: { eventId: string; before: EventStatus | 'ended' }[];
  reason?: string;
}

export interface ModelOptions {
  clock: Clock;
  identity: VmIdentity;
  speed: number;
  after?: 'stay' | 'loop';
  notBeforeFormat?: NotBeforeFormat;
  /** Seed of generated EventIds (default random, so a restarted emulator never reuses ids). */
  seed?: string;
  logger?: Logger;
  historyLimit?: number;
}

interface Timeline {
  scenario: Scenario;
  startMs: number;
  iteration: number;
  nextStep: number;
  after: 'stay' | 'loop';
  run: number;
}

/** API-version gates of scheduled-events fields. */
function fieldsFor(apiVersion: string): { description: boolean; source: boolean; duration: boolean } {
  return {
    description: apiVersion >= '2019-04-01',
    source: apiVersion >= '2019-08-01',
    duration: apiVersion >= '2020-07-01',
  };
}

/** A strong ETag of a response body. */
export function etagOf(text: string): string {
  return `"${createHash('sha1').update(text).digest('base64url').slice(0, 22)}"`;
}

export function formatNotBefore(ms: number, format: NotBeforeFormat): string {
  const d = new Date(Math.floor(ms / 1000) * 1000);
  return format === 'iso' ? d.toISOString().replace('.000Z', 'Z') : d.toUTCString();
}

/**
 * The scheduled-events state of the emulated VM. It is evaluated lazily: every read first applies
 * whatever became due on the clock (scenario steps, automatic starts at NotBefore, ends after
 * `startedFor`), in time order, so an idle emulator costs nothing and a manual clock can jump
 * hours ahead in one call.
 */
export class ScheduledEventsModel {
  readonly identity: VmIdentity;
  private readonly clock: Clock;
  private offsetMs = 0;
  private speedFactor: number;
  private defaultAfter: 'stay' | 'loop';
  readonly notBeforeFormat: NotBeforeFormat;
  private readonly seed: string;
  private readonly logger: Logger | undefined;
  private readonly historyLimit: number;

  private readonly events = new Map<string, EmulatedEvent>(); // key: lower-case EventId
  private readonly knownIds = new Set<string>(); // lower-case ids ever served
  private refs = new Map<string, string>(); // ref -> lower-case EventId (current scenario iteration)
  private timeline: Timeline | null = null;
  private runs = 0;
  private injected = 0;
  private incarnationValue = 1;
  private readonly historyLog: HistoryEntry[] = [];
  private readonly approvalLog: ApprovalRecord[] = [];
  private readonly faultQueue: ActiveFault[] = [];
  private faultSeq = 0;
  private readonly docCache = new Map<string, { text: string; etag: string }>();

  constructor(options: ModelOptions) {
    this.clock = options.clock;
    this.identity = options.identity;
    if (!(options.speed > 0)) throw new RangeError(`speed must be > 0, got ${options.speed}`);
    this.speedFactor = options.speed;
    this.defaultAfter = options.after ?? 'stay';
    this.notBeforeFormat = options.notBeforeFormat ?? 'rfc1123';
    this.seed = options.seed ?? randomUUID();
    this.logger = options.logger;
    this.historyLimit = options.historyLimit ?? 10_000;
  }

  /** Current time of the emulator: the clock plus every `advance`. */
  now(): number {
    return this.clock.now() + this.offsetMs;
  }

  get speed(): number {
    return this.speedFactor;
  }

  get incarnation(): number {
    this.sync();
    return this.incarnationValue;
  }

  get scenarioName(): string | null {
    return this.timeline?.scenario.name ?? null;
  }

  /** Scenario seconds → emulator milliseconds. */
  scale(seconds: number): number {
    return (seconds * 1000) / this.speedFactor;
  }

  /**
   * Starts a scenario at the current time. Events still in the document are removed first
   * (they end: a client sees them disappear), unless `keepEvents` is set.
   */
  loadScenario(
    scenario: Scenario,
    opts: { speed?: number; after?: 'stay' | 'loop'; keepEvents?: boolean } = {},
  ): void {
    this.sync();
    const speed = opts.speed ?? scenario.speed ?? this.speedFactor;
    if (!(speed > 0)) throw new RangeError(`speed must be > 0, got ${speed}`);
    this.speedFactor = speed;
    if (!opts.keepEvents) {
      const now = this.now();
      for (const ev of [...this.events.values()]) this.remove(ev, now, 'load');
    }
    this.runs += 1;
    this.refs = new Map();
    this.timeline = {
      scenario,
      startMs: this.now(),
      iteration: 0,
      nextStep: 0,
      after: opts.after ?? scenario.after ?? this.defaultAfter,
      run: this.runs,
    };
    this.logger?.info(
      { scenario: scenario.name, speed, after: this.timeline.after, steps: scenario.steps.length },
      'scenario loaded',
    );
    this.sync();
  }

  /** Applies one step now (control API); `at` is ignored. Returns the affected EventId, if any. */
  apply(step: ScenarioStep): string | null {
    this.sync();
    return this.applyStep(step, this.now(), 'control', null);
  }

  addFault(spec: FaultSpec): ActiveFault {
    const fault: ActiveFault = {
      id: ++this.faultSeq,
      spec: { ...spec, kind: spec.kind, route: spec.route ?? 'scheduledevents' },
      remaining: spec.kind === 'enrolment' ? 1 : (spec.count ?? 1),
    };
    this.faultQueue.push(fault);
    this.logger?.info({ fault: fault.spec, id: fault.id }, 'fault armed');
    return fault;
  }

  clearFaults(): void {
    this.faultQueue.length = 0;
  }

  faults(): ActiveFault[] {
    this.sync();
    return this.faultQueue.map((f) => ({ ...f, spec: { ...f.spec } }));
  }

  /** Takes the first armed fault that matches a request to `route`, consuming one of its uses. */
  takeFault(route: Exclude<FaultRoute, 'any'>): FaultSpec | null {
    this.sync();
    const index = this.faultQueue.findIndex((f) => f.spec.route === 'any' || f.spec.route === route);
    if (index < 0) return null;
    const fault = this.faultQueue[index] as ActiveFault;
    fault.remaining -= 1;
    if (fault.remaining <= 0) this.faultQueue.splice(index, 1);
    return fault.spec;
  }

  /** Moves emulator time forward by `ms` and applies what became due. */
  advance(ms: number): number {
    if (!Number.isFinite(ms) || ms < 0) throw new RangeError(`cannot advance time by ${ms} ms`);
    this.offsetMs += ms;
    this.sync();
    return this.now();
  }

  /** Moves emulator time to the next pending change (step, automatic start or end), if any. */
  advanceToNext(): number | null {
    this.sync();
    const next = this.nextChangeAt();
    if (next === null) return null;
    const now = this.now();
    if (next > now) this.advance(next - now);
    return next;
  }

  /** Time of the next pending change (epoch ms of the emulator clock), or null when nothing is pending. */
  nextChangeAt(): number | null {
    const candidates = this.pending();
    return candidates.length === 0 ? null : Math.min(...candidates.map((c) => c.at));
  }

  /** Serves the document for an api-version; returns the JSON text (cached per incarnation). */
  documentText(apiVersion: string): { text: string; etag: string; incarnation: number } {
    this.sync();
    const f = fieldsFor(apiVersion);
    const key = `${this.incarnationValue}|${f.description}|${f.source}|${f.duration}`;
    let cached = this.docCache.get(key);
    if (cached === undefined) {
      const text = JSON.stringify(this.buildDocument(apiVersion));
      cached = { text, etag: etagOf(text) };
      if (this.docCache.size > 16) this.docCache.clear();
      this.docCache.set(key, cached);
    }
    return { ...cached, incarnation: this.incarnationValue };
  }

  document(apiVersion = '2020-07-01'): ScheduledEventsDocument {
    return JSON.parse(this.documentText(apiVersion).text) as ScheduledEventsDocument;
  }

  currentEvents(): EmulatedEvent[] {
    this.sync();
    return [...this.events.values()].map((e) => ({ ...e, resources: [...e.resources] }));
  }

  /** The EventId currently bound to a scenario ref (or injected ref), if any. */
  eventIdOf(ref: string): string | null {
    const key = this.refs.get(ref);
    if (key === undefined) return null;
    return (
      this.events.get(key)?.eventId ??
      this.historyLog.findLast((h) => h.eventId.toLowerCase() === key)?.eventId ??
      null
    );
  }

  history(): HistoryEntry[] {
    this.sync();
    return [...this.historyLog];
  }

  approvals(): ApprovalRecord[] {
    return [...this.approvalLog];
  }

  /**
   * POST StartRequests. Every id must be one the emulator has served (current or ended), else
   * nothing is applied and the approval is rejected. Scheduled events start now; Started or
   * ended ones are left alone (still a success, as IMDS answers 200 for an approved id).
   */
  approve(eventIds: string[], client: string): ApprovalRecord {
    this.sync();
    const atMs = this.now();
    const at = new Date(atMs).toISOString();
    const unknown = eventIds.filter((id) => !this.knownIds.has(id.toLowerCase()));
    if (unknown.length > 0) {
      const record: ApprovalRecord = {
        at,
        atMs,
        client,
        eventIds,
        outcome: 'rejected',
        effects: [],
        reason: `unknown EventId ${unknown.join(', ')}`,
      };
      this.pushApproval(record);
      return record;
    }
    const effects: ApprovalRecord['effects'] = [];
    for (const id of eventIds) {
      const ev = this.events.get(id.toLowerCase());
      if (!ev) {
        effects.push({ eventId: id, before: 'ended' });
        continue;
      }
      effects.push({ eventId: ev.eventId, before: ev.status });
      ev.approved = true;
      if (ev.status === 'Scheduled') this.start(ev, atMs, 'approval');
    }
    const record: ApprovalRecord = { at, atMs, client, eventIds, outcome: 'accepted', effects };
    this.pushApproval(record);
    return record;
  }

  /** Forgets history, approvals and faults, and restarts the current scenario (if any) now. */
  reset(): void {
    this.historyLog.length = 0;
    this.approvalLog.length = 0;
    this.faultQueue.length = 0;
    const scenario = this.timeline?.scenario;
    if (scenario)
      this.loadScenario(scenario, { speed: this.speedFactor, after: this.timeline?.after ?? 'stay' });
    else {
      const now = this.now();
      for (const ev of [...this.events.values()]) this.remove(ev, now, 'load');
    }
  }

  // ---------------------------------------------------------------------------------------------

  private pushApproval(record: ApprovalRecord): void {
    this.approvalLog.push(record);
    if (this.approvalLog.length > this.historyLimit) this.approvalLog.shift();
    this.logger?.info(
      { approval: record },
      record.outcome === 'accepted' ? 'approval accepted' : 'approval rejected',
    );
  }

  private pending(): { at: number; kind: 'end' | 'start' | 'step' | 'loop'; ev?: EmulatedEvent }[] {
    const out: { at: number; kind: 'end' | 'start' | 'step' | 'loop'; ev?: EmulatedEvent }[] = [];
    for (const ev of this.events.values()) {
      if (ev.status === 'Started' && ev.startedForMs !== null && ev.startedAtMs !== null) {
        out.push({ at: ev.startedAtMs + ev.startedForMs, kind: 'end', ev });
      } else if (ev.status === 'Scheduled' && ev.autoStart && ev.notBeforeMs !== null) {
        out.push({ at: ev.notBeforeMs, kind: 'start', ev });
      }
    }
    const t = this.timeline;
    if (t) {
      const step = t.scenario.steps[t.nextStep];
      if (step) out.push({ at: t.startMs + this.scale(step.at), kind: 'step' });
      else if (t.after === 'loop' && t.scenario.steps.length > 0)
        out.push({ at: t.startMs + this.scale(this.loopPeriod(t.scenario)), kind: 'loop' });
    }
    return out;
  }

  private loopPeriod(s: Scenario): number {
    if (s.loopPeriod !== undefined) return s.loopPeriod;
    const last = s.steps[s.steps.length - 1]?.at ?? 0;
    return last + 60;
  }

  /** Applies everything that is due, oldest first. Ties: ends, then starts, then steps. */
  private sync(): void {
    const now = this.now();
    const rank = { end: 0, start: 1, step: 2, loop: 3 } as const;
    for (let guard = 0; guard < 1_000_000; guard++) {
      const due = this.pending().filter((p) => p.at <= now);
      if (due.length === 0) return;
      due.sort((a, b) => a.at - b.at || rank[a.kind] - rank[b.kind]);
      const first = due[0];
      if (!first) return;
      const t = this.timeline;
      switch (first.kind) {
        case 'end':
          if (first.ev) this.remove(first.ev, first.at, 'startedFor');
          break;
        case 'start':
          if (first.ev) this.start(first.ev, first.at, 'notBefore');
          break;
        case 'step':
          if (t) {
            const step = t.scenario.steps[t.nextStep] as ScenarioStep;
            t.nextStep += 1;
            this.applyStep(step, first.at, 'scenario', t);
          }
          break;
        case 'loop':
          if (t) {
            t.startMs = first.at;
            t.iteration += 1;
            t.nextStep = 0;
            this.refs = new Map();
          }
          break;
      }
    }
    throw new Error('scenario made no progress: more than a million changes in one evaluation');
  }

  private generatedId(parts: string): string {
    const h = createHash('sha1').update(`${this.seed}/${parts}`).digest('hex').toUpperCase();
    return `${h.slice(0, 8)}-${h.slice(8, 12)}-4${h.slice(13, 16)}-${((Number.parseInt(h.slice(16, 17), 16) & 0x3) | 0x8).toString(16).toUpperCase()}${h.slice(17, 20)}-${h.slice(20, 32)}`;
  }

  private expand(resources: string[] | undefined): string[] {
    return (resources ?? ['$self']).map((r) => {
      if (r === '$self') return this.identity.name;
      if (r.startsWith('$peer:')) return peerName(this.identity, r.slice('$peer:'.length));
      return r;
    });
  }

  private lookup(ref: string): EmulatedEvent | undefined {
    const key = this.refs.get(ref) ?? ref.toLowerCase();
    return this.events.get(key);
  }

  private applyStep(step: ScenarioStep, atMs: number, cause: ChangeCause, t: Timeline | null): string | null {
    switch (step.action) {
      case 'schedule':
      case 'start': {
        if (!('event' in step)) {
          const ev = this.lookup(step.ref);
          if (!ev) {
            this.logger?.warn({ ref: step.ref }, 'start: no such event in the document');
            return null;
          }
          if (ev.status === 'Scheduled') this.start(ev, atMs, cause);
          return ev.eventId;
        }
        const spec = step.event;
        const eventId =
          spec.eventId ??
          (t
            ? this.generatedId(`${t.run}/${t.scenario.name}/${t.iteration}/${spec.ref}`)
            : this.generatedId(`inject/${++this.injected}/${spec.ref}`));
        return this.add(spec, eventId, step.action === 'start' ? 'Started' : 'Scheduled', atMs, cause);
      }
      case 'reschedule': {
        const ev = this.lookup(step.ref);
        if (ev?.status !== 'Scheduled') {
          this.logger?.warn({ ref: step.ref }, 'reschedule: event is not Scheduled; step ignored');
          return ev?.eventId ?? null;
        }
        ev.notBeforeMs = atMs + this.scale(step.notBefore);
        if (step.resources) ev.resources = this.expand(step.resources);
        if (step.duration !== undefined) ev.duration = step.duration;
        this.changed('rescheduled', ev, atMs, cause);
        return ev.eventId;
      }
      case 'cancel':
      case 'complete': {
        const ev = this.lookup(step.ref);
        if (!ev) return null;
        this.remove(ev, atMs, cause);
        return ev.eventId;
      }
      case 'fault':
        this.addFault(step.fault);
        return null;
    }
  }

  private add(
    spec: EventSpec,
    eventId: string,
    status: EventStatus,
    atMs: number,
    cause: ChangeCause,
  ): string {
    const key = eventId.toLowerCase();
    const existing = this.events.get(key);
    if (existing) {
      this.logger?.warn({ eventId }, 'an event with this EventId is already in the document; step ignored');
      return existing.eventId;
    }
    const startedFor =
      spec.startedFor === undefined ? (DEFAULT_STARTED_FOR[spec.type] ?? 300) : spec.startedFor;
    const ev: EmulatedEvent = {
      eventId,
      ref: spec.ref,
      type: spec.type,
      resourceType: spec.resourceType ?? 'VirtualMachine',
      resources: this.expand(spec.resources),
      status,
      notBeforeMs: status === 'Scheduled' ? atMs + this.scale(spec.notBefore ?? 0) : null,
      duration: spec.duration ?? (spec.type === 'Freeze' ? 5 : -1),
      source: spec.source ?? 'Platform',
      description: spec.description ?? DEFAULT_DESCRIPTION[spec.type] ?? '',
      startedForMs: startedFor === null ? null : this.scale(startedFor),
      autoStart: spec.autoStart ?? true,
      appearedAtMs: atMs,
      startedAtMs: status === 'Started' ? atMs : null,
      approved: false,
    };
    this.events.set(key, ev);
    this.knownIds.add(key);
    this.refs.set(spec.ref, key);
    this.changed(status === 'Started' ? 'started' : 'scheduled', ev, atMs, cause);
    return eventId;
  }

  private start(ev: EmulatedEvent, atMs: number, cause: ChangeCause): void {
    ev.status = 'Started';
    ev.startedAtMs = atMs;
    this.changed('started', ev, atMs, cause);
  }

  private remove(ev: EmulatedEvent, atMs: number, cause: ChangeCause): void {
    this.events.delete(ev.eventId.toLowerCase());
    this.changed(ev.status === 'Scheduled' ? 'canceled' : 'completed', ev, atMs, cause);
  }

  private changed(change: HistoryEntry['change'], ev: EmulatedEvent, atMs: number, cause: ChangeCause): void {
    this.incarnationValue += 1;
    const entry: HistoryEntry = {
      at: new Date(atMs).toISOString(),
      atMs,
      change,
      eventId: ev.eventId,
      ref: ev.ref,
      eventType: ev.type,
      resources: [...ev.resources],
      affectsThisVm: ev.resources.some((r) => r.toLowerCase() === this.identity.name.toLowerCase()),
      cause,
      incarnation: this.incarnationValue,
    };
    this.historyLog.push(entry);
    if (this.historyLog.length > this.historyLimit) this.historyLog.shift();
    this.logger?.info(
      { change, eventId: ev.eventId, eventType: ev.type, cause, incarnation: this.incarnationValue },
      'document changed',
    );
  }

  private buildDocument(apiVersion: string): ScheduledEventsDocument {
    const f = fieldsFor(apiVersion);
    const events: ScheduledEvent[] = [];
    for (const ev of this.events.values()) {
      const out: Record<string, unknown> = {
        EventId: ev.eventId,
        EventType: ev.type,
        ResourceType: ev.resourceType,
        Resources: ev.resources,
        EventStatus: ev.status,
        NotBefore:
          ev.status === 'Scheduled' && ev.notBeforeMs !== null
            ? formatNotBefore(ev.notBeforeMs, this.notBeforeFormat)
            : '',
      };
      if (f.description) out.Description = ev.description;
      if (f.source) out.EventSource = ev.source;
      if (f.duration) out.DurationInSeconds = ev.duration;
      events.push(out as unknown as ScheduledEvent);
    }
    return { DocumentIncarnation: this.incarnationValue, Events: events };
  }
}
