/**
 * A local Azure Event Hubs emulator: an AMQP 1.0 server (rhea) speaking what the official
 * clients need — SASL ANONYMOUS/MSSBCBS/EXTERNAL, CBS put-token with real SAS verification,
 * $management READ, partitioned sends (single and batched), selector-filtered receives with
 * credit and epochs — plus fault injection. See docs/eventhubs-emulator.md.
 */

import { createRequire } from 'node:module';
import { createServer as createNetServer, type Server, type Socket } from 'node:net';
import { createServer as createTlsServer } from 'node:tls';
import rhea, {
  type Connection,
  type Container,
  type Delivery,
  type EventContext,
  type Message,
  type Receiver,
  type Sender,
} from 'rhea';
import { createLogger, type Logger } from '../../observability/logger.js';
import { audiencePath, type SasKey, verifySas } from './sas.js';
import { decodeBody, PartitionLog, partitionFile, type StoredEvent } from './store.js';

const require = createRequire(import.meta.url);
type RheaConnectionCtor = new (
  options: Record<string, unknown>,
  container: Container,
) => Connection & { accept(socket: Socket): Connection };
const RheaConnection = require('rhea/lib/connection.js') as RheaConnectionCtor;
// rhea is CommonJS: Node's ESM loader only offers its default export.
const { create_container, message: rheaMessage, types } = rhea;

/** `message_format` of an Event Hubs batch: the body's data sections are each an encoded message. */
export const BATCH_MESSAGE_FORMAT = 0x80013700;
/** What the service advertises and enforces for Standard namespaces. */
export const DEFAULT_MAX_MESSAGE_SIZE = 1024 * 1024;
export const DEFAULT_HUB = 'scheduled-events';
export const DEFAULT_PARTITIONS = 2;
export const DEFAULT_KEY_NAME = 'RootManageSharedAccessKey';

export interface HubDefinition {
  name: string;
  /** Partition count, ids "0".."n-1". Default 2. */
  partitions?: number;
  /** Consumer groups besides `$default`. */
  consumerGroups?: string[];
}

export interface EventHubsEmulatorOptions {
  /** AMQP port on 127.0.0.1; 0 (default) picks a free one. */
  port?: number;
  /** Event hubs to serve. Default: one hub `scheduled-events` with 2 partitions. */
  hubs?: (string | HubDefinition)[];
  /** Partition count for hubs given by name only. Default 2. */
  partitions?: number;
  /** Extra consumer groups for hubs given by name only. */
  consumerGroups?: string[];
  /** Key name of the connection string. Default RootManageSharedAccessKey. */
  keyName?: string;
  /** Key of the connection string. Default: random per start (printed only in the connection string). */
  key?: string;
  /** More accepted keys (authorization rules). */
  extraKeys?: SasKey[];
  /** Accept CBS tokens without verifying them. Only for explicitly insecure local use. */
  allowAnonymous?: boolean;
  /** Directory for NDJSON partition files; events survive a restart. Default: memory only. */
  store?: string;
  /** Advertised and enforced max message (batch) size in bytes. Default 1 MiB. */
  maxMessageSize?: number;
  /** Control HTTP API port on 127.0.0.1: 0 (default) picks one, false disables it. */
  controlPort?: number | false;
  /**
   * An additional AMQPS (TLS) listener, for clients that cannot speak plain TCP to an emulator
   * (the Python azure-eventhub 5.11 client always uses TLS). `port` 0 picks one.
   */
  tls?: { cert: string | Buffer; key: string | Buffer; port?: number };
  /** Delay before a new TCP connection is served (fault: slow accepts). */
  acceptDelayMs?: number;
  logger?: Logger;
}

export interface EmulatorEvent {
  hub: string;
  partitionId: string;
  sequenceNumber: number;
  offset: string;
  enqueuedTimeUtc: Date;
  partitionKey?: string;
  /** JSON-parsed when the body is JSON text; else text; else bytes. */
  body: unknown;
  bodyBytes?: Buffer;
  applicationProperties?: Record<string, unknown>;
}

export interface PartitionInfo {
  hub: string;
  partitionId: string;
  beginningSequenceNumber: number;
  lastEnqueuedSequenceNumber: number;
  lastEnqueuedOffset: string;
  lastEnqueuedTimeUtc: Date;
  isEmpty: boolean;
}

export interface RejectSendsOptions {
  /** Default `com.microsoft:server-busy`. */
  condition?: string;
  description?: string;
}

export interface FaultState {
  rejectNext: number;
  rejectCondition: string;
  hangNext: number;
  hungDeliveries: number;
  listening: boolean;
  acceptDelayMs: number;
}

export interface EmulatorStats {
  connectionsAccepted: number;
  openConnections: number;
  batchesAccepted: number;
  eventsAccepted: number;
  sendsRejected: number;
  cbsAccepted: number;
  cbsRejected: number;
  eventsDelivered: number;
  /** Consumer (receive) links attached right now. */
  openConsumers: number;
}

type LinkRole =
  | { kind: 'cbs-requests' }
  | { kind: 'mgmt-requests' }
  | { kind: 'reply'; address: string }
  | { kind: 'producer'; hub: Hub; partition?: PartitionState }
  | { kind: 'consumer'; consumer: ConsumerState };

interface ConnState {
  id: number;
  socket: Socket;
  connection: Connection;
  /** audience path → expiry (ms) of a verified token. */
  tokens: Map<string, number>;
  replySenders: Sender[];
  links: Set<Sender | Receiver>;
}

interface ConsumerState {
  link: Sender;
  conn: ConnState;
  partition: PartitionState;
  consumerGroup: string;
  epoch?: number;
  next: number;
  /** The receiver asked for last-enqueued-event info on every delivery (trackLastEnqueuedEventProperties). */
  runtimeMetric: boolean;
}

const RUNTIME_METRIC = 'com.microsoft:enable-receiver-runtime-metric';

interface PartitionState {
  id: string;
  hub: Hub;
  log: PartitionLog;
  consumers: Set<ConsumerState>;
}

interface Hub {
  name: string;
  createdAt: Date;
  partitions: PartitionState[];
  consumerGroups: Set<string>;
  roundRobin: number;
}

const SERVER_BUSY = 'com.microsoft:server-busy';

