import { hostname } from 'node:os';
import type { InstanceCompute } from '../imds/types.js';
import type { ShipperIdentity } from '../lifecycle/record.js';
import type { Logger } from '../observability/logger.js';
import { SHIPPER_VERSION } from '../version.js';

export interface IdentityWatcherOptions {
  fetchCompute: (signal: AbortSignal) => Promise<InstanceCompute>;
  logger: Logger;
  /** Re-read after success; identity only changes on reboot/reimage, so rarely. */
  refreshMs?: number;
  /** First retry delay after a failure; doubles up to maxRetryMs. */
  minRetryMs?: number;
  maxRetryMs?: number;
}

/**
 * Keeps this VM's instance metadata in the background so the 1 Hz poll never waits for it.
 * While it is unknown, records still flow with empty identity fields (and affectsThisVm null):
 * never hold back what cannot be ruled out.
 */
export class IdentityWatcher {
  private compute: InstanceCompute | null = null;
  private timer: NodeJS.Timeout | undefined;
  private readonly abort = new AbortController();
  private failures = 0;
  private readonly refreshMs: number;
  private readonly minRetryMs: number;
  private readonly maxRetryMs: number;
  private firstAttempt: Promise<void> | undefined;

  constructor(private readonly options: IdentityWatcherOptions) {
    this.refreshMs = options.refreshMs ?? 3_600_000;
    this.minRetryMs = options.minRetryMs ?? 5_000;
    this.maxRetryMs = options.maxRetryMs ?? 300_000;
  }

  get current(): InstanceCompute | null {
    return this.compute;
  }

  /** Starts watching; the returned promise settles after the first attempt (success or not). */
  start(): Promise<void> {
    this.firstAttempt ??= this.refresh();
    return this.firstAttempt;
  }

  private async refresh(): Promise<void> {
    try {
      const compute = await this.options.fetchCompute(this.abort.signal);
      if (!this.compute || this.compute.vmId !== compute.vmId || this.compute.name !== compute.name) {
        this.options.logger.info(
          { vmName: compute.name, vmId: compute.vmId, vmScaleSetName: compute.vmScaleSetName },
          'VM identity from instance metadata',
        );
      }
      if (this.failures > 0 && this.compute === null)
        this.options.logger.info('instance metadata reachable again');
      this.compute = compute;
      this.failures = 0;
      this.schedule(this.refreshMs);
    } catch (err) {
      if (this.abort.signal.aborted) return;
      this.failures++;
      const delay = Math.min(this.maxRetryMs, this.minRetryMs * 2 ** (this.failures - 1));
      // Loud on the first failure, then once per doubling: no log storm while IMDS is down.
      if (this.failures === 1 || Number.isInteger(Math.log2(this.failures))) {
        this.options.logger.warn(
          { err, failures: this.failures, retryInMs: delay, identityKnown: this.compute !== null },
          this.compute
            ? 'instance metadata refresh failed; keeping the identity already known'
            : 'instance metadata unavailable: records flow with empty identity fields until it answers',
        );
      }
      this.schedule(delay);
    }
  }

  private schedule(ms: number): void {
    if (this.abort.signal.aborted) return;
    this.timer = setTimeout(() => void this.refresh(), ms);
    this.timer.unref();
  }

  stop(): void {
    this.abort.abort();
    clearTimeout(this.timer);
  }
}

export function shipperIdentity(): ShipperIdentity {
  return { hostname: hostname(), shipperVersion: SHIPPER_VERSION };
}
