import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { ScheduledEventsDocument } from '../../imds/types.js';
import type { Logger } from '../../observability/logger.js';
import { builtinScenario, builtinScenarioSummaries, isBuiltinScenario } from './builtins.js';
import { type Clock, systemClock } from './clock.js';
import { type FaultSpec, parseFault } from './faults.js';
import { instanceDocument, resolveIdentity, type VmIdentity, type VmIdentityInput } from './identity.js';
import {
  type ApprovalRecord,
  type EmulatedEvent,
  etagOf,
  type HistoryEntry,
  type NotBeforeFormat,
  ScheduledEventsModel,
} from './model.js';
import {
  loadScenarioFile,
  parseEvent,
  parseScenario,
  parseStep,
  type Scenario,
  type ScenarioStep,
} from './scenario.js';
import { ValidationError } from './validate.js';

export interface ImdsEmulatorOptions {
  /** Interface to bind; default 127.0.0.1 (never all interfaces unless asked). */
  host?: string;
  /** TCP port; 0 (default in-process) picks a free one. */
  port?: number;
  /** Built-in scenario name, path of a scenario JSON file, or a parsed scenario; default `idle`. */
  scenario?: string | Scenario;
  /** Speed factor: scenario seconds are divided by it (60 = "dev timing"). Default: the scenario's, else 1. */
  speed?: number;
  /** After the last step: stay (default) or loop. Default: the scenario's, else stay. */
  after?: 'stay' | 'loop';
  /** Notice of Terminate in built-in scenarios, 300..900 s (default 300). */
  terminateNoticeSeconds?: number;
  identity?: VmIdentityInput;
  /** Time source; default the system clock. Use `createManualClock()` to drive time from tests. */
  clock?: Clock;
  /** Format of NotBefore: rfc1123 (default, as Azure) or iso. */
  notBeforeFormat?: NotBeforeFormat;
  /** Requests per second per client address on /metadata; beyond: 429. 0 (default) = unlimited; IMDS's is 5. */
  rateLimit?: number;
  /** Delay of the first scheduled-events call in scenario seconds (≤ 120, divided by the speed factor). */
  enrolmentDelaySeconds?: number;
  /** Serve the control API under /_emulator/ (default true). */
  control?: boolean;
  /** Seed of generated EventIds (default random). */
  seed?: string;
  logger?: Logger;
  /** Entries kept in the request log (default 10 000). */
  requestLogLimit?: number;
}

export interface RequestLogEntry {
  seq: number;
  at: string;
  atMs: number;
  client: string;
  method: string;
  path: string;
  route: 'scheduledevents' | 'instance' | 'control' | 'other';
  metadataHeader: boolean;
  ifNoneMatch: string | null;
  /** HTTP status sent; 0 while pending, or when the connection was dropped or left hanging. */
  status: number;
  /** DocumentIncarnation served (200 and 304 on scheduled events). */
  incarnation: number | null;
  fault: string | null;
  done: boolean;
}

export interface ImdsEmulator {
  /** Base URL, e.g. `http://127.0.0.1:41234` (use as the shipper's IMDS endpoint). */
  readonly url: string;
  readonly host: string;
  readonly port: number;
  readonly identity: VmIdentity;
  /** The state machine behind the server (for assertions; prefer the methods below). */
  readonly model: ScheduledEventsModel;
  loadScenario(
    scenario: string | Scenario,
    opts?: { speed?: number; after?: 'stay' | 'loop'; keepEvents?: boolean },
  ): Promise<Scenario>;
  /** Applies a step now (schedule/start/reschedule/cancel/complete/fault); returns the EventId touched. */
  apply(step: ScenarioStep): string | null;
  addFault(fault: FaultSpec): void;
  clearFaults(): void;
  /** Moves emulator time forward by `ms` of emulator time. */
  advance(ms: number): void;
  /** Jumps to the next pending change; returns its time or null when nothing is pending. */
  advanceToNext(): number | null;
  nextChangeAt(): number | null;
  document(apiVersion?: string): ScheduledEventsDocument;
  events(): EmulatedEvent[];
  eventIdOf(ref: string): string | null;
  requests(sinceSeq?: number): RequestLogEntry[];
  approvals(): ApprovalRecord[];
  history(): HistoryEntry[];
  /** Resolves once a scheduled-events GET that arrived after `afterSeq` was answered (200 or 304). */
  waitForPoll(afterSeq: number, timeoutMs?: number): Promise<RequestLogEntry>;
  /** Sequence number of the last /metadata (or unknown-path) request received; control calls have none. */
  lastSeq(): number;
  close(): Promise<void>;
}