/** Stable partition-key hash (FNV-1a 32-bit over UTF-8). Not the service's own hash. */
export function partitionForKey(key: string, partitionCount: number): number {
  let h = 0x811c9dc5;
  for (const byte of Buffer.from(key, 'utf8')) {
    h ^= byte;
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h % partitionCount;
}

/** `amqps://host:port/a/b` or `/a/b` or `a/b` → `a/b`. */
function entityPath(address: string | undefined): string {
  if (!address) return '';
  const m = /^[a-z][a-z0-9+.-]*:\/\/[^/]*(\/.*)?$/i.exec(address);
  const path = m ? (m[1] ?? '') : address;
  return path.replace(/^\/+/, '').replace(/\/+$/, '');
}

/** What rhea decodes a batch envelope's body into when it holds data sections (AMQP typecode 0x75). */
interface DataSectionBody {
  typecode: 0x75;
  /** True when the envelope holds several data sections (`content` is then an array of them). */
  multiple?: boolean;
  content?: unknown;
}

function isDataSectionBody(body: unknown): body is DataSectionBody {
  return typeof body === 'object' && body !== null && (body as { typecode?: unknown }).typecode === 0x75;
}

function toText(v: unknown): string | undefined {
  if (v === undefined || v === null) return undefined;
  if (typeof v === 'string') return v;
  if (Buffer.isBuffer(v)) return v.toString('utf8');
  if (typeof v === 'number' || typeof v === 'bigint') return String(v);
  return undefined;
}

/**
 * The last field each performative must carry, by descriptor. rhea omits trailing empty fields
 * (legal AMQP), but Python's pyamqp (azure-eventhub 5.x) reads frame fields by position and fails
 * on short lists, and appends a transfer's payload right after its last field. Padding with an
 * explicit null (batchable=false for transfers) keeps every position it reads present.
 */
const FRAME_PADDING: Record<number, [field: string, value: unknown, length: number]> = {
  16: ['idle_time_out', 120_000, 5], // open
  17: ['handle_max', 0xffffffff, 5], // begin
  18: ['properties', {}, 14], // attach (pyamqp merges it into a dict)
  19: ['handle', null, 5], // flow (session-level flows have no handle)
  20: ['batchable', false, 11], // transfer
  21: ['state', null, 5], // disposition
  22: ['error', null, 3], // detach
  23: ['error', null, 1], // end
  24: ['error', null, 1], // close
};

function padOutgoingFrames(connection: Connection): void {
  const c = connection as unknown as {
    _write_frame(channel: number, frame: unknown, payload?: unknown): void;
  };
  const write = c._write_frame.bind(connection);
  c._write_frame = (channel, frame, payload) => {
    const f = frame as { value?: unknown[]; constructor?: { descriptor?: { numeric?: number } } } & Record<
      string,
      unknown
    >;
    const code = f?.constructor?.descriptor?.numeric;
    const pad = code === undefined ? undefined : FRAME_PADDING[code];
    if (pad && Array.isArray(f.value) && f.value.length < pad[2] && f[pad[0]] === undefined)
      f[pad[0]] = pad[1];
    write(channel, frame, payload);
  };
}

/** The attach frame rhea will send for this link (set fields before the handler returns). */
function localAttach(link: Sender | Receiver): Record<string, unknown> {
  return (link as unknown as { local: { attach: Record<string, unknown> } }).local.attach;
}

function amqpError(condition: string, description: string): { condition: string; description: string } {
  return { condition, description };
}

/**
 * rhea re-arms a connection's idle timers on every input, even input that arrives after the
 * peer's close was processed (a half-closed socket), and only clears them when it sees the
 * disconnect. Once the socket is closed no input can follow, so clearing them then is safe; left
 * alone they would keep a process that stopped the emulator alive for 2 × idle-time-out.
 */
function stopIdleTimers(connection: object): void {
  const timers = connection as unknown as Record<
    'heartbeat_in' | 'heartbeat_out' | 'abort_idle',
    NodeJS.Timeout | undefined
  >;
  for (const name of ['heartbeat_in', 'heartbeat_out', 'abort_idle'] as const) {
    if (timers[name]) clearTimeout(timers[name]);
    timers[name] = undefined;
  }
}

export class EventHubsEmulatorServer {
  readonly hubs = new Map<string, Hub>();
  readonly maxMessageSize: number;
  readonly keyName: string;
  private keys: SasKey[];
  private readonly allowAnonymous: boolean;
  private readonly log: Logger;
  private readonly container: Container;
  private servers: Server[] = [];
  private readonly conns = new Map<number, ConnState>();
  private readonly connByRhea = new WeakMap<Connection, ConnState>();
  private readonly roles = new WeakMap<Sender | Receiver, LinkRole>();
  private nextConnId = 1;
  private port = 0;
  private tlsPort = 0;
  private listening = false;
  private reopenTimer: NodeJS.Timeout | undefined;
  private hung: Delivery[] = [];
  private readonly appendWaiters = new Set<() => void>();
  readonly faults: FaultState;
  readonly stats: EmulatorStats = {
    connectionsAccepted: 0,
    openConnections: 0,
    batchesAccepted: 0,
    eventsAccepted: 0,
    sendsRejected: 0,
    cbsAccepted: 0,
    cbsRejected: 0,
    eventsDelivered: 0,
    openConsumers: 0,
  };

  constructor(private readonly options: EventHubsEmulatorOptions & { key: string }) {
    this.maxMessageSize = options.maxMessageSize ?? DEFAULT_MAX_MESSAGE_SIZE;
    this.keyName = options.keyName ?? DEFAULT_KEY_NAME;
    this.keys = [{ name: this.keyName, key: options.key }, ...(options.extraKeys ?? [])];
    this.allowAnonymous = options.allowAnonymous ?? false;
    this.log = options.logger ?? createLogger({ level: 'silent' });
    this.faults = {
      rejectNext: 0,
      rejectCondition: SERVER_BUSY,
      hangNext: 0,
      hungDeliveries: 0,
      listening: false,
      acceptDelayMs: options.acceptDelayMs ?? 0,
    };
    this.loadHubs();
    this.container = create_container({ id: 'se-shipper-eventhubs-emulator' });
    const mechs = this.container.sasl_server_mechanisms as unknown as Record<string, unknown> & {
      enable_anonymous(): void;
    };
    mechs.enable_anonymous();
    // Other Azure SDKs authenticate over CBS after an EXTERNAL-like SASL step named MSSBCBS.
    const passThrough = () => ({
      outcome: undefined as boolean | undefined,
      username: 'cbs',
      start() {
        this.outcome = true;
      },
    });
    mechs.MSSBCBS = passThrough;
    mechs.EXTERNAL = passThrough;
    this.wire();
  }

  private loadHubs(): void {
    const defs: HubDefinition[] = (this.options.hubs ?? [DEFAULT_HUB]).map((h) =>
      typeof h === 'string'
        ? {
            name: h,
            partitions: this.options.partitions ?? DEFAULT_PARTITIONS,
            consumerGroups: this.options.consumerGroups ?? [],
          }
        : h,
    );
    if (defs.length === 0) throw new Error('at least one event hub is required');
    for (const def of defs) {
      if (!/^[A-Za-z0-9][A-Za-z0-9._-]{0,255}$/.test(def.name))
        throw new Error(`invalid event hub name "${def.name}"`);
      const count = def.partitions ?? DEFAULT_PARTITIONS;
      if (!Number.isInteger(count) || count < 1 || count > 1024)
        throw new Error(`invalid partition count ${count} for hub ${def.name}`);
      const key = def.name.toLowerCase();
      if (this.hubs.has(key)) throw new Error(`duplicate event hub "${def.name}"`);
      const hub: Hub = {
        name: def.name,
        createdAt: new Date(),
        partitions: [],
        consumerGroups: new Set(['$default', ...(def.consumerGroups ?? [])].map((c) => c.toLowerCase())),
        roundRobin: 0,
      };
      for (let i = 0; i < count; i++) {
        const id = String(i);
        const file = this.options.store ? partitionFile(this.options.store, def.name, id) : undefined;
        hub.partitions.push({ id, hub, log: new PartitionLog(def.name, id, file), consumers: new Set() });
      }
      this.hubs.set(key, hub);
    }
  }

  // ---------------------------------------------------------------------------------------
  // Listening, connections, faults at the transport level

  get amqpPort(): number {
    return this.port;
  }
  get amqpsPort(): number | undefined {
    return this.options.tls ? this.tlsPort : undefined;
  }
  get isListening(): boolean {
    return this.listening;
  }

  /** Starts (or resumes) listening on the same port(s) as before; concurrent calls share one attempt. */
  listen(): Promise<void> {
    if (this.listening) return Promise.resolve();
    if (this.reopenTimer) clearTimeout(this.reopenTimer);
    this.reopenTimer = undefined;
    this.starting ??= this.doListen().finally(() => {
      this.starting = undefined;
    });
    return this.starting;
  }
  private starting: Promise<void> | undefined;

  private async doListen(): Promise<void> {
    try {
      await this.bindAll();
    } catch (err) {
      const servers = this.servers;
      this.servers = [];
      for (const s of servers) s.close();
      throw err;
    }
    this.listening = true;
    this.faults.listening = true;
  }

  private async bindAll(): Promise<void> {
    const plain = createNetServer((socket) => this.onSocket(socket));
    this.servers.push(plain);
    this.port = await this.bind(plain, this.port || this.options.port || 0);
    if (this.options.tls) {
      const tlsServer = createTlsServer({ cert: this.options.tls.cert, key: this.options.tls.key });
      tlsServer.on('secureConnection', (socket) => this.onSocket(socket));
      tlsServer.on('tlsClientError', (err) =>
        this.log.debug({ err }, 'eventhubs emulator: TLS handshake failed'),
      );
      this.servers.push(tlsServer);
      this.tlsPort = await this.bind(tlsServer, this.tlsPort || this.options.tls.port || 0);
    }
  }

  private bind(server: Server, port: number): Promise<number> {
    return new Promise((resolve, reject) => {
      const onError = (err: Error) => reject(err);
      server.once('error', onError);
      server.listen({ host: '127.0.0.1', port }, () => {
        server.off('error', onError);
        const addr = server.address();
        resolve(typeof addr === 'object' && addr ? addr.port : port);
      });
    });
  }

  /**
   * Stops accepting connections (clients get ECONNREFUSED), by default also dropping the open
   * ones, as in an outage. With `durationMs` the listener comes back by itself, on the same port.
   */
  async stopListening(opts: { dropConnections?: boolean; durationMs?: number } = {}): Promise<void> {
    const servers = this.servers;
    this.servers = [];
    this.listening = false;
    this.faults.listening = false;
    // close() stops accepting at once; its callback waits for open connections to end.
    const closed = Promise.all(servers.map((s) => new Promise<void>((resolve) => s.close(() => resolve()))));
    if (opts.dropConnections ?? true) {
      this.dropConnections();
      await closed;
    }
    if (opts.durationMs !== undefined) {
      if (this.reopenTimer) clearTimeout(this.reopenTimer);
      this.reopenTimer = setTimeout(() => {
        this.reopenTimer = undefined;
        this.listen().catch((err: unknown) =>
          this.log.error({ err }, 'eventhubs emulator: could not listen again'),
        );
      }, opts.durationMs);
      this.reopenTimer.unref();
    }
    this.log.warn({ fault: 'offline', durationMs: opts.durationMs }, 'eventhubs emulator: stopped listening');
  }

  /** Destroys every open TCP connection (clients see a connection reset). */
  dropConnections(): number {
    const all = [...this.conns.values()];
    for (const c of all) {
      c.socket.destroy();
      this.forgetConnection(c);
    }
    if (all.length)
      this.log.warn(
        { fault: 'drop-connections', count: all.length },
        'eventhubs emulator: dropped connections',
      );
    return all.length;
  }

  private onSocket(socket: Socket): void {
    if (!this.listening) {
      socket.destroy();
      return;
    }
    const delay = this.faults.acceptDelayMs;
    if (delay > 0) {
      socket.on('error', () => {});
      setTimeout(() => {
        if (!socket.destroyed && this.listening) this.accept(socket);
        else socket.destroy();
      }, delay);
    } else {
      this.accept(socket);
    }
  }

  private accept(socket: Socket): void {
    const id = this.nextConnId++;
    const connection = new RheaConnection(
      {
        id: `emulator-${id}`,
        container_id: 'se-shipper-eventhubs-emulator',
        autoaccept: false,
        credit_window: 500,
        max_frame_size: 65536,
        // Sent in our open frame. Some clients (Python pyamqp) index the open frame's fields
        // positionally and fail when trailing ones are omitted, so idle-time-out must be present.
        idle_time_out: 120_000,
        // never reconnect: this is the accepting side
        reconnect: false,
      },
      this.container,
    ).accept(socket);
    padOutgoingFrames(connection);
    const state: ConnState = {
      id,
      socket,
      connection,
      tokens: new Map(),
      replySenders: [],
      links: new Set(),
    };
    this.conns.set(id, state);
    this.connByRhea.set(connection, state);
    this.stats.connectionsAccepted++;
    this.stats.openConnections = this.conns.size;
    socket.on('close', () => {
      stopIdleTimers(connection);
      this.forgetConnection(state);
    });
    this.log.debug(
      { connection: id, remote: `${socket.remoteAddress}:${socket.remotePort}` },
      'eventhubs emulator: connection accepted',
    );
  }

  private forgetConnection(state: ConnState): void {
    if (!this.conns.has(state.id)) return;
    this.conns.delete(state.id);
    this.stats.openConnections = this.conns.size;
    for (const link of state.links) this.forgetLink(link);
    state.links.clear();
    this.hung = this.hung.filter((d) => d.link.connection !== state.connection);
    this.faults.hungDeliveries = this.hung.length;
    this.log.debug({ connection: state.id }, 'eventhubs emulator: connection closed');
  }

  private countConsumers(): void {
    let n = 0;
    for (const hub of this.hubs.values()) for (const p of hub.partitions) n += p.consumers.size;
    this.stats.openConsumers = n;
  }

  private forgetLink(link: Sender | Receiver): void {
    const role = this.roles.get(link);
    if (role?.kind === 'consumer') {
      role.consumer.partition.consumers.delete(role.consumer);
      this.countConsumers();
    }
    if (role?.kind === 'producer' && this.hung.length > 0) {
      this.hung = this.hung.filter((d) => d.link !== link);
      this.faults.hungDeliveries = this.hung.length;
    }
    this.roles.delete(link);
  }

  /** Detaches every client link (senders and receivers, not CBS/$management) with an error. */
  detachLinks(
    opts: { condition?: string; description?: string; which?: 'all' | 'producers' | 'consumers' } = {},
  ): number {
    const condition = opts.condition ?? 'amqp:link:detach-forced';
    const which = opts.which ?? 'all';
    let n = 0;
    for (const c of this.conns.values()) {
      for (const link of [...c.links]) {
        const role = this.roles.get(link);
        const hit =
          (role?.kind === 'producer' && which !== 'consumers') ||
          (role?.kind === 'consumer' && which !== 'producers');
        if (!hit) continue;
        this.forgetLink(link);
        c.links.delete(link);
        link.close(
          amqpError(
            condition,
            opts.description ?? 'The link was detached by the emulator (fault injection).',
          ),
        );
        n++;
      }
    }
    this.log.warn({ fault: 'detach', condition, count: n }, 'eventhubs emulator: detached links');
    return n;
  }

  rejectNextSends(count: number, opts: RejectSendsOptions = {}): void {
    this.faults.rejectNext = Math.max(0, Math.floor(count));
    this.faults.rejectCondition = opts.condition ?? SERVER_BUSY;
    this.rejectDescription = opts.description;
    this.log.warn(
      { fault: 'reject', count, condition: this.faults.rejectCondition },
      'eventhubs emulator: rejecting next sends',
    );
  }
  private rejectDescription: string | undefined;

  /** The next `count` sends (default: all until stopHanging) are never settled nor stored. */
  hangSends(count = Number.POSITIVE_INFINITY): void {
    this.faults.hangNext = count;
    this.log.warn(
      { fault: 'hang', count: Number.isFinite(count) ? count : 'all' },
      'eventhubs emulator: hanging sends',
    );
  }

  /** Ends the hang fault. Deliveries already hung stay unsettled (the client times out on them). */
  stopHanging(): void {
    this.faults.hangNext = 0;
  }

  setAcceptDelay(ms: number): void {
    this.faults.acceptDelayMs = Math.max(0, ms);
  }

  clearFaults(): void {
    this.faults.rejectNext = 0;
    this.faults.hangNext = 0;
    this.faults.acceptDelayMs = 0;
  }

  // ---------------------------------------------------------------------------------------
  // Keys

  keyNames(): string[] {
    return this.keys.map((k) => k.name);
  }

  /** Adds or replaces (rotates) a key. Tokens already accepted stay valid until they expire, as in Azure. */
  setKey(name: string, key: string): void {
    if (!name || !key) throw new Error('key name and key are required');
    this.keys = [...this.keys.filter((k) => k.name !== name), { name, key }];
    this.log.info({ keyName: name }, 'eventhubs emulator: key set');
  }

  removeKey(name: string): boolean {
    const before = this.keys.length;
    this.keys = this.keys.filter((k) => k.name !== name);
    return this.keys.length < before;
  }

  keyFor(name: string): string | undefined {
    return this.keys.find((k) => k.name === name)?.key;
  }

  // ---------------------------------------------------------------------------------------
  // Read-back

  hub(name: string): Hub | undefined {
    return this.hubs.get(name.toLowerCase());
  }

  events(hubName?: string, partitionId?: string): EmulatorEvent[] {
    const hubs = hubName
      ? [this.hub(hubName)].filter((h): h is Hub => h !== undefined)
      : [...this.hubs.values()];
    if (hubName && hubs.length === 0) throw new Error(`unknown event hub "${hubName}"`);
    const out: EmulatorEvent[] = [];
    for (const hub of hubs) {
      for (const p of hub.partitions) {
        if (partitionId !== undefined && p.id !== partitionId) continue;
        for (const e of p.log.events) out.push(toEmulatorEvent(e));
      }
    }
    return out;
  }

  partitionInfo(hubName: string, partitionId: string): PartitionInfo {
    const hub = this.hub(hubName);
    const p = hub?.partitions.find((x) => x.id === partitionId);
    if (!hub || !p) throw new Error(`unknown partition ${hubName}/${partitionId}`);
    const last = p.log.events[p.log.length - 1];
    return {
      hub: hub.name,
      partitionId: p.id,
      beginningSequenceNumber: 0,
      lastEnqueuedSequenceNumber: last ? last.sequenceNumber : -1,
      lastEnqueuedOffset: last ? last.offset : '-1',
      lastEnqueuedTimeUtc: new Date(last ? last.enqueuedTimeMs : 0),
      isEmpty: !last,
    };
  }

  /** Resolves when `predicate` holds over the stored events (checked after every append), or rejects at the timeout. */
  waitFor(predicate: () => boolean, timeoutMs = 10_000): Promise<void> {
    if (predicate()) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const check = () => {
        if (predicate()) {
          this.appendWaiters.delete(check);
          clearTimeout(timer);
          resolve();
        }
      };
      const timer = setTimeout(() => {
        this.appendWaiters.delete(check);
        reject(new Error(`eventhubs emulator: condition not met within ${timeoutMs} ms`));
      }, timeoutMs);
      this.appendWaiters.add(check);
    });
  }

  async close(): Promise<void> {
    if (this.reopenTimer) clearTimeout(this.reopenTimer);
    this.reopenTimer = undefined;
    const servers = this.servers;
    this.servers = [];
    this.listening = false;
    this.faults.listening = false;
    const closed = Promise.all(servers.map((s) => new Promise<void>((resolve) => s.close(() => resolve()))));
    this.dropConnections();
    await closed;
    for (const hub of this.hubs.values()) for (const p of hub.partitions) p.log.close();
  }

  // ---------------------------------------------------------------------------------------
  // AMQP

  private wire(): void {
    const c = this.container;
    c.on('sender_open', (ctx: EventContext) => this.guard(ctx, () => this.onSenderOpen(ctx)));
    c.on('receiver_open', (ctx: EventContext) => this.guard(ctx, () => this.onReceiverOpen(ctx)));
    c.on('message', (ctx: EventContext) => this.guard(ctx, () => this.onMessage(ctx)));
    c.on('sendable', (ctx: EventContext) => {
      const role = ctx.sender ? this.roles.get(ctx.sender) : undefined;
      if (role?.kind === 'consumer') this.pump(role.consumer);
    });
    const closed = (ctx: EventContext) => {
      const link = ctx.sender ?? ctx.receiver;
      if (!link) return;
      const state = this.connByRhea.get(ctx.connection);
      state?.links.delete(link);
      if (ctx.sender && state) state.replySenders = state.replySenders.filter((s) => s !== ctx.sender);
      this.forgetLink(link);
    };
    c.on('sender_close', closed);
    c.on('receiver_close', closed);
    c.on('sender_error', () => {});
    c.on('receiver_error', () => {});
    c.on('session_error', () => {});
    c.on('connection_error', () => {});
    c.on('protocol_error', (err: unknown) => this.log.debug({ err }, 'eventhubs emulator: protocol error'));
    c.on('error', (err: unknown) => this.log.debug({ err }, 'eventhubs emulator: AMQP error'));
    c.on('disconnected', (ctx: EventContext) => {
      const state = this.connByRhea.get(ctx.connection);
      if (state) this.forgetConnection(state);
    });
  }

  private guard(ctx: EventContext, fn: () => void): void {
    try {
      fn();
    } catch (err) {
      this.log.error({ err }, 'eventhubs emulator: internal error');
      const link = ctx.sender ?? ctx.receiver;
      if (ctx.delivery && !ctx.delivery.remote_settled)
        ctx.delivery.reject(amqpError('amqp:internal-error', 'emulator internal error'));
      else link?.close(amqpError('amqp:internal-error', 'emulator internal error'));
    }
  }

  private connOf(ctx: EventContext): ConnState | undefined {
    return this.connByRhea.get(ctx.connection);
  }

  /** Is there a live verified token on this connection for `path` or one of its parents? */
  private authorized(conn: ConnState, path: string): boolean {
    if (this.allowAnonymous) return true;
    const p = path.toLowerCase();
    const now = Date.now();
    for (const [aud, exp] of conn.tokens) {
      if (exp <= now) continue;
      if (aud === '' || p === aud || p.startsWith(`${aud}/`)) return true;
    }
    return false;
  }

  // client receivers: $cbs / $management reply links, or consumers
  private onSenderOpen(ctx: EventContext): undefined {
    const link = ctx.sender as Sender;
    const conn = this.connOf(ctx);
    if (!conn) {
      link.close(amqpError('amqp:internal-error', 'unknown connection'));
      return;
    }
    const address = (link.source as { address?: string } | undefined)?.address ?? '';
    link.set_source({ address });
    // Echo both termini: some clients (pyamqp) refuse an attach that lacks either.
    link.set_target({ address: (link.target as { address?: string } | undefined)?.address ?? '' });
    conn.links.add(link);
    const path = entityPath(address);
    if (path === '$cbs' || path.endsWith('/$management') || path === '$management') {
      this.roles.set(link, { kind: 'reply', address });
      conn.replySenders.push(link);
      return;
    }
    // <hub>/ConsumerGroups/<cg>/Partitions/<id>
    const m = /^([^/]+)\/consumergroups\/([^/]+)\/partitions\/([^/]+)$/i.exec(path);
    if (!m)
      return this.refuse(
        link,
        conn,
        'amqp:not-found',
        `The messaging entity '${address}' could not be found.`,
      );
    const hub = this.hub(m[1] as string);
    if (!hub)
      return this.refuse(link, conn, 'amqp:not-found', `The messaging entity '${m[1]}' could not be found.`);
    const cg = decodeURIComponent(m[2] as string).toLowerCase();
    if (!hub.consumerGroups.has(cg))
      return this.refuse(
        link,
        conn,
        'amqp:not-found',
        `The messaging entity '${hub.name}/ConsumerGroups/${m[2]}' could not be found.`,
      );
    const partition = hub.partitions.find((p) => p.id === m[3]);
    if (!partition) {
      return this.refuse(
        link,
        conn,
        'com.microsoft:argument-out-of-range',
        `The partition '${m[3]}' does not exist in '${hub.name}'.`,
      );
    }
    if (!this.authorized(conn, `${hub.name}/consumergroups/${cg}/partitions/${partition.id}`)) {
      return this.refuse(
        link,
        conn,
        'amqp:unauthorized-access',
        `Unauthorized access to '${path}': put a valid token on $cbs first.`,
      );
    }
    const props = (link.properties ?? {}) as Record<string, unknown>;
    const epochRaw = props['com.microsoft:epoch'];
    const epoch = epochRaw === undefined || epochRaw === null ? undefined : Number(epochRaw);
    // Epochs: a higher-or-equal epoch steals the partition from older readers; a lower one,
    // or a non-epoch reader while an epoch reader exists, is refused.
    const same = [...partition.consumers].filter((c) => c.consumerGroup === cg);
    const maxEpoch = same.reduce<number | undefined>(
      (acc, c) => (c.epoch === undefined ? acc : Math.max(acc ?? c.epoch, c.epoch)),
      undefined,
    );
    if (maxEpoch !== undefined && (epoch === undefined || epoch < maxEpoch)) {
      return this.refuse(
        link,
        conn,
        'amqp:link:stolen',
        `Receiver with epoch '${epoch ?? 'none'}' is refused: a receiver with epoch '${maxEpoch}' owns partition ${partition.id}.`,
      );
    }
    if (epoch !== undefined) {
      for (const old of same) {
        partition.consumers.delete(old);
        this.countConsumers();
        this.roles.delete(old.link);
        old.conn.links.delete(old.link);
        old.link.close(
          amqpError(
            'amqp:link:stolen',
            `New receiver with epoch '${epoch}' was opened: this receiver is disconnected.`,
          ),
        );
      }
    }
    const filter = selectorOf(link.source);
    let next: number;
    try {
      next = startIndex(partition.log, filter);
    } catch (err) {
      return this.refuse(link, conn, 'com.microsoft:argument-error', (err as Error).message);
    }
    const desired = link.desired_capabilities as unknown;
    const runtimeMetric = (Array.isArray(desired) ? desired : [desired]).some(
      (c) => toText(c) === RUNTIME_METRIC,
    );
    if (runtimeMetric) localAttach(link).offered_capabilities = [RUNTIME_METRIC];
    const consumer: ConsumerState = {
      link,
      conn,
      partition,
      consumerGroup: cg,
      ...(epoch !== undefined ? { epoch } : {}),
      next,
      runtimeMetric,
    };
    partition.consumers.add(consumer);
    this.countConsumers();
    this.roles.set(link, { kind: 'consumer', consumer });
    if (epoch !== undefined) localAttach(link).properties = { 'com.microsoft:epoch': types.wrap_long(epoch) };
    this.log.debug(
      { connection: conn.id, hub: hub.name, partition: partition.id, consumerGroup: cg, epoch, next },
      'eventhubs emulator: consumer attached',
    );
    setImmediate(() => this.pump(consumer));
  }

  // client senders: $cbs / $management requests, or producers
  private onReceiverOpen(ctx: EventContext): undefined {
    const link = ctx.receiver as Receiver;
    const conn = this.connOf(ctx);
    if (!conn) {
      link.close(amqpError('amqp:internal-error', 'unknown connection'));
      return;
    }
    const address = (link.target as { address?: string } | undefined)?.address ?? '';
    link.set_target({ address });
    link.set_source({ address: (link.source as { address?: string } | undefined)?.address ?? '' });
    conn.links.add(link);
    const path = entityPath(address);
    if (path === '$cbs') {
      this.roles.set(link, { kind: 'cbs-requests' });
      return;
    }
    if (path === '$management' || path.endsWith('/$management')) {
      this.roles.set(link, { kind: 'mgmt-requests' });
      return;
    }
    const m = /^([^/]+)(?:\/partitions\/([^/]+))?$/i.exec(path);
    const hub = m ? this.hub(m[1] as string) : undefined;
    if (!m || !hub)
      return this.refuse(
        link,
        conn,
        'amqp:not-found',
        `The messaging entity '${address}' could not be found.`,
      );
    let partition: PartitionState | undefined;
    if (m[2] !== undefined) {
      partition = hub.partitions.find((p) => p.id === m[2]);
      if (!partition)
        return this.refuse(
          link,
          conn,
          'com.microsoft:argument-out-of-range',
          `The partition '${m[2]}' does not exist in '${hub.name}'.`,
        );
    }
    const authPath = partition ? `${hub.name}/partitions/${partition.id}` : hub.name;
    if (!this.authorized(conn, authPath)) {
      return this.refuse(
        link,
        conn,
        'amqp:unauthorized-access',
        `Unauthorized access to '${path}': put a valid token on $cbs first.`,
      );
    }
    const wants = link.desired_capabilities as unknown;
    if (
      (Array.isArray(wants) ? wants : [wants]).some((c) => toText(c) === 'com.microsoft:idempotent-producer')
    ) {
      return this.refuse(
        link,
        conn,
        'amqp:not-implemented',
        'The emulator does not support idempotent producers (enableIdempotentRetries).',
      );
    }
    localAttach(link).max_message_size = this.maxMessageSize;
    this.roles.set(link, { kind: 'producer', hub, ...(partition ? { partition } : {}) });
    this.log.debug(
      { connection: conn.id, hub: hub.name, partition: partition?.id },
      'eventhubs emulator: producer attached',
    );
  }

  private refuse(
    link: Sender | Receiver,
    conn: ConnState,
    condition: string,
    description: string,
  ): undefined {
    conn.links.delete(link);
    this.log.info({ connection: conn.id, condition, description }, 'eventhubs emulator: link refused');
    link.close(amqpError(condition, description));
  }

  private onMessage(ctx: EventContext): undefined {
    const receiver = ctx.receiver as Receiver;
    const role = this.roles.get(receiver);
    const conn = this.connOf(ctx);
    const delivery = ctx.delivery as Delivery;
    if (!role || !conn) {
      delivery.reject(amqpError('amqp:not-found', 'link is not attached to an entity'));
      return;
    }
    if (role.kind === 'cbs-requests') return this.onCbs(conn, ctx.message as Message, delivery);
    if (role.kind === 'mgmt-requests') return this.onManagement(conn, ctx.message as Message, delivery);
    if (role.kind === 'producer') {
      const raw = (ctx as EventContext & { format?: number }).format;
      return this.onSend(conn, role.hub, role.partition, ctx.message as Message | Buffer, raw ?? 0, delivery);
    }
    delivery.reject(amqpError('amqp:not-allowed', 'unexpected transfer'));
  }

  private reply(conn: ConnState, request: Message, replyTarget: string, response: Message): undefined {
    const replyTo = toText(request.reply_to) ?? '';
    const sender =
      conn.replySenders.find((s) => s.name === replyTo) ??
      conn.replySenders.find((s) => (s.source as { address?: string } | undefined)?.address === replyTo) ??
      conn.replySenders.find(
        (s) => entityPath((s.source as { address?: string } | undefined)?.address) === replyTarget,
      );
    if (!sender) {
      this.log.debug({ connection: conn.id, replyTo }, 'eventhubs emulator: no reply link for request');
      return;
    }
    response.correlation_id = request.message_id;
    if (replyTo) response.to = replyTo;
    sender.send(response);
  }

  private onCbs(conn: ConnState, msg: Message, delivery: Delivery): undefined {
    delivery.accept();
    const props = (msg.application_properties ?? {}) as Record<string, unknown>;
    const operation = toText(props.operation);
    const audience = toText(props.name) ?? '';
    const type = toText(props.type) ?? '';
    const token = toText(msg.body) ?? '';
    const respond = (status: number, description: string, condition?: string): undefined =>
      this.reply(conn, msg, '$cbs', {
        application_properties: {
          'status-code': status,
          'status-description': description,
          ...(condition ? { 'error-condition': condition } : {}),
        },
        body: null,
      });
    if (operation !== 'put-token')
      return respond(400, `unsupported CBS operation "${operation}"`, 'amqp:not-implemented');
    if (this.allowAnonymous) {
      conn.tokens.set(audiencePath(audience), Number.MAX_SAFE_INTEGER);
      this.stats.cbsAccepted++;
      return respond(202, 'Accepted (anonymous mode: token not verified)');
    }
    // The service looks at the token itself: the Python client declares SAS tokens as "jwt".
    if (!token.startsWith('SharedAccessSignature ')) {
      this.stats.cbsRejected++;
      this.log.info(
        { connection: conn.id, tokenType: type },
        'eventhubs emulator: CBS token type not supported',
      );
      return respond(
        401,
        `Only SAS tokens are supported by the emulator (token type "${type}" is not a SharedAccessSignature): use a SAS key.`,
        'amqp:unauthorized-access',
      );
    }
    const v = verifySas(token, audience, this.keys);
    if (!v.ok) {
      this.stats.cbsRejected++;
      this.log.info(
        { connection: conn.id, audience, reason: v.reason },
        'eventhubs emulator: CBS token refused',
      );
      return respond(401, `InvalidSignature: ${v.reason}`, 'amqp:unauthorized-access');
    }
    conn.tokens.set(audiencePath(audience), v.expiresAtMs ?? 0);
    this.stats.cbsAccepted++;
    this.log.debug(
      { connection: conn.id, audience, keyName: v.keyName },
      'eventhubs emulator: CBS token accepted',
    );
    respond(202, 'Accepted');
  }

  private onManagement(conn: ConnState, msg: Message, delivery: Delivery): undefined {
    delivery.accept();
    const props = (msg.application_properties ?? {}) as Record<string, unknown>;
    const operation = toText(props.operation);
    const name = toText(props.name) ?? '';
    const type = toText(props.type) ?? '';
    const securityToken = toText(props.security_token);
    const respond = (status: number, description: string, body: unknown, condition?: string): undefined =>
      this.reply(conn, msg, '$management', {
        application_properties: {
          'status-code': status,
          'status-description': description,
          statusCode: status,
          statusDescription: description,
          ...(condition ? { 'error-condition': condition } : {}),
        },
        body,
      });
    if (operation !== 'READ')
      return respond(400, `unsupported operation "${operation}"`, null, 'amqp:not-implemented');
    const hub = this.hub(name);
    if (!hub)
      return respond(
        404,
        `The messaging entity '${name}' could not be found.`,
        null,
        'com.microsoft:entity-not-found',
      );
    let ok = this.authorized(conn, hub.name) || this.authorized(conn, `${hub.name}/$management`);
    if (!ok && securityToken && !this.allowAnonymous) {
      const aud = conn.socket.localPort ? `sb://127.0.0.1:${conn.socket.localPort}/${hub.name}` : hub.name;
      ok = verifySas(securityToken, aud, this.keys).ok || verifyAnyHost(securityToken, hub.name, this.keys);
    }
    if (!ok) return respond(401, `Unauthorized access to '${hub.name}'.`, null, 'amqp:unauthorized-access');
    if (type === 'com.microsoft:eventhub') {
      return respond(200, 'OK', {
        name: hub.name,
        type: 'com.microsoft:eventhub',
        created_at: types.wrap_timestamp(hub.createdAt.getTime()),
        partition_count: types.wrap_int(hub.partitions.length),
        partition_ids: types.wrap_array(
          hub.partitions.map((p) => p.id),
          0xa1,
          undefined,
        ),
      });
    }
    if (type === 'com.microsoft:partition') {
      const id = toText(props.partition) ?? '';
      const p = hub.partitions.find((x) => x.id === id);
      if (!p) {
        return respond(
          400,
          `The specified partition '${id}' is invalid for '${hub.name}'.`,
          null,
          'com.microsoft:argument-out-of-range',
        );
      }
      const info = this.partitionInfo(hub.name, p.id);
      return respond(200, 'OK', {
        name: hub.name,
        type: 'com.microsoft:partition',
        partition: p.id,
        begin_sequence_number: types.wrap_long(info.beginningSequenceNumber),
        last_enqueued_sequence_number: types.wrap_long(info.lastEnqueuedSequenceNumber),
        last_enqueued_offset: info.lastEnqueuedOffset,
        last_enqueued_time_utc: types.wrap_timestamp(info.lastEnqueuedTimeUtc.getTime()),
        is_partition_empty: info.isEmpty,
      });
    }
    respond(400, `unsupported type "${type}"`, null, 'amqp:not-implemented');
  }

  private onSend(
    conn: ConnState,
    hub: Hub,
    linkPartition: PartitionState | undefined,
    payload: Message | Buffer,
    format: number,
    delivery: Delivery,
  ): undefined {
    if (this.faults.hangNext > 0) {
      this.faults.hangNext--;
      this.hung.push(delivery);
      this.faults.hungDeliveries = this.hung.length;
      return;
    }
    if (this.faults.rejectNext > 0) {
      this.faults.rejectNext--;
      this.stats.sendsRejected++;
      const condition = this.faults.rejectCondition;
      const description =
        this.rejectDescription ??
        (condition === SERVER_BUSY
          ? 'The server is busy. Please try again later. (emulator fault injection)'
          : `Rejected by the emulator (fault injection: ${condition}).`);
      delivery.reject(amqpError(condition, description));
      return;
    }
    let items: { raw: Buffer; partitionKey?: string }[];
    let envelopeKey: string | undefined;
    if (Buffer.isBuffer(payload)) {
      if (payload.length > this.maxMessageSize) return this.rejectTooBig(delivery, payload.length);
      if (format !== BATCH_MESSAGE_FORMAT) {
        this.stats.sendsRejected++;
        delivery.reject(amqpError('amqp:not-implemented', `message format ${format} is not supported`));
        return;
      }
      const envelope = rheaMessage.decode(payload) as unknown as Message;
      envelopeKey = toText(envelope.message_annotations?.['x-opt-partition-key']);
      const body: unknown = envelope.body;
      const sections: Buffer[] = isDataSectionBody(body)
        ? body.multiple
          ? (body.content as Buffer[])
          : [body.content as Buffer]
        : [];
      items = sections.map((raw) => ({ raw: Buffer.from(raw) }));
      if (envelopeKey === undefined && items[0]) {
        const first = rheaMessage.decode(items[0].raw);
        envelopeKey = toText(
          (first.message_annotations as Record<string, unknown> | undefined)?.['x-opt-partition-key'],
        );
      }
    } else {
      const raw = rheaMessage.encode(payload);
      if (raw.length > this.maxMessageSize) return this.rejectTooBig(delivery, raw.length);
      envelopeKey = toText(payload.message_annotations?.['x-opt-partition-key']);
      items = [{ raw }];
    }
    if (items.length === 0) {
      delivery.accept();
      return;
    }
    if (envelopeKey !== undefined) for (const it of items) it.partitionKey = envelopeKey;
    let partition = linkPartition;
    if (!partition) {
      const index =
        envelopeKey !== undefined
          ? partitionForKey(envelopeKey, hub.partitions.length)
          : hub.roundRobin++ % hub.partitions.length;
      // In range: a hub has at least one partition. Through a const because, on a direct assignment
      // to the `let`, lint deems the assertion unnecessary and its autofix drops it (tsc then fails).
      const chosen = hub.partitions[index] as PartitionState;
      partition = chosen;
    }
    try {
      partition.log.append(items, Date.now());
    } catch (err) {
      this.log.error(
        { err, hub: hub.name, partition: partition.id },
        'eventhubs emulator: could not store events',
      );
      this.stats.sendsRejected++;
      delivery.reject(amqpError('amqp:internal-error', 'The emulator could not store the events.'));
      return;
    }
    delivery.accept();
    this.stats.batchesAccepted++;
    this.stats.eventsAccepted += items.length;
    void conn;
    for (const c of partition.consumers) this.pump(c);
    for (const w of [...this.appendWaiters]) w();
  }

  private rejectTooBig(delivery: Delivery, size: number): undefined {
    this.stats.sendsRejected++;
    delivery.reject(
      amqpError(
        'amqp:link:message-size-exceeded',
        `The received message (delivery-id:${delivery.id}, size:${size} bytes) exceeds the limit (${this.maxMessageSize} bytes) currently allowed on the link.`,
      ),
    );
  }

  private pump(c: ConsumerState): void {
    const log = c.partition.log;
    const link = c.link;
    if (!this.roles.has(link) || !link.is_open()) return;
    while (c.next < log.length && link.sendable()) {
      const e = log.events[c.next] as StoredEvent;
      link.send(c.runtimeMetric ? withRuntimeInfo(e, log) : deliveryPayload(e), undefined, 0);
      c.next++;
      this.stats.eventsDelivered++;
    }
  }
}

