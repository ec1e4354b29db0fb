import { describe, expect, it } from 'vitest';
import {
  activeEventCount,
  initialTrackerState,
  observeDocument,
  parseTrackerState,
  type TrackerState,
} from '../../src/lifecycle/tracker.js';
import { doc, ev, GAP_MS, observe, run, T0 } from './helpers.js';

const ID = 'C7061BAC-AFDC-4513-B24B-AA5F13A16123';
const NB_ISO = '2022-04-11T22:26:58.000Z';

/** State after a first document showing `events`. */
function seen(...events: ReturnType<typeof ev>[]): TrackerState {
  return observe(initialTrackerState(), doc(1, ...events), T0).state;
}

describe('tracker: the lifecycle table', () => {
  it('first seen with status Scheduled → Scheduled, NotBefore normalised to ISO 8601 UTC', () => {
    const r = observe(initialTrackerState(), doc(2, ev()), T0);
    expect(r.transitions).toEqual([
      {
        phase: 'Scheduled',
        inferred: false,
        gapSeconds: 0,
        event: ev(),
        notBefore: NB_ISO,
        observedAt: T0,
        documentIncarnation: 2,
      },
    ]);
    expect(r.warnings).toEqual([]);
    expect(r.state.events[ID.toLowerCase()]).toMatchObject({ phase: 'Scheduled', notBefore: NB_ISO });
  });

  it('NotBefore changes while Scheduled → Rescheduled with the new NotBefore', () => {
    const r = observe(seen(ev()), doc(2, ev({ NotBefore: 'Mon, 11 Apr 2022 22:41:58 GMT' })), T0 + 1000);
    expect(r.transitions.map((t) => [t.phase, t.notBefore, t.inferred])).toEqual([
      ['Rescheduled', '2022-04-11T22:41:58.000Z', false],
    ]);
    expect(r.state.events[ID.toLowerCase()]?.phase).toBe('Rescheduled');
  });

  it('Resources or DurationInSeconds change while Scheduled → Rescheduled (NotBefore kept)', () => {
    const a = observe(seen(ev()), doc(2, ev({ Resources: ['WestNO_0'] })), T0 + 1000);
    expect(a.transitions.map((t) => [t.phase, t.notBefore])).toEqual([['Rescheduled', NB_ISO]]);
    const b = observe(seen(ev()), doc(2, ev({ DurationInSeconds: 30 })), T0 + 1000);
    expect(b.transitions.map((t) => t.phase)).toEqual(['Rescheduled']);
  });

  it('a Rescheduled event can be rescheduled again, then start', () => {
    const { phases } = run([
      doc(1, ev()),
      doc(2, ev({ NotBefore: 'Mon, 11 Apr 2022 22:41:58 GMT' })),
      doc(3, ev({ NotBefore: 'Mon, 11 Apr 2022 22:56:58 GMT' })),
      doc(4, ev({ EventStatus: 'Started', NotBefore: '' })),
      doc(5),
    ]);
    expect(phases).toEqual([
      `Scheduled:${ID}`,
      `Rescheduled:${ID}`,
      `Rescheduled:${ID}`,
      `Started:${ID}`,
      `Completed:${ID}`,
    ]);
  });

  it('Resources listed in another order or case are not a change', () => {
    const r = observe(seen(ev()), doc(2, ev({ Resources: ['westno_1', 'WESTNO_0'] })), T0 + 1000);
    expect(r.transitions).toEqual([]);
  });

  it('status Started after Scheduled → Started (NotBefore blank once started)', () => {
    const r = observe(seen(ev()), doc(3, ev({ EventStatus: 'Started', NotBefore: '' })), T0 + 1000);
    expect(
      r.transitions.map((t) => [t.phase, t.notBefore, t.event.EventStatus, t.documentIncarnation]),
    ).toEqual([['Started', null, 'Started', 3]]);
  });

  it('first seen as Started (hardware failure) → Started', () => {
    const hw = ev({
      EventId: '8C0B7E2F-1111-4A5B-9C0D-0123456789AB',
      EventType: 'Reboot',
      EventStatus: 'Started',
      NotBefore: '',
      Resources: ['WestNO_0'],
      Description: 'Virtual machine is being restarted because of an unexpected host failure.',
      DurationInSeconds: -1,
    });
    const r = observe(initialTrackerState(), doc(7, hw), T0);
    expect(r.transitions.map((t) => [t.phase, t.inferred, t.notBefore])).toEqual([['Started', false, null]]);
    const gone = observe(r.state, doc(8), T0 + 1000);
    expect(gone.transitions.map((t) => [t.phase, t.inferred, t.event.EventType])).toEqual([
      ['Completed', false, 'Reboot'],
    ]);
  });

  it('a Started event gone from the document → Completed, carrying its last known version', () => {
    const started = ev({ EventStatus: 'Started', NotBefore: '', Description: 'second impact' });
    const s1 = observe(seen(ev()), doc(2, started), T0 + 1000).state;
    const r = observe(s1, doc(3), T0 + 2000);
    expect(r.transitions).toEqual([
      {
        phase: 'Completed',
        inferred: false,
        gapSeconds: 0,
        event: started,
        notBefore: null,
        observedAt: T0 + 2000,
        documentIncarnation: 3,
      },
    ]);
    expect(r.state.events).toEqual({});
  });

  it('a Scheduled event gone while watched continuously → Canceled', () => {
    const r = observe(seen(ev()), doc(2), T0 + 1000);
    expect(r.transitions.map((t) => [t.phase, t.inferred, t.gapSeconds, t.notBefore])).toEqual([
      ['Canceled', false, 0, NB_ISO],
    ]);
  });

  it('a Rescheduled event gone while watched continuously → Canceled', () => {
    const { phases } = run([doc(1, ev()), doc(2, ev({ DurationInSeconds: 9 })), doc(3)]);
    expect(phases).toEqual([`Scheduled:${ID}`, `Rescheduled:${ID}`, `Canceled:${ID}`]);
  });

  it('gone after an observation gap → Completed, inferred, with the gap length (Scheduled or Started)', () => {
    const other = ev({ EventId: 'B1', EventStatus: 'Started', NotBefore: '' });
    const s = seen(ev(), other);
    const r = observe(s, doc(9), T0 + 95_400);
    expect(r.transitions.map((t) => [t.phase, t.event.EventId, t.inferred, t.gapSeconds])).toEqual([
      ['Completed', ID, true, 95],
      ['Completed', 'B1', true, 95],
    ]);
  });

  it('exactly the threshold is still continuous; one ms more is a gap', () => {
    expect(observe(seen(ev()), doc(2), T0 + GAP_MS).transitions[0]?.phase).toBe('Canceled');
    expect(observe(seen(ev()), doc(2), T0 + GAP_MS + 1).transitions[0]).toMatchObject({
      phase: 'Completed',
      inferred: true,
      gapSeconds: 10,
    });
  });

  it('a clock stepped back by more than the threshold is a gap too (continuity cannot be proven)', () => {
    const r = observe(seen(ev()), doc(2), T0 - 60_000);
    expect(r.transitions[0]).toMatchObject({ phase: 'Completed', inferred: true, gapSeconds: 60 });
  });

  it('a negative threshold forces a gap (first document after a restart: every ending is inferred)', () => {
    const s = seen(ev());
    const r = observeDocument(s, doc(2), T0 + 2000, { gapThresholdMs: -1 });
    expect(r.transitions[0]).toMatchObject({ phase: 'Completed', inferred: true, gapSeconds: 2 });
    // Even the same incarnation is diffed then.
    expect(observeDocument(s, doc(1), T0 + 1000, { gapThresholdMs: -1 }).transitions[0]).toMatchObject({
      phase: 'Completed',
      inferred: true,
    });
  });

  it('an event seen after a gap in a new status is reported as observed, not inferred', () => {
    const r = observe(seen(ev()), doc(2, ev({ EventStatus: 'Started', NotBefore: '' })), T0 + 600_000);
    expect(r.transitions.map((t) => [t.phase, t.inferred, t.gapSeconds])).toEqual([['Started', false, 0]]);
  });

  it('changes while Started (more impacts, new description) emit nothing until it is gone', () => {
    const started = ev({ EventStatus: 'Started', NotBefore: '' });
    const s1 = observe(seen(ev()), doc(2, started), T0 + 1000).state;
    const r = observe(
      s1,
      doc(3, { ...started, Description: 'another short impact', DurationInSeconds: 7 }),
      T0 + 2000,
    );
    expect(r.transitions).toEqual([]);
    expect(r.state.events[ID.toLowerCase()]?.event.Description).toBe('another short impact');
    // A status going back to Scheduled does not un-start it either.
    const back = observe(r.state, doc(4, ev()), T0 + 3000);
    expect(back.transitions).toEqual([]);
    expect(observe(back.state, doc(5), T0 + 4000).transitions.map((t) => t.phase)).toEqual(['Completed']);
  });
});

