import { describe, expect, it } from 'vitest';
import { EmittedKeys, emittedKeyOf, parseEmittedKeysDump } from '../../src/lifecycle/emitted-keys.js';
import { doc, ev, Harness, T0 } from './helpers.js';

const DAY = 24 * 3600 * 1000;

describe('emittedKeyOf', () => {
  it('is (eventId lower-cased, phase), plus what was rescheduled for Rescheduled', () => {
    const e = ev({ EventId: 'AbC' });
    expect(emittedKeyOf({ event: e, phase: 'Scheduled', notBefore: '2022-04-11T22:26:58.000Z' })).toBe(
      'abc|Scheduled',
    );
    expect(emittedKeyOf({ event: e, phase: 'Started', notBefore: null })).toBe('abc|Started');
    expect(emittedKeyOf({ event: e, phase: 'Rescheduled', notBefore: '2022-04-11T22:26:58.000Z' })).toBe(
      'abc|Rescheduled|2022-04-11T22:26:58.000Z|westno_0,westno_1|5',
    );
    expect(emittedKeyOf({ event: e, phase: 'Rescheduled', notBefore: null })).toBe(
      'abc|Rescheduled||westno_0,westno_1|5',
    );
  });

  it('tells two reschedules apart that change only Resources, and ignores their order and case', () => {
    const t = (resources: string[]) =>
      emittedKeyOf({ event: ev({ Resources: resources }), phase: 'Rescheduled', notBefore: null });
    expect(t(['WestNO_0'])).not.toBe(t(['WestNO_0', 'WestNO_2']));
    expect(t(['WestNO_2', 'westno_0'])).toBe(t(['westno_0', 'WESTNO_2']));
  });
});

describe('Rescheduled twice by Resources alone', () => {
  it('ships both, with different recordIds', () => {
    const h = new Harness();
    h.feed(doc(1, ev()), T0);
    h.feed(doc(2, ev({ Resources: ['WestNO_0'] })), T0 + 1000);
    h.feed(doc(3, ev({ Resources: ['WestNO_0', 'WestNO_2'] })), T0 + 2000);
    expect(h.records.map((r) => r.phase)).toEqual(['Scheduled', 'Rescheduled', 'Rescheduled']);
    expect(h.records[1]?.recordId).not.toBe(h.records[2]?.recordId);
  });
});

describe('EmittedKeys', () => {
  it('has/add, bounded by count (least recently added goes first)', () => {
    const keys = new EmittedKeys({ max: 2, now: () => T0 });
    keys.add('a');
    keys.add('b');
    expect([keys.has('a'), keys.has('b'), keys.has('c')]).toEqual([true, true, false]);
    keys.add('c');
    expect([keys.has('a'), keys.has('b'), keys.has('c')]).toEqual([false, true, true]);
    expect(keys.size).toBe(2);
  });

  it('forgets keys after the TTL (clock injected)', () => {
    let now = T0;
    const keys = new EmittedKeys({ ttlMs: 7 * DAY, now: () => now });
    keys.add('a');
    now += 7 * DAY - 1;
    expect(keys.has('a')).toBe(true);
    now += 2;
    expect(keys.has('a')).toBe(false);
  });

  it('dump/load round trip keeps ages and recency, skips expired and malformed entries', () => {
    let now = T0;
    const keys = new EmittedKeys({ max: 3, ttlMs: 7 * DAY, now: () => now });
    keys.add('old', T0 - 6 * DAY);
    keys.add('mid', T0 - DAY);
    keys.add('new', T0);
    const dump = JSON.parse(JSON.stringify(keys.dump()));
    expect(dump).toEqual({
      version: 1,
      entries: [
        ['old', T0 - 6 * DAY],
        ['mid', T0 - DAY],
        ['new', T0],
      ],
    });
    now = T0 + 2 * DAY;
    const restored = new EmittedKeys({ max: 3, ttlMs: 7 * DAY, now: () => now });
    restored.load({ ...dump, entries: [...dump.entries, ['bad'], [42, T0], ['nan', 'x']] });
    expect([restored.has('old'), restored.has('mid'), restored.has('new')]).toEqual([false, true, true]);
    expect(restored.has('bad')).toBe(false);
    expect(restored.dump().entries.map(([k]) => k)).toEqual(['mid', 'new']);
    // Recency survives: adding two more evicts the least recent ('mid') first.
    restored.add('x');
    restored.add('y');
    expect(restored.dump().entries.map(([k]) => k)).toEqual(['new', 'x', 'y']);
  });

  it('parseEmittedKeysDump rejects what is not a dump', () => {
    expect(parseEmittedKeysDump({ version: 1, entries: [] })).toEqual({ version: 1, entries: [] });
    for (const bad of [null, 3, {}, { version: 2, entries: [] }, { version: 1, entries: {} }]) {
      expect(parseEmittedKeysDump(bad)).toBeNull();
    }
  });

  it('guards against a flapping document: an event that drops out and comes back is not re-emitted', () => {
    const h = new Harness();
    h.feed(doc(1, ev()), T0);
    h.feed(doc(2), T0 + 1000); // IMDS momentarily without the event: Canceled
    h.feed(doc(3, ev()), T0 + 2000); // back: Scheduled again is suppressed
    h.feed(doc(4), T0 + 3000); // Canceled again is suppressed
    expect(h.records.map((r) => r.phase)).toEqual(['Scheduled', 'Canceled']);
  });

  it('keys Rescheduled by notBefore: a new NotBefore is emitted, a flap back to a seen one is not', () => {
    const h = new Harness();
    const a = 'Mon, 11 Apr 2022 22:26:58 GMT';
    const b = 'Mon, 11 Apr 2022 22:41:58 GMT';
    const c = 'Mon, 11 Apr 2022 22:56:58 GMT';
    h.feed(doc(1, ev({ NotBefore: a })), T0);
    h.feed(doc(2, ev({ NotBefore: b })), T0 + 1000);
    h.feed(doc(3, ev({ NotBefore: c })), T0 + 2000);
    h.feed(doc(4, ev({ NotBefore: b })), T0 + 3000);
    expect(h.records.map((r) => [r.phase, r.notBefore])).toEqual([
      ['Scheduled', '2022-04-11T22:26:58.000Z'],
      ['Rescheduled', '2022-04-11T22:41:58.000Z'],
      ['Rescheduled', '2022-04-11T22:56:58.000Z'],
    ]);
    // The two Rescheduled records differ in recordId as they differ in notBefore.
    expect(h.records[1]?.recordId).not.toBe(h.records[2]?.recordId);
  });
});