function verifyAnyHost(token: string, hubName: string, keys: readonly SasKey[]): boolean {
  // The management security_token is issued for the hub audience on whatever host the client used.
  const m = /sr=([^&]+)/.exec(token);
  if (!m) return false;
  let aud: string;
  try {
    aud = decodeURIComponent(m[1] as string);
  } catch {
    return false;
  }
  if (audiencePath(aud) !== hubName.toLowerCase()) return false;
  return verifySas(token, aud, keys).ok;
}

const deliveryCache = new WeakMap<StoredEvent, Buffer>();

/** The stored message plus the service annotations, encoded once per event. */
function deliveryPayload(e: StoredEvent): Buffer {
  const cached = deliveryCache.get(e);
  if (cached) return cached;
  const msg = rheaMessage.decode(e.raw);
  const annotations = { ...((msg.message_annotations as Record<string, unknown> | undefined) ?? {}) };
  annotations['x-opt-sequence-number'] = types.wrap_long(e.sequenceNumber);
  annotations['x-opt-offset'] = e.offset;
  annotations['x-opt-enqueued-time'] = types.wrap_timestamp(e.enqueuedTimeMs);
  if (e.partitionKey !== undefined) annotations['x-opt-partition-key'] = e.partitionKey;
  msg.message_annotations = annotations;
  const buf = rheaMessage.encode(msg);
  deliveryCache.set(e, buf);
  return buf;
}