describe('tracker: the documented live-migration example', () => {
  it('incarnations 1–4: nothing, Freeze Scheduled on two VMs, Started, gone → Scheduled, Started, Completed', () => {
    const freeze = ev();
    const docs = [
      doc(1),
      doc(2, freeze),
      doc(3, { ...freeze, EventStatus: 'Started', NotBefore: '' }),
      doc(4),
    ];
    let state = initialTrackerState();
    const seenTransitions = docs.map((d, i) => {
      const r = observe(state, d, T0 + i * 1000);
      // Every poll in between returns the same document: the fast path, nothing new.
      const again = observe(r.state, d, T0 + i * 1000 + 500);
      expect(again.transitions).toEqual([]);
      state = again.state;
      return r.transitions.map((t) => ({
        phase: t.phase,
        status: t.event.EventStatus,
        resources: t.event.Resources,
        incarnation: t.documentIncarnation,
        inferred: t.inferred,
      }));
    });
    expect(seenTransitions).toEqual([
      [],
      [
        {
          phase: 'Scheduled',
          status: 'Scheduled',
          resources: ['WestNO_0', 'WestNO_1'],
          incarnation: 2,
          inferred: false,
        },
      ],
      [
        {
          phase: 'Started',
          status: 'Started',
          resources: ['WestNO_0', 'WestNO_1'],
          incarnation: 3,
          inferred: false,
        },
      ],
      [
        {
          phase: 'Completed',
          status: 'Started',
          resources: ['WestNO_0', 'WestNO_1'],
          incarnation: 4,
          inferred: false,
        },
      ],
    ]);
    expect(state.lastIncarnation).toBe(4);
    expect(activeEventCount(state)).toBe(0);
  });
});