export const NEWEST_API_VERSIONS = ['2023-07-01', '2021-12-13', '2021-11-15'];
const MAX_BODY = 64 * 1024;
const JSON_TYPE = 'application/json; charset=utf-8';

/** Resolves a scenario argument: a built-in name, a JSON file path, or an already parsed scenario. */
export async function resolveScenario(
  scenario: string | Scenario,
  opts: { terminateNoticeSeconds?: number } = {},
): Promise<Scenario> {
  if (typeof scenario !== 'string') return parseScenario(scenario);
  if (isBuiltinScenario(scenario)) {
    return builtinScenario(
      scenario,
      opts.terminateNoticeSeconds === undefined
        ? {}
        : { terminateNoticeSeconds: opts.terminateNoticeSeconds },
    );
  }
  if (scenario.endsWith('.json') || scenario.includes('/') || scenario.includes('\\'))
    return loadScenarioFile(scenario);
  throw new Error(
    `unknown scenario ${JSON.stringify(scenario)}: not a built-in (${builtinScenarioSummaries()
      .map((s) => s.name)
      .join(', ')}) nor a .json file`,
  );
}

const apiVersionMemo = new Map<string, boolean>();

function validApiVersion(v: string): boolean {
  let ok = apiVersionMemo.get(v);
  if (ok === undefined) {
    ok = checkApiVersion(v);
    if (apiVersionMemo.size > 256) apiVersionMemo.clear();
    apiVersionMemo.set(v, ok);
  }
  return ok;
}

function checkApiVersion(v: string): boolean {
  if (!/^\d{4}-\d{2}-\d{2}$/.test(v)) return false;
  const d = new Date(`${v}T00:00:00Z`);
  return !Number.isNaN(d.getTime()) && d.toISOString().startsWith(v) && v >= '2017-03-01';
}

function matchesIfNoneMatch(header: string | undefined, etag: string): boolean {
  if (!header) return false;
  return header.split(',').some((raw) => {
    const t = raw.trim();
    return t === '*' || t === etag || t === `W/${etag}`;
  });
}

