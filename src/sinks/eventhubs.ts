import { type EventData, EventHubProducerClient, type RetryOptions } from '@azure/event-hubs';
import type { TokenCredential } from '@azure/identity';
import type { ShipperRecord } from '../lifecycle/record.js';
import { type Logger, redactSecrets } from '../observability/logger.js';
import { type Sink, SinkError } from './sink.js';

export type EventHubsTarget =
  /** Connection string (may carry EntityPath and UseDevelopmentEmulator=true); never logged. */
  | { kind: 'connection-string'; connectionString: string; eventHubName?: string }
  /** Entra ID: namespace FQDN + hub + a credential (managed identity by default). */
  | {
      kind: 'credential';
      fullyQualifiedNamespace: string;
      eventHubName: string;
      credential: TokenCredential;
    };

export interface EventHubsSinkOptions {
  target: EventHubsTarget;
  logger: Logger;
  /**
   * The SDK's own retries inside one send. Kept short: the delivery loop retries forever with
   * its own capped backoff, and the SDK default (3 × 30 s) would stall a Preempt flush.
   */
  retryOptions?: RetryOptions;
}

const DEFAULT_RETRY_OPTIONS: RetryOptions = { maxRetries: 1, retryDelayInMs: 250, timeoutInMs: 20_000 };

/** Error codes of @azure/core-amqp's MessagingError that waiting alone will not fix. */
const NON_RETRYABLE_CODES = new Set([
  'UnauthorizedError',
  'MessagingEntityNotFoundError',
  'MessagingEntityDisabledError',
  'ArgumentError',
  'ArgumentOutOfRangeError',
  'QuotaExceededError',
  'PublisherRevokedError',
]);

/**
 * @azure/core-amqp's retry throws `AggregateError(errors)` (empty message, name `AggregateError`)
 * when more than one attempt failed; the last attempt's error is the one that says why.
 */
function lastAttemptError(err: unknown): unknown {
  if (err instanceof AggregateError && err.errors.length > 0) return lastAttemptError(err.errors.at(-1));
  return err;
}

function describeError(thrown: unknown): { code: string; message: string; retryable: boolean } {
  const err = lastAttemptError(thrown);
  const e = err as { code?: unknown; message?: unknown; retryable?: unknown; name?: unknown };
  const code = typeof e.code === 'string' ? e.code : typeof e.name === 'string' ? e.name : 'Error';
  const message = redactSecrets(typeof e.message === 'string' ? e.message : String(err));
  // The SDK marks Unauthorized as retryable (tokens can be fixed by rotation), but an operator must act.
  const retryable = !NON_RETRYABLE_CODES.has(code) && e.retryable !== false;
  return { code, message, retryable };
}

/** Application properties let Event Hubs consumers route without parsing the body. */
function toEventData(record: ShipperRecord): EventData {
  const properties: Record<string, string> = { recordType: record.recordType, schemaVersion: '1' };
  if (record.recordType === 'lifecycle') {
    properties.phase = record.phase;
    properties.eventType = record.eventType;
  }
  return { body: record, contentType: 'application/json', messageId: record.recordId, properties };
}

/**
 * Event Hubs sink on the official producer client. Records are grouped by partition key (vmId,
 * so one VM's records stay in order on one partition) and packed into batches with
 * createBatch/tryAdd, which never exceed the hub's size limit. `send` resolves only when every
 * batch was accepted; a partial failure rethrows and the delivery loop resends the whole batch
 * (duplicates share a recordId and are removed downstream).
 */
export class EventHubsSink implements Sink {
  readonly name = 'eventhubs';
  private readonly producer: EventHubProducerClient;
  private readonly logger: Logger;

  constructor(options: EventHubsSinkOptions) {
    const retryOptions = { ...DEFAULT_RETRY_OPTIONS, ...options.retryOptions };
    const { target } = options;
    this.logger = options.logger;
    this.producer =
      target.kind === 'connection-string'
        ? target.eventHubName
          ? new EventHubProducerClient(target.connectionString, target.eventHubName, { retryOptions })
          : new EventHubProducerClient(target.connectionString, { retryOptions })
        : new EventHubProducerClient(target.fullyQualifiedNamespace, target.eventHubName, target.credential, {
            retryOptions,
          });
  }

  get eventHubName(): string {
    return this.producer.eventHubName;
  }

  async send(batch: readonly ShipperRecord[], signal?: AbortSignal): Promise<void> {
    if (batch.length === 0) return;
    const groups = new Map<string, ShipperRecord[]>();
    for (const record of batch) {
      const group = groups.get(record.vmId);
      if (group) group.push(record);
      else groups.set(record.vmId, [record]);
    }
    try {
      for (const [vmId, records] of groups) await this.sendGroup(vmId, records, signal);
    } catch (err) {
      if (err instanceof SinkError) throw err;
      const { code, message, retryable } = describeError(err);
      throw new SinkError(`Event Hubs send failed (${code}): ${message}`, {
        retryable,
        tooLarge: code === 'MessageTooLargeError',
        code,
        cause: err,
      });
    }
  }

  private async sendGroup(
    vmId: string,
    records: readonly ShipperRecord[],
    signal?: AbortSignal,
  ): Promise<void> {
    // An unknown vmId (identity not read yet) gets no key: the service round-robins.
    const batchOptions = {
      ...(vmId ? { partitionKey: vmId } : {}),
      ...(signal ? { abortSignal: signal } : {}),
    };
    let current = await this.producer.createBatch(batchOptions);
    for (const record of records) {
      const data = toEventData(record);
      if (current.tryAdd(data)) continue;
      if (current.count === 0) {
        throw new SinkError(
          `record ${record.recordId} is larger than the hub's ${current.maxSizeInBytes}-byte message limit`,
          { retryable: false, tooLarge: true },
        );
      }
      await this.producer.sendBatch(current, signal ? { abortSignal: signal } : {});
      current = await this.producer.createBatch(batchOptions);
      if (!current.tryAdd(data)) {
        throw new SinkError(
          `record ${record.recordId} is larger than the hub's ${current.maxSizeInBytes}-byte message limit`,
          { retryable: false, tooLarge: true },
        );
      }
    }
    if (current.count > 0) await this.producer.sendBatch(current, signal ? { abortSignal: signal } : {});
  }

  async close(): Promise<void> {
    try {
      await this.producer.close();
    } catch (err) {
      this.logger.debug({ err }, 'closing the Event Hubs producer failed');
    }
  }
}

/** Where a connection string's secrets are: only the non-secret parts, for logs. */
export function describeConnectionString(connectionString: string): {
  endpoint: string;
  entityPath: string;
  emulator: boolean;
} {
  const parts = new Map<string, string>();
  for (const part of connectionString.split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0) parts.set(part.slice(0, eq).trim().toLowerCase(), part.slice(eq + 1).trim());
  }
  return {
    endpoint: parts.get('endpoint') ?? '',
    entityPath: parts.get('entitypath') ?? '',
    emulator: (parts.get('usedevelopmentemulator') ?? '').toLowerCase() === 'true',
  };
}