describe('tracker: several events, identities and incarnations', () => {
  it('two events at once: each gets its own transitions; endings come first in a document', () => {
    const a = ev({ EventId: 'A', EventType: 'Reboot' });
    const b = ev({ EventId: 'B', EventType: 'Redeploy', NotBefore: '2022-04-11T23:00:00Z' });
    const c = ev({ EventId: 'C', EventType: 'Terminate' });
    const { phases } = run([
      doc(1, a, b),
      doc(2, { ...a, EventStatus: 'Started', NotBefore: '' }, b),
      doc(3, b, c),
      doc(4),
    ]);
    expect(phases).toEqual([
      'Scheduled:A',
      'Scheduled:B',
      'Started:A',
      'Completed:A',
      'Scheduled:C',
      'Canceled:B',
      'Canceled:C',
    ]);
  });

  it('EventIds differing only in case are one event; the record keeps the latest spelling', () => {
    const upper = ev();
    const lower = ev({ EventId: ID.toLowerCase() });
    const { phases, state } = run([
      doc(1, upper),
      doc(2, lower),
      doc(3, { ...upper, EventStatus: 'Started' }),
    ]);
    expect(phases).toEqual([`Scheduled:${ID}`, `Started:${ID}`]);
    const done = observe(state, doc(4), T0 + 10_000);
    expect(done.transitions.map((t) => `${t.phase}:${t.event.EventId}`)).toEqual([`Completed:${ID}`]);
    const s2 = observe(seen(upper), doc(2, lower), T0 + 1000).state;
    const gone = observe(s2, doc(3), T0 + 2000);
    expect(gone.transitions.map((t) => `${t.phase}:${t.event.EventId}`)).toEqual([
      `Canceled:${ID.toLowerCase()}`,
    ]);
  });

  it('the same EventId twice in one document: the first is used and a warning raised', () => {
    const r = observe(
      initialTrackerState(),
      doc(1, ev(), ev({ EventId: ID.toLowerCase(), EventStatus: 'Started' })),
      T0,
    );
    expect(r.transitions.map((t) => t.phase)).toEqual(['Scheduled']);
    expect(r.warnings).toEqual([
      { code: 'duplicate-event-id', eventId: ID.toLowerCase(), value: ID.toLowerCase() },
    ]);
  });

  it('a lower incarnation is just a different document (no monotonicity assumed)', () => {
    const { phases } = run([
      doc(10, ev()),
      doc(3, ev({ EventStatus: 'Started', NotBefore: '' })),
      doc(1),
      doc(10, ev({ EventId: 'NEW' })),
    ]);
    expect(phases).toEqual([`Scheduled:${ID}`, `Started:${ID}`, `Completed:${ID}`, 'Scheduled:NEW']);
  });

  it('the same incarnation while watched continuously is the fast path: no diff, shared events', () => {
    const s = seen(ev());
    // A different body under the same incarnation is ignored while watched continuously:
    // IMDS changes the incarnation whenever the events change.
    const r = observe(s, doc(1), T0 + 1000);
    expect(r.transitions).toEqual([]);
    expect(r.warnings).toEqual([]);
    expect(r.state.events).toBe(s.events);
    expect(r.state.lastObservedAt).toBe(T0 + 1000);
    expect(s.lastObservedAt).toBe(T0);
    expect(observe(s, doc(1, ev()), T0).state).toBe(s);
  });

  it('the same incarnation after a gap is diffed anyway (a restart may meet a reset counter)', () => {
    const r = observe(seen(ev()), doc(1), T0 + 3_600_000);
    expect(r.transitions.map((t) => [t.phase, t.inferred, t.gapSeconds])).toEqual([
      ['Completed', true, 3600],
    ]);
  });

  it('an unchanged event under a new incarnation keeps its tracked entry and emits nothing', () => {
    const s = seen(ev());
    const r = observe(s, doc(2, ev()), T0 + 1000);
    expect(r.transitions).toEqual([]);
    expect(r.state.events[ID.toLowerCase()]).toBe(s.events[ID.toLowerCase()]);
  });

  it('NotBefore in another format for the same instant is not a reschedule', () => {
    const r = observe(seen(ev()), doc(2, ev({ NotBefore: '2022-04-11T22:26:58Z' })), T0 + 1000);
    expect(r.transitions).toEqual([]);
    expect(r.state.events[ID.toLowerCase()]?.event.NotBefore).toBe('2022-04-11T22:26:58Z');
  });
});

