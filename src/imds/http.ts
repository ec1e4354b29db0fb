import http from 'node:http';
import { ImdsError, isRetryableStatus } from './errors.js';

export interface ImdsHttpResponse {
  status: number;
  etag: string | undefined;
  body: string;
}

export interface ImdsHttpRequest {
  url: URL;
  method: 'GET' | 'POST';
  headers?: Record<string, string>;
  body?: string;
  timeoutMs: number;
  agent: http.Agent;
  signal?: AbortSignal | undefined;
}

/** Documents are a few KiB; anything past this is not IMDS and is refused rather than buffered. */
const MAX_BODY_BYTES = 1024 * 1024;

/**
 * One HTTP exchange with IMDS over node:http. node:http never consults HTTP_PROXY/HTTPS_PROXY,
 * so the link-local address is always reached directly: a proxied IMDS request is a classic
 * misconfiguration. `Metadata: true` is added here so no caller can forget it.
 */
export function imdsHttpRequest(req: ImdsHttpRequest): Promise<ImdsHttpResponse> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = { Metadata: 'true', ...req.headers };
    if (req.body !== undefined) {
      headers['Content-Type'] = 'application/json';
      headers['Content-Length'] = String(Buffer.byteLength(req.body));
    }
    let settled = false;
    const fail = (err: ImdsError) => {
      if (settled) return;
      settled = true;
      cleanup();
      reject(err);
    };
    const request = http.request(req.url, { method: req.method, headers, agent: req.agent }, (res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (chunk: Buffer) => {
        size += chunk.length;
        if (size > MAX_BODY_BYTES) {
          request.destroy();
          fail(
            new ImdsError(`IMDS response larger than ${MAX_BODY_BYTES} bytes`, {
              kind: 'document',
              retryable: false,
            }),
          );
          return;
        }
        chunks.push(chunk);
      });
      res.on('error', (err) =>
        fail(
          new ImdsError(`IMDS response aborted: ${err.message}`, {
            kind: 'network',
            retryable: true,
            cause: err,
          }),
        ),
      );
      res.on('aborted', () =>
        fail(new ImdsError('IMDS response aborted mid-body', { kind: 'network', retryable: true })),
      );
      res.on('end', () => {
        if (settled) return;
        settled = true;
        cleanup();
        const etag = res.headers.etag;
        resolve({
          status: res.statusCode ?? 0,
          etag: typeof etag === 'string' ? etag : undefined,
          body: Buffer.concat(chunks).toString('utf8'),
        });
      });
    });
    const timer = setTimeout(() => {
      request.destroy();
      fail(
        new ImdsError(`IMDS request timed out after ${req.timeoutMs} ms`, {
          kind: 'timeout',
          retryable: true,
        }),
      );
    }, req.timeoutMs);
    const onAbort = () => {
      request.destroy();
      fail(
        new ImdsError('IMDS request aborted', {
          kind: 'network',
          retryable: false,
          cause: req.signal?.reason,
        }),
      );
    };
    const cleanup = () => {
      clearTimeout(timer);
      req.signal?.removeEventListener('abort', onAbort);
    };
    if (req.signal?.aborted) return onAbort();
    req.signal?.addEventListener('abort', onAbort, { once: true });
    request.on('error', (err: NodeJS.ErrnoException) =>
      fail(
        new ImdsError(`IMDS unreachable at ${req.url.origin}: ${err.code ?? err.message}`, {
          kind: 'network',
          retryable: true,
          cause: err,
        }),
      ),
    );
    request.end(req.body);
  });
}

/** Turns a non-2xx/304 answer into an ImdsError carrying the body's error text, if any. */
export function httpStatusError(res: ImdsHttpResponse, what: string): ImdsError {
  const detail = res.body.trim().slice(0, 200);
  return new ImdsError(`IMDS ${what} answered HTTP ${res.status}${detail ? `: ${detail}` : ''}`, {
    kind: 'http',
    status: res.status,
    retryable: isRetryableStatus(res.status),
  });
}