/** The delivery plus the delivery annotations a runtime-metric receiver expects (last enqueued event). */
function withRuntimeInfo(e: StoredEvent, log: PartitionLog): Buffer {
  const last = log.events[log.length - 1] as StoredEvent;
  const msg = rheaMessage.decode(deliveryPayload(e));
  msg.delivery_annotations = {
    last_enqueued_sequence_number: types.wrap_long(last.sequenceNumber),
    last_enqueued_offset: last.offset,
    last_enqueued_time_utc: types.wrap_timestamp(last.enqueuedTimeMs),
    runtime_info_retrieval_time_utc: types.wrap_timestamp(Date.now()),
  };
  return rheaMessage.encode(msg);
}

function toEmulatorEvent(e: StoredEvent): EmulatorEvent {
  const d = decodeBody(e.raw);
  return {
    hub: e.hub,
    partitionId: e.partitionId,
    sequenceNumber: e.sequenceNumber,
    offset: e.offset,
    enqueuedTimeUtc: new Date(e.enqueuedTimeMs),
    ...(e.partitionKey !== undefined ? { partitionKey: e.partitionKey } : {}),
    body: d.body,
    ...(d.bodyBytes ? { bodyBytes: d.bodyBytes } : {}),
    ...(d.applicationProperties ? { applicationProperties: d.applicationProperties } : {}),
  };
}

