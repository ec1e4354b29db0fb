import { request as httpRequest } from 'node:http';

export interface HttpResult {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

export interface HttpOptions {
  method?: string;
  headers?: Record<string, string>;
  body?: string;
  timeoutMs?: number;
  localAddress?: string;
}

/** One HTTP request on a fresh connection; rejects on socket errors, timeouts and short bodies. */
export function http(url: string, options: HttpOptions = {}): Promise<HttpResult> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      url,
      {
        method: options.method ?? 'GET',
        headers: options.headers ?? {},
        agent: false,
        ...(options.localAddress ? { localAddress: options.localAddress } : {}),
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', reject);
        res.on('aborted', () => reject(new Error('response aborted')));
        res.on('end', () => {
          if (!res.complete) {
            reject(new Error('response incomplete'));
            return;
          }
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            body: Buffer.concat(chunks).toString('utf8'),
          });
        });
      },
    );
    req.setTimeout(options.timeoutMs ?? 5_000, () => req.destroy(new Error('client timeout')));
    req.on('error', reject);
    req.end(options.body);
  });
}

export const MD = { Metadata: 'true' };
export const SE = '/metadata/scheduledevents?api-version=2020-07-01';

export async function getDoc(base: string, headers: Record<string, string> = {}) {
  const res = await http(`${base}${SE}`, { headers: { ...MD, ...headers } });
  return { ...res, doc: res.status === 200 ? (JSON.parse(res.body) as Doc) : null };
}

export interface Doc {
  DocumentIncarnation: number;
  Events: {
    EventId: string;
    EventType: string;
    ResourceType: string;
    Resources: string[];
    EventStatus: string;
    NotBefore: string;
    Description?: string;
    EventSource?: string;
    DurationInSeconds?: number;
  }[];
}

export function approve(base: string, ids: string[], headers: Record<string, string> = MD) {
  return http(`${base}${SE}`, {
    method: 'POST',
    headers: { ...headers, 'Content-Type': 'application/json' },
    body: JSON.stringify({ StartRequests: ids.map((EventId) => ({ EventId })) }),
  });
}

export async function control(base: string, method: string, path: string, body?: unknown) {
  const res = await http(`${base}/_emulator/${path}`, {
    method,
    headers: { 'Content-Type': 'application/json' },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return { status: res.status, json: JSON.parse(res.body) };
}