/** Starts the IMDS emulator on a real socket. */
export async function startImdsEmulator(options: ImdsEmulatorOptions = {}): Promise<ImdsEmulator> {
  const host = options.host ?? '127.0.0.1';
  const logger = options.logger;
  const identity = resolveIdentity(options.identity);
  const clock = options.clock ?? systemClock;
  const terminateOpt =
    options.terminateNoticeSeconds === undefined
      ? {}
      : { terminateNoticeSeconds: options.terminateNoticeSeconds };
  const initial = await resolveScenario(options.scenario ?? 'idle', terminateOpt);
  const speed = options.speed ?? initial.speed ?? 1;
  if (!(speed > 0) || !Number.isFinite(speed))
    throw new RangeError(`speed must be a positive number, got ${speed}`);
  const rateLimit = options.rateLimit ?? 0;
  if (!(rateLimit >= 0) || !Number.isFinite(rateLimit))
    throw new RangeError(`rateLimit must be ≥ 0, got ${rateLimit}`);
  const model = new ScheduledEventsModel({
    clock,
    identity,
    speed,
    ...(options.after === undefined ? {} : { after: options.after }),
    ...(options.notBeforeFormat === undefined ? {} : { notBeforeFormat: options.notBeforeFormat }),
    ...(options.seed === undefined ? {} : { seed: options.seed }),
    ...(logger === undefined ? {} : { logger }),
  });
  if (options.enrolmentDelaySeconds !== undefined && options.enrolmentDelaySeconds > 0) {
    model.addFault(
      parseFault({ kind: 'enrolment', seconds: options.enrolmentDelaySeconds }, 'enrolmentDelaySeconds'),
    );
  }
  model.loadScenario(initial, {
    speed,
    ...(options.after === undefined ? {} : { after: options.after }),
  });

  const controlEnabled = options.control ?? true;
  let boundToLoopback = true; // set from the real address once listening
  const logLimit = options.requestLogLimit ?? 10_000;
  const requestLog: RequestLogEntry[] = [];
  let seq = 0;
  const timers = new Set<NodeJS.Timeout>();
  const pollWaiters = new Set<{
    afterSeq: number;
    resolve: (e: RequestLogEntry) => void;
    reject: (err: Error) => void;
  }>();
  const rateWindows = new Map<string, number[]>();
  const instanceText = JSON.stringify(instanceDocument(identity));
  const instanceEtag = etagOf(instanceText);
  const computeText = JSON.stringify((instanceDocument(identity) as { compute: unknown }).compute);
  const computeEtag = etagOf(computeText);

  const later = (ms: number, fn: () => void) => {
    const timer = setTimeout(() => {
      timers.delete(timer);
      fn();
    }, ms);
    timers.add(timer);
  };

  const finish = (entry: RequestLogEntry, status: number) => {
    entry.status = status;
    entry.done = true;
    if (entry.route === 'scheduledevents' && entry.method === 'GET' && (status === 200 || status === 304)) {
      for (const w of pollWaiters) {
        if (entry.seq > w.afterSeq) {
          pollWaiters.delete(w);
          w.resolve(entry);
        }
      }
    }
  };

  const send = (
    res: ServerResponse,
    entry: RequestLogEntry,
    status: number,
    body: string,
    headers: Record<string, string> = {},
  ) => {
    if (res.destroyed) return;
    const buf = Buffer.from(body, 'utf8');
    res.writeHead(status, {
      'Content-Type': headers['Content-Type'] ?? JSON_TYPE,
      'Content-Length': String(buf.length),
      ...headers,
    });
    res.end(status === 304 ? undefined : buf);
    finish(entry, status);
  };

  const sendError = (
    res: ServerResponse,
    entry: RequestLogEntry,
    status: number,
    error: string,
    extra = {},
  ) => send(res, entry, status, JSON.stringify({ error, ...extra }));

  const rateLimited = (client: string): boolean => {
    if (rateLimit <= 0) return false;
    const now = model.now();
    let window = rateWindows.get(client);
    if (!window) {
      window = [];
      rateWindows.set(client, window);
      if (rateWindows.size > 1024) rateWindows.clear();
    }
    while (window.length > 0 && (window[0] as number) <= now - 1000) window.shift();
    if (window.length >= rateLimit) return true;
    window.push(now);
    return false;
  };

  const readBody = (req: IncomingMessage): Promise<string | null> =>
    new Promise((resolve, reject) => {
      const chunks: Buffer[] = [];
      let size = 0;
      req.on('data', (c: Buffer) => {
        size += c.length;
        if (size > MAX_BODY) {
          resolve(null);
          req.removeAllListeners('data');
          req.resume();
          return;
        }
        chunks.push(c);
      });
      req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
      req.on('error', reject);
    });

  /** Serves a metadata request after header checks, rate limit and faults. */
  const serveMetadata = async (
    req: IncomingMessage,
    res: ServerResponse,
    entry: RequestLogEntry,
    url: URL,
    route: 'scheduledevents' | 'instance',
  ) => {
    if (req.headers['x-forwarded-for'] !== undefined) {
      return sendError(
        res,
        entry,
        400,
        'Bad request. The request contains an X-Forwarded-For header: IMDS must not be reached through a proxy.',
      );
    }
    if ((req.headers.metadata ?? '').toString().toLowerCase() !== 'true') {
      return sendError(res, entry, 400, 'Bad request. Required metadata header not specified');
    }
    const apiVersion = url.searchParams.get('api-version');
    if (apiVersion === null || apiVersion === '') {
      return sendError(
        res,
        entry,
        400,
        'Bad request. api-version was not specified in the request. For more information refer to aka.ms/azureimds',
        { 'newest-versions': NEWEST_API_VERSIONS },
      );
    }
    if (!validApiVersion(apiVersion)) {
      return sendError(
        res,
        entry,
        400,
        'Bad request. api-version is invalid or was not specified in the request. For more information refer to aka.ms/azureimds',
        { 'newest-versions': NEWEST_API_VERSIONS },
      );
    }
    const method = req.method ?? 'GET';
    if (!(method === 'GET' || (method === 'POST' && route === 'scheduledevents'))) {
      res.setHeader('Allow', route === 'scheduledevents' ? 'GET, POST' : 'GET');
      return sendError(res, entry, 405, 'Method not allowed');
    }
    if (rateLimited(entry.client)) {
      entry.fault = 'rate-limit';
      return sendError(res, entry, 429, 'Too many requests');
    }
    let fault = model.takeFault(route);
    let delayMs = 0;
    while (fault && (fault.kind === 'enrolment' || fault.kind === 'latency')) {
      entry.fault = entry.fault ? `${entry.fault}+${fault.kind}` : fault.kind;
      delayMs += fault.kind === 'latency' ? (fault.ms ?? 0) : model.scale(fault.seconds ?? 120);
      fault = model.takeFault(route);
    }
    if (fault) entry.fault = entry.fault ? `${entry.fault}+${fault.kind}` : fault.kind;
    const body = method === 'POST' ? await readBody(req) : null;
    const respond = () => respondMetadata(req, res, entry, url, route, apiVersion, fault, body);
    if (delayMs > 0) later(delayMs, respond);
    else respond();
  };

  const respondMetadata = (
    req: IncomingMessage,
    res: ServerResponse,
    entry: RequestLogEntry,
    url: URL,
    route: 'scheduledevents' | 'instance',
    apiVersion: string,
    fault: FaultSpec | null,
    body: string | null,
  ) => {
    if (res.destroyed) return;
    if (fault) {
      switch (fault.kind) {
        case 'status': {
          const status = fault.status ?? 500;
          const message =
            status === 410
              ? 'Gone'
              : status === 429
                ? 'Too many requests'
                : status >= 500
                  ? 'Internal server error'
                  : 'Error';
          return sendError(res, entry, status, message);
        }
        case 'hang':
          return; // left open; the socket is destroyed by the client or by close()
        case 'drop':
          req.socket.destroy();
          entry.done = true;
          return;
        case 'malformed':
          return send(res, entry, 200, '{"DocumentIncarnation": 1, "Events": [ {"EventId": ');
        case 'wrong-shape':
          return send(
            res,
            entry,
            200,
            JSON.stringify({ DocumentIncarnation: 'one', Events: { EventId: 42 } }),
          );
        case 'truncated': {
          const text = route === 'scheduledevents' ? model.documentText(apiVersion).text : instanceText;
          const full = Buffer.from(text, 'utf8');
          res.writeHead(200, { 'Content-Type': JSON_TYPE, 'Content-Length': String(full.length) });
          res.write(full.subarray(0, Math.max(1, Math.floor(full.length / 2))));
          entry.status = 200;
          entry.done = true;
          later(5, () => req.socket.destroy());
          return;
        }
        default:
          break;
      }
    }
    if (route === 'instance') return serveInstance(res, entry, url, req);
    if (req.method === 'POST') return serveApproval(res, entry, body);
    const { text, etag, incarnation } = model.documentText(apiVersion);
    entry.incarnation = incarnation;
    if (matchesIfNoneMatch(req.headers['if-none-match'], etag)) {
      return send(res, entry, 304, '', { ETag: etag });
    }
    return send(res, entry, 200, text, { ETag: etag });
  };

  const serveInstance = (res: ServerResponse, entry: RequestLogEntry, url: URL, req: IncomingMessage) => {
    const rest = url.pathname.replace(/^\/metadata\/instance\/?/, '').replace(/\/$/, '');
    if (rest === '') {
      if (matchesIfNoneMatch(req.headers['if-none-match'], instanceEtag))
        return send(res, entry, 304, '', { ETag: instanceEtag });
      return send(res, entry, 200, instanceText, { ETag: instanceEtag });
    }
    if (rest === 'compute') {
      if (matchesIfNoneMatch(req.headers['if-none-match'], computeEtag))
        return send(res, entry, 304, '', { ETag: computeEtag });
      return send(res, entry, 200, computeText, { ETag: computeEtag });
    }
    let node: unknown = JSON.parse(instanceText);
    for (const segment of rest.split('/')) {
      if (Array.isArray(node) && /^\d+$/.test(segment)) node = node[Number(segment)];
      else if (node !== null && typeof node === 'object' && Object.hasOwn(node, segment)) {
        node = (node as Record<string, unknown>)[segment];
      } else node = undefined;
      if (node === undefined) return sendError(res, entry, 404, 'Not found');
    }
    const isLeaf = typeof node !== 'object' || node === null;
    const format = url.searchParams.get('format');
    if (isLeaf && format !== 'text') {
      return sendError(res, entry, 400, 'Bad request. Leaf nodes require the format=text query parameter');
    }
    const text = isLeaf ? String(node) : JSON.stringify(node);
    return send(res, entry, 200, text, {
      ETag: etagOf(text),
      ...(isLeaf ? { 'Content-Type': 'text/plain; charset=utf-8' } : {}),
    });
  };

  const serveApproval = (res: ServerResponse, entry: RequestLogEntry, body: string | null) => {
    if (body === null) return sendError(res, entry, 413, 'Request body too large');
    let parsed: unknown;
    try {
      parsed = JSON.parse(body);
    } catch {
      return sendError(res, entry, 400, 'Bad request. The request body is not valid JSON');
    }
    const requests = (parsed as { StartRequests?: unknown } | null)?.StartRequests;
    if (
      typeof parsed !== 'object' ||
      parsed === null ||
      !Array.isArray(requests) ||
      !requests.every(
        (r) =>
          typeof r === 'object' &&
          r !== null &&
          typeof (r as { EventId?: unknown }).EventId === 'string' &&
          (r as { EventId: string }).EventId !== '',
      )
    ) {
      return sendError(res, entry, 400, 'Bad request. Expected {"StartRequests":[{"EventId":"..."}]}');
    }
    const ids = (requests as { EventId: string }[]).map((r) => r.EventId);
    const record = model.approve(ids, entry.client);
    if (record.outcome === 'rejected')
      return sendError(res, entry, 400, `Bad request. ${record.reason ?? ''}`);
    return send(res, entry, 200, '');
  };

  const serveControl = async (
    req: IncomingMessage,
    res: ServerResponse,
    entry: RequestLogEntry,
    url: URL,
  ) => {
    const method = req.method ?? 'GET';
    const path = url.pathname.replace(/\/$/, '');
    const json = (status: number, value: unknown) => send(res, entry, status, `${JSON.stringify(value)}\n`);
    const bodyJson = async (): Promise<unknown> => {
      const text = await readBody(req);
      if (text === null) throw new ValidationError('body', 'too large');
      if (text.trim() === '') return {};
      try {
        return JSON.parse(text);
      } catch (err) {
        throw new ValidationError('body', `not valid JSON (${(err as Error).message})`);
      }
    };
    try {
      const key = `${method} ${path}`;
      switch (key) {
        case 'GET /_emulator/state':
          return json(200, {
            now: new Date(model.now()).toISOString(),
            speed: model.speed,
            scenario: model.scenarioName,
            incarnation: model.incarnation,
            nextChangeAt: nextIso(model.nextChangeAt()),
            events: model.currentEvents(),
            faults: model.faults(),
            identity,
            lastSeq: seq,
          });
        case 'GET /_emulator/document':
          return json(200, model.document(url.searchParams.get('api-version') ?? '2020-07-01'));
        case 'GET /_emulator/scenarios':
          return json(200, builtinScenarioSummaries());
        case 'POST /_emulator/scenario': {
          const body = (await bodyJson()) as Record<string, unknown>;
          const rawName = body.name ?? '';
          // A non-string name is looked up (and reported) as its JSON text, never as "[object Object]".
          const name = typeof rawName === 'string' ? rawName : JSON.stringify(rawName);
          if (body.scenario === undefined && !isBuiltinScenario(name) && !boundToLoopback) {
            // Reading files on behalf of a network client would let it probe the disk.
            throw new ValidationError(
              'body.name',
              'scenario files load over the control API only when bound to loopback; send {"scenario": {…}} inline',
            );
          }
          const source =
            body.scenario !== undefined
              ? parseScenario(body.scenario, 'scenario')
              : await resolveScenario(name, terminateOpt);
          const speedOpt = body.speed === undefined ? undefined : Number(body.speed);
          if (speedOpt !== undefined && !(speedOpt > 0))
            throw new ValidationError('speed', `must be > 0, got ${String(body.speed)}`);
          const after = body.after === 'loop' || body.after === 'stay' ? body.after : undefined;
          model.loadScenario(source, {
            ...(speedOpt === undefined ? {} : { speed: speedOpt }),
            ...(after === undefined ? {} : { after }),
            keepEvents: body.keepEvents === true,
          });
          return json(200, { scenario: source.name, speed: model.speed, incarnation: model.incarnation });
        }
        case 'POST /_emulator/steps': {
          const body = await bodyJson();
          const list = Array.isArray(body) ? body : [body];
          const steps = list.map((s, i) =>
            parseStep(s, Array.isArray(body) ? `body[${i}]` : 'body', { requireAt: false }),
          );
          const eventIds = steps.map((s) => model.apply(s));
          return json(200, { eventIds, incarnation: model.incarnation });
        }
        case 'POST /_emulator/events': {
          const body = (await bodyJson()) as Record<string, unknown>;
          const { status, ...event } = body;
          const started = status === 'Started';
          if (status !== undefined && status !== 'Started' && status !== 'Scheduled') {
            throw new ValidationError(
              'body.status',
              `expected "Scheduled" or "Started", got ${JSON.stringify(status)}`,
            );
          }
          const spec = parseEvent(event, 'body', !started);
          const eventId = model.apply(
            started ? { at: 0, action: 'start', event: spec } : { at: 0, action: 'schedule', event: spec },
          );
          return json(200, { eventId, incarnation: model.incarnation });
        }
        case 'POST /_emulator/faults': {
          const fault = model.addFault(parseFault(await bodyJson(), 'body'));
          return json(200, fault);
        }
        case 'GET /_emulator/faults':
          return json(200, model.faults());
        case 'DELETE /_emulator/faults':
          model.clearFaults();
          return json(200, { cleared: true });
        case 'POST /_emulator/advance': {
          const body = (await bodyJson()) as Record<string, unknown>;
          if (body.toNext === true) model.advanceToNext();
          else {
            const ms =
              typeof body.ms === 'number'
                ? body.ms
                : typeof body.seconds === 'number'
                  ? body.seconds * 1000
                  : typeof body.scenarioSeconds === 'number'
                    ? model.scale(body.scenarioSeconds)
                    : Number.NaN;
            if (!(ms >= 0)) {
              throw new ValidationError(
                'body',
                'expected {"ms": n}, {"seconds": n}, {"scenarioSeconds": n} (n ≥ 0) or {"toNext": true}',
              );
            }
            model.advance(ms);
          }
          return json(200, {
            now: new Date(model.now()).toISOString(),
            incarnation: model.incarnation,
            nextChangeAt: nextIso(model.nextChangeAt()),
          });
        }
        case 'GET /_emulator/requests': {
          const since = Number(url.searchParams.get('since') ?? '0');
          return json(
            200,
            requestLog.filter((e) => e.seq > since),
          );
        }
        case 'DELETE /_emulator/requests':
          requestLog.length = 0;
          return json(200, { cleared: true });
        case 'GET /_emulator/approvals':
          return json(200, model.approvals());
        case 'GET /_emulator/history':
          return json(200, model.history());
        case 'POST /_emulator/reset':
          model.reset();
          requestLog.length = 0;
          rateWindows.clear();
          return json(200, { scenario: model.scenarioName, incarnation: model.incarnation });
        default:
          return sendError(res, entry, 404, `no control route ${key}`);
      }
    } catch (err) {
      if (err instanceof ValidationError || err instanceof RangeError)
        return sendError(res, entry, 400, err.message);
      return sendError(res, entry, 400, (err as Error).message);
    }
  };

  const server: Server = createServer((req, res) => {
    const atMs = model.now();
    const url = new URL(req.url ?? '/', 'http://imds.local');
    const path = url.pathname;
    const route: RequestLogEntry['route'] =
      path === '/metadata/scheduledevents' || path === '/metadata/scheduledevents/'
        ? 'scheduledevents'
        : path === '/metadata/instance' || path.startsWith('/metadata/instance/')
          ? 'instance'
          : controlEnabled && path.startsWith('/_emulator/')
            ? 'control'
            : 'other';
    const entry: RequestLogEntry = {
      seq: route === 'control' ? 0 : ++seq,
      at: new Date(atMs).toISOString(),
      atMs,
      client: req.socket.remoteAddress ?? 'unknown',
      method: req.method ?? 'GET',
      path: req.url ?? '/',
      route,
      metadataHeader: req.headers.metadata !== undefined,
      ifNoneMatch: req.headers['if-none-match'] ?? null,
      status: 0,
      incarnation: null,
      fault: null,
      done: false,
    };
    if (route !== 'control') {
      requestLog.push(entry);
      // Trim in batches so a benchmark-rate client does not pay an O(n) shift per request.
      if (requestLog.length > logLimit + Math.max(64, logLimit >> 3))
        requestLog.splice(0, requestLog.length - logLimit);
    }
    const handle = async () => {
      if (route === 'scheduledevents' || route === 'instance')
        return serveMetadata(req, res, entry, url, route);
      if (route === 'control') return serveControl(req, res, entry, url);
      return sendError(res, entry, 404, 'Not found');
    };
    handle().catch((err: unknown) => {
      logger?.error({ err }, 'imds emulator request failed');
      if (!res.headersSent) sendError(res, entry, 500, 'Internal server error');
    });
    if (logger?.isLevelEnabled('debug')) {
      res.on('close', () => logger.debug({ request: entry }, 'request'));
    }
  });
  server.keepAliveTimeout = 5_000;

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address() as AddressInfo;
  const urlHost = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  const baseUrl = `http://${urlHost}:${address.port}`;
  logger?.info({ url: baseUrl, scenario: model.scenarioName, speed: model.speed }, 'imds emulator listening');
  boundToLoopback = isLoopback(address.address);
  if (!boundToLoopback) {
    logger?.warn(
      { host: address.address, control: controlEnabled },
      'imds emulator reachable from the network: anyone who can reach it can read the VM identity and drive the control API',
    );
  }

  let closed: Promise<void> | null = null;
  return {
    url: baseUrl,
    host: address.address,
    port: address.port,
    identity,
    model,
    async loadScenario(scenario, opts = {}) {
      const resolved = await resolveScenario(scenario, terminateOpt);
      model.loadScenario(resolved, opts);
      return resolved;
    },
    apply: (step) => model.apply(step),
    addFault: (fault) => {
      model.addFault(parseFault(fault, 'fault'));
    },
    clearFaults: () => model.clearFaults(),
    advance: (ms) => {
      model.advance(ms);
    },
    advanceToNext: () => model.advanceToNext(),
    nextChangeAt: () => model.nextChangeAt(),
    document: (apiVersion) => model.document(apiVersion),
    events: () => model.currentEvents(),
    eventIdOf: (ref) => model.eventIdOf(ref),
    requests: (sinceSeq = 0) => requestLog.filter((e) => e.seq > sinceSeq).map((e) => ({ ...e })),
    approvals: () => model.approvals(),
    history: () => model.history(),
    lastSeq: () => seq,
    waitForPoll(afterSeq, timeoutMs = 10_000) {
      const done = requestLog.find(
        (e) =>
          e.seq > afterSeq &&
          e.route === 'scheduledevents' &&
          e.method === 'GET' &&
          (e.status === 200 || e.status === 304),
      );
      if (done) return Promise.resolve({ ...done });
      return new Promise((resolve, reject) => {
        const waiter = {
          afterSeq,
          resolve: (e: RequestLogEntry) => {
            clearTimeout(timer);
            timers.delete(timer);
            resolve({ ...e });
          },
          reject,
        };
        const timer = setTimeout(() => {
          timers.delete(timer);
          pollWaiters.delete(waiter);
          reject(
            new Error(`no scheduled-events poll answered after request #${afterSeq} within ${timeoutMs} ms`),
          );
        }, timeoutMs);
        timers.add(timer);
        pollWaiters.add(waiter);
      });
    },
    close() {
      closed ??= new Promise<void>((resolve) => {
        for (const t of timers) clearTimeout(t);
        timers.clear();
        for (const w of pollWaiters) w.reject(new Error('imds emulator closed'));
        pollWaiters.clear();
        server.close(() => resolve());
        server.closeAllConnections();
      });
      return closed;
    },
  };
}

function isLoopback(address: string): boolean {
  return address === '::1' || address.startsWith('127.') || address === '::ffff:127.0.0.1';
}

function nextIso(ms: number | null): string | null {
  return ms === null ? null : new Date(ms).toISOString();
}