describe('tracker: forward compatibility and bad values', () => {
  it('an unknown EventType passes through verbatim, with one warning', () => {
    const odd = ev({ EventType: 'Hibernate' });
    const r = observe(initialTrackerState(), doc(1, odd), T0);
    expect(r.transitions.map((t) => [t.phase, t.event.EventType])).toEqual([['Scheduled', 'Hibernate']]);
    expect(r.warnings).toEqual([{ code: 'unknown-event-type', eventId: ID, value: 'Hibernate' }]);
    const next = observe(r.state, doc(2, { ...odd, NotBefore: 'Mon, 11 Apr 2022 22:30:00 GMT' }), T0 + 1000);
    expect(next.transitions.map((t) => t.phase)).toEqual(['Rescheduled']);
    expect(next.warnings).toEqual([]);
  });

  it('an unknown EventStatus is an announcement: Scheduled with the status verbatim, then Completed (never Canceled)', () => {
    const pending = ev({ EventStatus: 'Approved' });
    const r = observe(initialTrackerState(), doc(1, pending), T0);
    expect(r.transitions.map((t) => [t.phase, t.event.EventStatus])).toEqual([['Scheduled', 'Approved']]);
    expect(r.warnings).toEqual([{ code: 'unknown-event-status', eventId: ID, value: 'Approved' }]);
    expect(observe(r.state, doc(2, pending), T0 + 1000).warnings).toEqual([]);
    const gone = observe(r.state, doc(2), T0 + 1000);
    expect(gone.transitions.map((t) => [t.phase, t.inferred])).toEqual([['Completed', false]]);
  });

  it('Scheduled → unknown status: no phase, one warning; then Started → Started; a vanished unknown → Completed', () => {
    const s = seen(ev());
    const r = observe(s, doc(2, ev({ EventStatus: 'Preparing' })), T0 + 1000);
    expect(r.transitions).toEqual([]);
    expect(r.warnings.map((w) => w.code)).toEqual(['unknown-event-status']);
    expect(
      observe(r.state, doc(3, ev({ EventStatus: 'Started', NotBefore: '' })), T0 + 2000).transitions[0]
        ?.phase,
    ).toBe('Started');
    expect(observe(r.state, doc(3), T0 + 2000).transitions[0]?.phase).toBe('Completed');
  });

  it('status comparison ignores case but the record keeps it verbatim', () => {
    const r = observe(seen(ev()), doc(2, ev({ EventStatus: 'started', NotBefore: '' })), T0 + 1000);
    expect(r.transitions.map((t) => [t.phase, t.event.EventStatus])).toEqual([['Started', 'started']]);
    expect(r.warnings).toEqual([]);
  });

  it('an unparseable NotBefore does not throw: null, one warning, not repeated for the same value', () => {
    const bad = ev({ NotBefore: 'soon-ish' });
    const r = observe(initialTrackerState(), doc(1, bad), T0);
    expect(r.transitions.map((t) => [t.phase, t.notBefore])).toEqual([['Scheduled', null]]);
    expect(r.warnings).toEqual([{ code: 'unparseable-not-before', eventId: ID, value: 'soon-ish' }]);
    const again = observe(r.state, doc(2, { ...bad, Description: 'changed' }), T0 + 1000);
    expect(again.warnings).toEqual([]);
    expect(again.transitions).toEqual([]);
    const fixed = observe(again.state, doc(3, ev()), T0 + 2000);
    expect(fixed.transitions.map((t) => [t.phase, t.notBefore])).toEqual([['Rescheduled', NB_ISO]]);
  });

  it('RFC 1123, ISO 8601 and blank NotBefore all reach the transition as ISO 8601 UTC or null', () => {
    const cases: [string, string | null][] = [
      ['Mon, 11 Apr 2022 22:26:58 GMT', NB_ISO],
      ['2022-04-11T22:26:58Z', NB_ISO],
      ['2022-04-12T00:26:58+02:00', NB_ISO],
      ['', null],
      ['   ', null],
    ];
    for (const [raw, iso] of cases) {
      const r = observe(initialTrackerState(), doc(1, ev({ NotBefore: raw })), T0);
      expect(r.transitions[0]?.notBefore, raw).toBe(iso);
      expect(r.warnings, raw).toEqual([]);
    }
  });
});

