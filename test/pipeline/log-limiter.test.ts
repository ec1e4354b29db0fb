import { describe, expect, it } from 'vitest';
import { LogLimiter } from '../../src/observability/log-limiter.js';
import { EventHubsSink } from '../../src/sinks/eventhubs.js';
import { SinkError } from '../../src/sinks/sink.js';
import { captureLogger, lifecycle } from '../spool/helpers.js';

describe('LogLimiter', () => {
  it('writes the first line per key, suppresses repeats within the interval and reports how many', () => {
    let now = 0;
    const limiter = new LogLimiter(1_000, () => now);
    expect(limiter.take('a')).toBe(0);
    expect(limiter.take('a')).toBeNull();
    expect(limiter.take('a')).toBeNull();
    expect(limiter.take('b')).toBe(0);
    now = 1_000;
    expect(limiter.take('a')).toBe(2);
    limiter.reset('a');
    expect(limiter.take('a')).toBe(0);
  });

  it('is bounded: past maxKeys it forgets the key written longest ago', () => {
    let now = 0;
    const limiter = new LogLimiter(60_000, () => now, 3);
    for (let i = 0; i < 1_000; i++) {
      now += 1;
      expect(limiter.take(`unique-${i}`)).toBe(0);
    }
    expect(limiter.size).toBe(3);
    // The three newest are still limited; an evicted one is written again at once.
    expect(limiter.take('unique-999')).toBeNull();
    expect(limiter.take('unique-997')).toBeNull();
    expect(limiter.take('unique-0')).toBe(0);
    expect(limiter.size).toBe(3);
    // 'unique-0' pushed out the oldest written of the three (997), not the one just suppressed.
    expect(limiter.take('unique-998')).toBeNull();
    expect(limiter.take('unique-997')).toBe(0);
  });

  it('has a default cap', () => {
    const limiter = new LogLimiter(60_000);
    for (let i = 0; i < 10_000; i++) limiter.take(`k${i}`);
    expect(limiter.size).toBeLessThanOrEqual(1_000);
    expect(() => new LogLimiter(1, Date.now, 0)).toThrow(RangeError);
  });
});

describe('EventHubsSink error code', () => {
  it('puts the SDK error code on the SinkError, free of the per-request message text', async () => {
    const { logger } = captureLogger();
    const sink = new EventHubsSink({
      target: {
        kind: 'connection-string',
        connectionString:
          'Endpoint=sb://example.invalid/;SharedAccessKeyName=k;SharedAccessKey=c2VjcmV0;EntityPath=hub',
      },
      logger,
    });
    const sdkError = Object.assign(
      new Error('Unauthorized access. TrackingId:1f2e3d, SystemTracker:x, Timestamp:2026-01-01T00:00:00'),
      { name: 'MessagingError', code: 'UnauthorizedError', retryable: true },
    );
    // Stand in for the producer: no network in this test.
    const fake = { createBatch: () => Promise.reject(sdkError), close: () => Promise.resolve() };
    Object.defineProperty(sink, 'producer', { value: fake });
    const err: unknown = await sink.send([lifecycle()]).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(SinkError);
    expect(err).toMatchObject({ code: 'UnauthorizedError', retryable: false });
    expect((err as SinkError).message).toMatch(/TrackingId/);
    await sink.close();
  });
});
