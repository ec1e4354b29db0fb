/**
 * A second, independent client: Microsoft's Python azure.eventhub (Debian python3-azure, its own
 * pure-Python AMQP stack) must agree with the emulator and with the JS client.
 *
 * azure-eventhub 5.11 always speaks AMQPS on port 5671 (it ignores the endpoint's port and has
 * no development-emulator switch), so this test opens the emulator's TLS listener on
 * 127.0.0.1:5671 with a test-only self-signed certificate that the client is told to trust.
 */
import { execFile, execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { EventHubConsumerClient, EventHubProducerClient, earliestEventPosition } from '@azure/event-hubs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type EventHubsEmulator, startEventHubsEmulator } from '../../../src/emulators/eventhubs/index.js';
import { fastRetry, readPartition } from './helpers.js';

const PYTHON = '/usr/bin/python3';
const here = (p: string) => fileURLToPath(new URL(p, import.meta.url));
const cert = here('./fixtures/test-only-cert.pem');
const script = here('./python_witness.py');

function pythonClientAvailable(): boolean {
  try {
    execFileSync(PYTHON, ['-c', 'import azure.eventhub'], { stdio: 'ignore', timeout: 20_000 });
    return true;
  } catch {
    return false;
  }
}

const available = pythonClientAvailable();
if (!available) {
  if (process.env.CI) {
    // In CI the witness must run: scripts/install-system-deps.sh installs python3-azure.
    describe('Python azure.eventhub witness', () => {
      it('is installed (python3-azure)', () => {
        throw new Error(
          `${PYTHON} -c 'import azure.eventhub' failed: install python3-azure (scripts/install-system-deps.sh)`,
        );
      });
    });
  } else {
    console.warn(
      `[eventhubs emulator] skipping the Python witness: ${PYTHON} -c 'import azure.eventhub' failed (apt-get install python3-azure)`,
    );
  }
}

interface PyResult {
  hub?: { name: string; partition_ids: string[] };
  partitions?: Record<
    string,
    { last_enqueued_sequence_number: number; last_enqueued_offset: string; is_empty: boolean }
  >;
  received?: {
    partition: string;
    sequence_number: number;
    offset: string;
    partition_key: string | null;
    body: string;
  }[];
  error?: string;
  message?: string;
}

describe.runIf(available)('Python azure.eventhub witness', () => {
  let hub: EventHubsEmulator;
  const pyConn = (key?: string) =>
    hub
      .connectionStringFor(key ? { key } : {})
      .replace(`:${hub.port};`, ':5671;')
      .replace(';UseDevelopmentEmulator=true', '');
  const runPython = async (mode: string, key?: string): Promise<PyResult> => {
    const { stdout } = await promisify(execFile)(PYTHON, [script, pyConn(key), cert, mode], {
      timeout: 60_000,
    });
    return JSON.parse(stdout.trim().split('\n').at(-1) ?? '{}') as PyResult;
  };

  beforeAll(async () => {
    hub = await startEventHubsEmulator({
      key: 'witness-key',
      tls: { cert: readFileSync(cert), key: readFileSync(here('./fixtures/test-only-key.pem')), port: 5671 },
    }).catch((err: NodeJS.ErrnoException) => {
      if (err.code === 'EADDRINUSE')
        throw new Error(
          '127.0.0.1:5671 is in use: the Python witness needs it (azure-eventhub 5.11 ignores the endpoint port)',
        );
      throw err;
    });
  });
  afterAll(async () => {
    await hub?.stop();
  });

  it('sends, reads properties and receives like the JS client does', async () => {
    const js = new EventHubProducerClient(hub.connectionString, { retryOptions: fastRetry });
    await js.sendBatch([{ body: { from: 'js', n: 0 } }], { partitionId: '0' });
    await js.close();

    const py = await runPython('roundtrip');
    expect(py.hub).toEqual({ name: 'scheduled-events', partition_ids: ['0', '1'] });
    // Python's view of the partitions is the emulator's
    for (const pid of ['0', '1']) {
      const info = hub.partitionInfo('scheduled-events', pid);
      expect(py.partitions?.[pid]).toMatchObject({
        last_enqueued_sequence_number: info.lastEnqueuedSequenceNumber,
        last_enqueued_offset: info.lastEnqueuedOffset,
        is_empty: info.isEmpty,
      });
    }
    // Python received every stored event, with the emulator's sequence numbers, offsets and keys
    const stored = hub.events();
    const received = [...(py.received ?? [])].sort(
      (a, b) => a.partition.localeCompare(b.partition) || a.sequence_number - b.sequence_number,
    );
    expect(
      received.map((r) => [r.partition, r.sequence_number, r.offset, r.partition_key ?? undefined]),
    ).toEqual(stored.map((e) => [e.partitionId, e.sequenceNumber, e.offset, e.partitionKey]));
    expect(received.map((r) => JSON.parse(r.body))).toEqual(stored.map((e) => e.body));
    const keyed = stored.filter((e) => e.partitionKey === 'py-key');
    expect(keyed).toHaveLength(3);
    expect(new Set(keyed.map((e) => e.partitionId)).size).toBe(1);

    // and the JS consumer reads what Python sent
    const c = new EventHubConsumerClient('$default', hub.connectionString, { retryOptions: fastRetry });
    const p1 = hub.events(undefined, '1');
    const got = await readPartition(c, '1', earliestEventPosition, p1.length);
    await c.close();
    expect(got.map((e) => e.body)).toEqual(p1.map((e) => e.body));
  });

  it('is refused with a wrong key', async () => {
    const before = hub.events().length;
    const py = await runPython('wrong-key', 'not-the-key');
    expect(py.error).toMatch(/Authentication|ConnectError|EventHubError/);
    expect(`${py.message}`).toMatch(/401|auth/i);
    expect(hub.events().length).toBe(before);
  });
});