describe('tracker: state', () => {
  it('is JSON-serialisable and survives a round trip through parseTrackerState', () => {
    const { state } = run([doc(1, ev(), ev({ EventId: 'B', EventStatus: 'Started', NotBefore: '' }))]);
    const back = parseTrackerState(JSON.parse(JSON.stringify(state)));
    expect(back).toEqual(state);
    expect(back?.version).toBe(1);
    // Continuing from the round-tripped state behaves as from the original.
    const a = observe(state, doc(2), T0 + 1000).transitions;
    const b = observe(back as TrackerState, doc(2), T0 + 1000).transitions;
    expect(b).toEqual(a);
  });

  it('parseTrackerState rejects what is not a version-1 state', () => {
    const good = JSON.parse(JSON.stringify(seen(ev())));
    expect(parseTrackerState(good)).not.toBeNull();
    for (const bad of [
      null,
      [],
      'x',
      { ...good, version: 2 },
      { ...good, lastObservedAt: 'yesterday' },
      { ...good, events: [] },
      { ...good, events: { other: good.events[ID.toLowerCase()] } },
      { ...good, events: { [ID.toLowerCase()]: { ...good.events[ID.toLowerCase()], phase: 'Completed' } } },
      {
        ...good,
        events: { [ID.toLowerCase()]: { ...good.events[ID.toLowerCase()], event: { EventId: ID } } },
      },
    ]) {
      expect(parseTrackerState(bad), JSON.stringify(bad)).toBeNull();
    }
  });

  it('an EventId of __proto__ is just a key', () => {
    const { phases, state } = run([doc(1, ev({ EventId: '__proto__' })), doc(2)]);
    expect(phases).toEqual(['Scheduled:__proto__', 'Canceled:__proto__']);
    expect(activeEventCount(state)).toBe(0);
  });
});