/** The selector expression of a consumer's source, if any. */
function selectorOf(source: { filter?: unknown } | undefined): string | undefined {
  const filter = source?.filter as Record<string, unknown> | undefined;
  if (!filter || typeof filter !== 'object') return undefined;
  for (const [k, v] of Object.entries(filter)) {
    if (!k.includes('selector-filter')) continue;
    if (typeof v === 'string') return v;
    if (Buffer.isBuffer(v)) return v.toString('utf8');
    if (v && typeof v === 'object' && 'value' in v) return toText(v.value);
  }
  return undefined;
}

/** Index of the first event to deliver, from a selector such as `amqp.annotation.x-opt-offset > '-1'`. */
export function startIndex(log: PartitionLog, selector: string | undefined): number {
  if (selector === undefined || selector.trim() === '') return 0;
  const m =
    /^\s*amqp\.annotation\.(x-opt-offset|x-opt-sequence-number|x-opt-enqueued-time)\s*(>=|>|=)\s*'([^']*)'\s*$/i.exec(
      selector,
    );
  if (!m) throw new Error(`Unsupported selector filter: ${selector}`);
  const field = (m[1] as string).toLowerCase();
  const op = m[2] as string;
  const value = m[3] as string;
  const events = log.events;
  const inclusive = op !== '>';
  if (field === 'x-opt-offset') {
    if (value === '-1') return 0;
    if (value === '@latest') return events.length;
    if (!/^-?\d+$/.test(value)) throw new Error(`The offset '${value}' is not valid.`);
    const v = Number(value);
    const i = events.findIndex((e) => (inclusive ? Number(e.offset) >= v : Number(e.offset) > v));
    return i === -1 ? events.length : i;
  }
  if (field === 'x-opt-sequence-number') {
    if (!/^-?\d+$/.test(value)) throw new Error(`The sequence number '${value}' is not valid.`);
    const v = Number(value);
    const start = inclusive ? v : v + 1;
    return Math.min(Math.max(start, 0), events.length);
  }
  const t = /^-?\d+$/.test(value) ? Number(value) : Date.parse(value);
  if (Number.isNaN(t)) throw new Error(`The enqueued time '${value}' is not valid.`);
  const i = events.findIndex((e) => (inclusive ? e.enqueuedTimeMs >= t : e.enqueuedTimeMs > t));
  return i === -1 ? events.length : i;
}
