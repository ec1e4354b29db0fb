import http from 'node:http';
import pRetry, { AbortError } from 'p-retry';
import type { Logger } from '../observability/logger.js';
import { ImdsError } from './errors.js';
import { httpStatusError, imdsHttpRequest } from './http.js';
import type { InstanceCompute, ScheduledEventsDocument } from './types.js';
import { parseInstanceCompute, parseScheduledEventsDocument } from './validate.js';

export const SCHEDULED_EVENTS_API_VERSION = '2020-07-01';
export const INSTANCE_API_VERSION = '2021-02-01';
export const DEFAULT_IMDS_ENDPOINT = 'http://169.254.169.254';

export interface ImdsClientOptions {
  /** Base URL of IMDS; tests and the demo point it at an emulator. */
  endpoint?: string;
  logger?: Logger;
  /** Per-request timeout once IMDS has answered once (ms). */
  timeoutMs?: number;
  /** Timeout of the very first scheduled events call: it enrols the VM and may take up to 2 min. */
  firstCallTimeoutMs?: number;
  /** Retries inside one call on 410/429/5xx/network errors; the poll loop provides the long-term retry. */
  retries?: number;
  minRetryDelayMs?: number;
  maxRetryDelayMs?: number;
}

export interface ScheduledEventsResult {
  document: ScheduledEventsDocument;
  /** True when IMDS answered 304 and the cached document was returned. */
  notModified: boolean;
  attempts: number;
}

/**
 * Client of the IMDS Scheduled Events and instance metadata APIs. Keep-alive sockets (IMDS
 * allows 5 requests/s per VM and we make one per second), no proxy, `Metadata: true` always,
 * ETag/If-None-Match so an unchanged document costs a 304 and no parse.
 */
export class ImdsClient {
  readonly endpoint: URL;
  /** Two sockets: an identity read must not queue behind a slow scheduled-events call (and its timeout). */
  private readonly agent = new http.Agent({ keepAlive: true, maxSockets: 2, keepAliveMsecs: 10_000 });
  private readonly logger: Logger | undefined;
  private readonly timeoutMs: number;
  private readonly firstCallTimeoutMs: number;
  private readonly retries: number;
  private readonly minRetryDelayMs: number;
  private readonly maxRetryDelayMs: number;
  private readonly scheduledEventsUrl: URL;
  private etag: string | undefined;
  private lastDocument: ScheduledEventsDocument | undefined;
  private answeredOnce = false;

  constructor(options: ImdsClientOptions = {}) {
    this.endpoint = new URL(options.endpoint ?? DEFAULT_IMDS_ENDPOINT);
    this.logger = options.logger;
    this.timeoutMs = options.timeoutMs ?? 5_000;
    this.firstCallTimeoutMs = options.firstCallTimeoutMs ?? 120_000;
    this.retries = options.retries ?? 2;
    this.minRetryDelayMs = options.minRetryDelayMs ?? 250;
    this.maxRetryDelayMs = options.maxRetryDelayMs ?? 2_000;
    this.scheduledEventsUrl = this.url('/metadata/scheduledevents', SCHEDULED_EVENTS_API_VERSION);
  }

  private url(path: string, apiVersion: string): URL {
    const u = new URL(path, this.endpoint);
    u.searchParams.set('api-version', apiVersion);
    return u;
  }

  /** Retries transient failures within the call; 400/404 and malformed documents are not retried here. */
  private withRetry<T>(what: string, fn: () => Promise<T>, signal?: AbortSignal): Promise<T> {
    return pRetry(
      async () => {
        try {
          return await fn();
        } catch (err) {
          if (err instanceof ImdsError && (!err.retryable || err.kind === 'document'))
            throw new AbortError(err);
          throw err;
        }
      },
      {
        retries: this.retries,
        minTimeout: this.minRetryDelayMs,
        maxTimeout: this.maxRetryDelayMs,
        randomize: true,
        signal,
        onFailedAttempt: ({ error, attemptNumber, retriesLeft }) => {
          if (retriesLeft > 0)
            this.logger?.debug({ err: error, attemptNumber, what }, 'IMDS attempt failed, retrying');
        },
      },
    );
  }

  async getScheduledEvents(signal?: AbortSignal): Promise<ScheduledEventsResult> {
    let attempts = 0;
    const result = await this.withRetry(
      'scheduled events',
      async () => {
        attempts++;
        const headers: Record<string, string> = {};
        if (this.etag && this.lastDocument) headers['If-None-Match'] = this.etag;
        const res = await imdsHttpRequest({
          url: this.scheduledEventsUrl,
          method: 'GET',
          headers,
          timeoutMs: this.answeredOnce ? this.timeoutMs : this.firstCallTimeoutMs,
          agent: this.agent,
          signal,
        });
        if (res.status === 304 && this.lastDocument) {
          this.answeredOnce = true;
          return { document: this.lastDocument, notModified: true };
        }
        if (res.status !== 200) throw httpStatusError(res, 'scheduled events');
        this.answeredOnce = true;
        const document = parseScheduledEventsDocument(res.body);
        this.etag = res.etag;
        this.lastDocument = document;
        return { document, notModified: false };
      },
      signal,
    );
    return { ...result, attempts };
  }

  /** Approves (starts) events now: IMDS releases them for every VM in their Resources. */
  async approveEvents(eventIds: readonly string[], signal?: AbortSignal): Promise<void> {
    const body = JSON.stringify({ StartRequests: eventIds.map((EventId) => ({ EventId })) });
    await this.withRetry(
      'approve',
      async () => {
        const res = await imdsHttpRequest({
          url: this.scheduledEventsUrl,
          method: 'POST',
          body,
          timeoutMs: this.timeoutMs,
          agent: this.agent,
          signal,
        });
        if (res.status < 200 || res.status > 299) throw httpStatusError(res, 'approval');
      },
      signal,
    );
  }

  async getInstanceCompute(signal?: AbortSignal): Promise<InstanceCompute> {
    return this.withRetry(
      'instance metadata',
      async () => {
        const res = await imdsHttpRequest({
          url: this.url('/metadata/instance', INSTANCE_API_VERSION),
          method: 'GET',
          timeoutMs: this.timeoutMs,
          agent: this.agent,
          signal,
        });
        if (res.status !== 200) throw httpStatusError(res, 'instance metadata');
        return parseInstanceCompute(res.body);
      },
      signal,
    );
  }

  close(): void {
    this.agent.destroy();
  }
}
