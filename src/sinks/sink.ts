import type { ShipperRecord } from '../lifecycle/record.js';

/**
 * What every sink implements. `send` either confirms the whole batch (resolves) or throws;
 * a sink never drops a record silently. The caller (spool / delivery loop) keeps the batch
 * until `send` resolves, so retrying a batch may deliver duplicates but never loses one.
 */
export interface Sink {
  readonly name: string;
  send(batch: readonly ShipperRecord[], signal?: AbortSignal): Promise<void>;
  close(): Promise<void>;
}

/**
 * A failed send. `retryable: false` marks errors that waiting will not fix by itself (bad
 * credentials, missing hub, a record too large): the delivery loop still keeps the records and
 * keeps trying, but logs these loudly so an operator fixes the cause.
 */
export class SinkError extends Error {
  readonly retryable: boolean;
  /**
   * The batch as a whole exceeds what the sink accepts in one send (e.g. the Event Hubs message or
   * batch size limit). The delivery loop then halves the batch; a single record flagged too large
   * is moved to the spool's `rejected/` directory. Contract: src/pipeline/delivery.ts.
   */
  readonly tooLarge?: boolean;
  /**
   * A stable identifier of the kind of failure (e.g. the Event Hubs SDK's error code such as
   * `UnauthorizedError`), free of per-request text. The message may carry tracking ids and
   * timestamps; `code` does not, so callers can group or rate-limit by it.
   */
  readonly code?: string;
  constructor(
    message: string,
    options: { retryable: boolean; tooLarge?: boolean; code?: string; cause?: unknown },
  ) {
    super(message, { cause: options.cause });
    this.name = 'SinkError';
    this.retryable = options.retryable;
    if (options.tooLarge) this.tooLarge = true;
    if (options.code !== undefined) this.code = options.code;
  }
}
