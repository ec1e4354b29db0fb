/**
 * Tracker and enrichment throughput. The daemon feeds one document a second, so these figures
 * are headroom: the cost per poll on a VM is 1 / (documents per second).
 *
 * - realistic stream: a 1 Hz day-like stream where almost every document repeats the previous
 *   incarnation and events come and go (Scheduled, sometimes Rescheduled, Started, gone);
 * - every document changed: worst case, a new incarnation each poll (full diff every time);
 * - records: transitions of every phase through buildLifecycleRecord + JSON.stringify.
 */
import type { ScheduledEvent, ScheduledEventsDocument } from '../src/imds/types.js';
import { buildLifecycleRecord } from '../src/lifecycle/enrich.js';
import { initialTrackerState, observeDocument, type Transition } from '../src/lifecycle/tracker.js';
import { SHIPPER, VM } from '../test/fixtures/vm-identity.js';

const OPTIONS = { gapThresholdMs: 10_000 };
const T0 = Date.UTC(2026, 0, 1);

function event(id: number, status: string, notBefore: string, resources: string[]): ScheduledEvent {
  return {
    EventId: `6F1C2D3E-0000-4000-8000-${id.toString(16).padStart(12, '0').toUpperCase()}`,
    EventType: id % 3 === 0 ? 'Reboot' : 'Freeze',
    ResourceType: 'VirtualMachine',
    Resources: resources,
    EventStatus: status,
    NotBefore: notBefore,
    Description: 'Virtual machine is being paused because of a memory-preserving Live Migration operation.',
    EventSource: 'Platform',
    DurationInSeconds: 5,
  };
}

/**
 * One document per second. Every 20 minutes an event cycle: Scheduled for ~15 min (one in four
 * rescheduled once), Started for ~10 s of impact plus a while, then gone; every third cycle a
 * second event overlaps. Each poll yields a fresh document object, as a JSON parse would.
 */
function realisticStream(count: number): ScheduledEventsDocument[] {
  const docs: ScheduledEventsDocument[] = [];
  const resources = ['WestNO_0', 'WestNO_1'];
  let incarnation = 1;
  let previous = '';
  for (let i = 0; i < count; i++) {
    const cycle = Math.floor(i / 1200);
    const t = i % 1200;
    const events: ScheduledEvent[] = [];
    const nb = new Date(T0 + (cycle * 1200 + 900) * 1000).toUTCString();
    const nb2 = new Date(T0 + (cycle * 1200 + 960) * 1000).toUTCString();
    if (t >= 60 && t < 960)
      events.push(event(cycle * 2, 'Scheduled', cycle % 4 === 0 && t >= 300 ? nb2 : nb, resources));
    else if (t >= 960 && t < 1100) events.push(event(cycle * 2, 'Started', '', resources));
    if (cycle % 3 === 0 && t >= 200 && t < 700)
      events.push(event(cycle * 2 + 1, 'Scheduled', nb, ['WestNO_1']));
    const signature = events.map((e) => `${e.EventId}${e.EventStatus}${e.NotBefore}`).join();
    if (signature !== previous) incarnation++;
    previous = signature;
    docs.push({ DocumentIncarnation: incarnation, Events: events.map((e) => ({ ...e })) });
  }
  return docs;
}

function changingStream(count: number): ScheduledEventsDocument[] {
  const docs: ScheduledEventsDocument[] = [];
  for (let i = 0; i < count; i++) {
    const events =
      i % 2 === 0
        ? [event(i, 'Scheduled', new Date(T0 + 900_000).toUTCString(), ['WestNO_0'])]
        : [
            event(i - 1, 'Started', '', ['WestNO_0']),
            event(i, 'Scheduled', '2026-01-01T00:15:00Z', ['WestNO_1']),
          ];
    docs.push({ DocumentIncarnation: i + 1, Events: events });
  }
  return docs;
}

function throughTracker(docs: ScheduledEventsDocument[], rounds: number) {
  let transitions = 0;
  let changed = 0;
  const started = performance.now();
  for (let r = 0; r < rounds; r++) {
    let state = initialTrackerState();
    let last = -1;
    for (let i = 0; i < docs.length; i++) {
      const d = docs[i] as ScheduledEventsDocument;
      if (d.DocumentIncarnation !== last) changed++;
      last = d.DocumentIncarnation;
      const out = observeDocument(state, d, T0 + i * 1000, OPTIONS);
      transitions += out.transitions.length;
      state = out.state;
    }
  }
  const seconds = (performance.now() - started) / 1000;
  return {
    docsPerSecond: (docs.length * rounds) / seconds,
    transitions: transitions / rounds,
    changed: changed / rounds,
  };
}

function collectTransitions(docs: ScheduledEventsDocument[]): Transition[] {
  let state = initialTrackerState();
  const all: Transition[] = [];
  docs.forEach((d, i) => {
    const out = observeDocument(state, d, T0 + i * 1000, OPTIONS);
    all.push(...out.transitions);
    state = out.state;
  });
  return all;
}

function throughEnrich(transitions: Transition[], count: number) {
  let bytes = 0;
  const started = performance.now();
  for (let i = 0; i < count; i++) {
    const record = buildLifecycleRecord(transitions[i % transitions.length] as Transition, VM, SHIPPER);
    bytes += JSON.stringify(record).length;
  }
  const seconds = (performance.now() - started) / 1000;
  return { recordsPerSecond: count / seconds, bytesPerRecord: bytes / count };
}

const fmt = (n: number) => Math.round(n).toLocaleString('en-US');

export async function run(): Promise<void> {
  const realistic = realisticStream(86_400);
  throughTracker(realistic, 2); // warm-up
  const a = throughTracker(realistic, 10);
  console.log(
    `tracker, realistic day (86,400 docs, ${fmt(a.changed)} new incarnations, ${fmt(a.transitions)} transitions): ${fmt(a.docsPerSecond)} documents/s`,
  );

  const changing = changingStream(100_000);
  throughTracker(changing, 1);
  const b = throughTracker(changing, 3);
  console.log(`tracker, every document changed (full diff, 1–2 events): ${fmt(b.docsPerSecond)} documents/s`);

  const transitions = collectTransitions(realistic);
  const phases = [...new Set(transitions.map((t) => t.phase))].join(', ');
  throughEnrich(transitions, 20_000);
  const c = throughEnrich(transitions, 200_000);
  console.log(
    `enrich + JSON.stringify (${phases}): ${fmt(c.recordsPerSecond)} records/s, ${fmt(c.bytesPerRecord)} bytes/record`,
  );
}
