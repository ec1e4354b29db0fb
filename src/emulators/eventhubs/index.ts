/**
 * In-process API of the Event Hubs emulator, for tests and the demo:
 *
 *   const hub = await startEventHubsEmulator();
 *   const producer = new EventHubProducerClient(hub.connectionString);
 *   ...
 *   hub.events();            // what was stored
 *   hub.rejectNextSends(3);  // com.microsoft:server-busy three times
 *   await hub.stop();
 */
import { randomBytes } from 'node:crypto';
import { createLogger, type Logger } from '../../observability/logger.js';
import { type ControlServer, startControlServer } from './control.js';
import {
  DEFAULT_HUB,
  DEFAULT_KEY_NAME,
  type EmulatorEvent,
  type EmulatorStats,
  type EventHubsEmulatorOptions,
  EventHubsEmulatorServer,
  type FaultState,
  type PartitionInfo,
  type RejectSendsOptions,
} from './emulator.js';
import type { SasKey } from './sas.js';

export {
  BATCH_MESSAGE_FORMAT,
  DEFAULT_HUB,
  DEFAULT_KEY_NAME,
  DEFAULT_MAX_MESSAGE_SIZE,
  DEFAULT_PARTITIONS,
  type EmulatorEvent,
  type EmulatorStats,
  type EventHubsEmulatorOptions,
  type FaultState,
  type HubDefinition,
  type PartitionInfo,
  partitionForKey,
  type RejectSendsOptions,
} from './emulator.js';
export { type SasKey, signSas, verifySas } from './sas.js';

export interface EventHubsEmulator {
  /** AMQP port on 127.0.0.1 (stays the same across stopListening/resumeListening/restart). */
  readonly port: number;
  /** AMQPS port when `tls` was given. */
  readonly tlsPort: number | undefined;
  readonly host: '127.0.0.1';
  /** `http://127.0.0.1:PORT` of the control API, or undefined when disabled. */
  readonly controlUrl: string | undefined;
  /** Connection string of the first hub with the configured key (contains the key). */
  readonly connectionString: string;
  readonly hubNames: readonly string[];
  readonly keyName: string;
  readonly maxMessageSize: number;
  /** Connection string for another hub and/or credentials (e.g. a wrong key, for tests). */
  connectionStringFor(opts?: { hub?: string; keyName?: string; key?: string }): string;
  /** Stored events of one hub (default: all hubs), partition by partition, in sequence order. */
  events(hub?: string, partitionId?: string): EmulatorEvent[];
  partitionInfo(hub: string, partitionId: string): PartitionInfo;
  /** Resolves once `predicate(events)` holds (checked after every stored batch). */
  waitForEvents(
    predicate: (events: EmulatorEvent[]) => boolean,
    opts?: { hub?: string; timeoutMs?: number },
  ): Promise<EmulatorEvent[]>;
  readonly faults: Readonly<FaultState>;
  readonly stats: Readonly<EmulatorStats>;
  /** Rejects the next `count` sends (default condition `com.microsoft:server-busy`). */
  rejectNextSends(count: number, opts?: RejectSendsOptions): void;
  /** Never settles the next `count` sends (default: every send until stopHanging()). Hung sends are not stored. */
  hangSends(count?: number): void;
  stopHanging(): void;
  /** Detaches client links with an error condition (default `amqp:link:detach-forced`). Returns how many. */
  detachLinks(opts?: {
    condition?: string;
    description?: string;
    which?: 'all' | 'producers' | 'consumers';
  }): number;
  /** Resets every open connection. Returns how many. */
  dropConnections(): number;
  /** Closes the listener(s) (ECONNREFUSED); drops open connections unless told not to; comes back after durationMs if given. */
  stopListening(opts?: { dropConnections?: boolean; durationMs?: number }): Promise<void>;
  /** Listens again on the same port(s). */
  resumeListening(): Promise<void>;
  /** Delays serving each new connection by `ms` (0 = off). */
  setAcceptDelay(ms: number): void;
  /** Clears reject/hang/slow-accept faults (does not resume listening). */
  clearFaults(): void;
  /** Adds or rotates a key; tokens already accepted stay valid until they expire. */
  setKey(name: string, key: string): void;
  removeKey(name: string): boolean;
  /**
   * Simulates an emulator process restart on the same port(s): drops everything, then reloads
   * the partitions from the store directory (events are kept in memory when there is no store).
   */
  restart(): Promise<void>;
  stop(): Promise<void>;
}

function buildConnectionString(port: number, keyName: string, key: string, hub: string): string {
  return `Endpoint=sb://127.0.0.1:${port};SharedAccessKeyName=${keyName};SharedAccessKey=${key};EntityPath=${hub};UseDevelopmentEmulator=true`;
}

