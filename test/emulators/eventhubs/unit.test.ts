/**
 * Pure parts of the emulator: the partition-key hash and the selector-filter start positions.
 */
import { describe, expect, it } from 'vitest';
import { startIndex } from '../../../src/emulators/eventhubs/emulator.js';
import { partitionForKey } from '../../../src/emulators/eventhubs/index.js';
import { PartitionLog } from '../../../src/emulators/eventhubs/store.js';

describe('partitionForKey', () => {
  it('is stable across runs and versions (pinned values)', () => {
    // Pinned: stored partitions and tests downstream depend on keys keeping their partition.
    expect([
      partitionForKey('vm-1', 2),
      partitionForKey('vm-42', 4),
      partitionForKey('', 3),
      partitionForKey('02aab8a4-74ef-476e-8182-f6d2ba4166a6', 32),
    ]).toEqual([0, 1, 1, 2]);
    // FNV-1a 32-bit of "a" is 0xe40c292c
    expect(partitionForKey('a', 0x7fffffff)).toBe(0xe40c292c % 0x7fffffff);
  });
  it('spreads keys over every partition', () => {
    const counts = [0, 0, 0, 0];
    for (let i = 0; i < 4000; i++) {
      const p = partitionForKey(`02aab8a4-74ef-476e-8182-${i.toString().padStart(12, '0')}`, 4);
      counts[p] = (counts[p] ?? 0) + 1;
    }
    for (const c of counts) expect(c).toBeGreaterThan(700);
  });
});

describe('selector filters', () => {
  const log = new PartitionLog('h', '0');
  log.append([{ raw: Buffer.alloc(10) }, { raw: Buffer.alloc(20) }], 1_000);
  log.append([{ raw: Buffer.alloc(5) }], 2_000);
  // offsets "0", "10", "30"; sequence numbers 0, 1, 2; enqueued 1000, 1000, 2000
  const at = (s: string | undefined) => startIndex(log, s);

  it('earliest, latest and missing', () => {
    expect(at("amqp.annotation.x-opt-offset > '-1'")).toBe(0);
    expect(at("amqp.annotation.x-opt-offset > '@latest'")).toBe(3);
    expect(at(undefined)).toBe(0);
  });
  it('offsets, sequence numbers and enqueued times, exclusive and inclusive', () => {
    expect(at("amqp.annotation.x-opt-offset > '10'")).toBe(2);
    expect(at("amqp.annotation.x-opt-offset >= '10'")).toBe(1);
    expect(at("amqp.annotation.x-opt-sequence-number > '0'")).toBe(1);
    expect(at("amqp.annotation.x-opt-sequence-number >= '2'")).toBe(2);
    expect(at("amqp.annotation.x-opt-sequence-number > '99'")).toBe(3);
    expect(at("amqp.annotation.x-opt-enqueued-time > '1000'")).toBe(2);
    expect(at("amqp.annotation.x-opt-enqueued-time > '0'")).toBe(0);
  });
  it('refuses what it does not understand', () => {
    expect(() => at("amqp.annotation.x-opt-offset > 'abc'")).toThrow(/not valid/);
    expect(() => at('sys.something = 1')).toThrow(/Unsupported selector/);
  });
});
