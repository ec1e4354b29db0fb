/** Why an IMDS call failed, with whether trying again can help. */
export type ImdsFailureKind = 'http' | 'network' | 'timeout' | 'document';

export class ImdsError extends Error {
  readonly kind: ImdsFailureKind;
  /** HTTP status when kind is 'http'. */
  readonly status: number | undefined;
  /** False for 400/404 and malformed documents served with 200: retrying at once will not help. */
  readonly retryable: boolean;

  constructor(
    message: string,
    options: { kind: ImdsFailureKind; status?: number; retryable: boolean; cause?: unknown },
  ) {
    super(message, { cause: options.cause });
    this.name = 'ImdsError';
    this.kind = options.kind;
    this.status = options.status;
    this.retryable = options.retryable;
  }
}

/** 410 (service warming up, retry up to 70 s), 429 (rate limit) and 5xx are transient. */
export function isRetryableStatus(status: number): boolean {
  return status === 410 || status === 429 || status >= 500;
}
