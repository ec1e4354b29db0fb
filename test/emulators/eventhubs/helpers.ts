import type {
  EventHubConsumerClient,
  EventPosition,
  ReceivedEventData,
  SubscribeOptions,
} from '@azure/event-hubs';

/** Short SDK retries: the defaults (3 retries, 30 s apart, 60 s timeout) would stall fault tests. */
export const fastRetry = { maxRetries: 0, retryDelayInMs: 20, maxRetryDelayInMs: 50, timeoutInMs: 3_000 };
export const patientRetry = { maxRetries: 8, retryDelayInMs: 50, maxRetryDelayInMs: 100, timeoutInMs: 3_000 };

/** Reads `count` events of one partition from `position`, or rejects after `timeoutMs`. */
export function readPartition(
  consumer: EventHubConsumerClient,
  partitionId: string,
  position: EventPosition,
  count: number,
  opts: Partial<SubscribeOptions> & { timeoutMs?: number } = {},
): Promise<ReceivedEventData[]> {
  return new Promise((resolve, reject) => {
    const got: ReceivedEventData[] = [];
    let done = false;
    const finish = (err?: Error) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      void subscription.close().then(
        () => (err ? reject(err) : resolve(got)),
        () => (err ? reject(err) : resolve(got)),
      );
    };
    const timer = setTimeout(
      () =>
        finish(
          new Error(`read ${got.length}/${count} events of partition ${partitionId} before the timeout`),
        ),
      opts.timeoutMs ?? 10_000,
    );
    const subscription = consumer.subscribe(
      partitionId,
      {
        processEvents: async (events) => {
          got.push(...events);
          if (got.length >= count) finish();
        },
        processError: async (err) => {
          if (opts.timeoutMs === undefined) return;
          void err;
        },
      },
      { startPosition: position, maxBatchSize: 500, maxWaitTimeInSeconds: 1, ...opts },
    );
  });
}

export async function errorOf(p: Promise<unknown>): Promise<Error & { code?: string; retryable?: boolean }> {
  try {
    await p;
  } catch (err) {
    return err as Error & { code?: string };
  }
  throw new Error('expected the operation to fail, it succeeded');
}

/** Polls `condition` every 20 ms; rejects after `timeoutMs`. */
export async function until(condition: () => boolean, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('condition not met before the timeout');
    await new Promise((r) => setTimeout(r, 20));
  }
}