export async function startEventHubsEmulator(
  options: EventHubsEmulatorOptions = {},
): Promise<EventHubsEmulator> {
  const key = options.key ?? randomBytes(32).toString('base64');
  const log: Logger = options.logger ?? createLogger({ level: 'silent' });
  const opts = { ...options, key, logger: log };
  let server = new EventHubsEmulatorServer(opts);
  try {
    await server.listen();
  } catch (err) {
    await server.close();
    throw err;
  }
  let memoryHubs: EventHubsEmulatorServer['hubs'] | undefined;

  const restart = async (): Promise<void> => {
    const port = server.amqpPort;
    const tlsPort = server.amqpsPort;
    const keys: SasKey[] = server.keyNames().map((name) => ({ name, key: server.keyFor(name) as string }));
    const faults = { ...server.faults };
    if (!options.store) memoryHubs = server.hubs;
    await server.close();
    const next = new EventHubsEmulatorServer({
      ...opts,
      port,
      ...(opts.tls ? { tls: { ...opts.tls, ...(tlsPort !== undefined ? { port: tlsPort } : {}) } } : {}),
      keyName: keys[0]?.name ?? DEFAULT_KEY_NAME,
      key: keys[0]?.key ?? key,
      extraKeys: keys.slice(1),
    });
    if (memoryHubs) {
      // No store: an in-memory "restart" keeps the events (there is nowhere else they could live).
      for (const [name, hub] of memoryHubs) {
        const fresh = next.hubs.get(name);
        if (!fresh) continue;
        hub.partitions.forEach((p, i) => {
          const target = fresh.partitions[i];
          if (target) target.log.events.push(...p.log.events);
        });
      }
    }
    next.setAcceptDelay(faults.acceptDelayMs);
    // Counters describe the whole life of the handle, across restarts.
    Object.assign(next.stats, server.stats, { openConnections: 0, openConsumers: 0 });
    server = next;
    await server.listen();
    log.info({ port }, 'eventhubs emulator: restarted');
  };

  // The control API must always act on the live instance (restart() replaces it).
  const live = new Proxy({} as EventHubsEmulatorServer, {
    get: (_t, prop) => {
      const v = (server as unknown as Record<string | symbol, unknown>)[prop];
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(server) : v;
    },
  });
  let control: ControlServer | undefined;
  try {
    if (options.controlPort !== false)
      control = await startControlServer(live, options.controlPort ?? 0, log, restart);
  } catch (err) {
    await server.close();
    throw err;
  }

  const hubNames = [...server.hubs.values()].map((h) => h.name);
  const firstHub = hubNames[0] ?? DEFAULT_HUB;
  const keyName = server.keyName;

  const handle: EventHubsEmulator = {
    get port() {
      return server.amqpPort;
    },
    get tlsPort() {
      return server.amqpsPort;
    },
    host: '127.0.0.1',
    controlUrl: control?.url,
    get connectionString() {
      return buildConnectionString(server.amqpPort, keyName, server.keyFor(keyName) ?? key, firstHub);
    },
    hubNames,
    keyName,
    maxMessageSize: server.maxMessageSize,
    connectionStringFor: (o = {}) => {
      const name = o.keyName ?? keyName;
      return buildConnectionString(
        server.amqpPort,
        name,
        o.key ?? server.keyFor(name) ?? key,
        o.hub ?? firstHub,
      );
    },
    events: (hub, partitionId) => server.events(hub, partitionId),
    partitionInfo: (hub, id) => server.partitionInfo(hub, id),
    waitForEvents: async (predicate, o = {}) => {
      await server.waitFor(() => predicate(server.events(o.hub)), o.timeoutMs ?? 10_000);
      return server.events(o.hub);
    },
    get faults() {
      return server.faults;
    },
    get stats() {
      return server.stats;
    },
    rejectNextSends: (count, o) => server.rejectNextSends(count, o),
    hangSends: (count) => server.hangSends(count),
    stopHanging: () => server.stopHanging(),
    detachLinks: (o) => server.detachLinks(o),
    dropConnections: () => server.dropConnections(),
    stopListening: (o) => server.stopListening(o),
    resumeListening: () => server.listen(),
    setAcceptDelay: (ms) => server.setAcceptDelay(ms),
    clearFaults: () => server.clearFaults(),
    setKey: (name, value) => server.setKey(name, value),
    removeKey: (name) => server.removeKey(name),
    restart,
    stop: async () => {
      await control?.close();
      await server.close();
    },
  };
  return handle;
}
