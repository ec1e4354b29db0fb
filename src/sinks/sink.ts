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
