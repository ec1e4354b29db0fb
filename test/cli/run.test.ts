import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { type CliRun, startCli, waitFor } from '../fixtures/child.js';
import { event, eventsDoc, type ImdsFixture, startImdsFixture } from '../fixtures/imds-fixture.js';
import { assertValidRecord } from '../fixtures/record-schema.js';

/**
 * `se-shipper run` as a child process against the independent IMDS fixture over real HTTP,
 * reading NDJSON from its stdout.
 */

let fixture: ImdsFixture;
let stateDir: string;
const running: CliRun[] = [];

beforeEach(async () => {
  fixture = await startImdsFixture();
  stateDir = mkdtempSync(join(tmpdir(), 'se-shipper-run-'));
});
afterEach(async () => {
  for (const run of running.splice(0)) {
    if (run.child.exitCode === null) run.child.kill('SIGKILL');
  }
  await fixture.close();
  rmSync(stateDir, { recursive: true, force: true });
});

function shipper(extraArgs: string[] = [], env: NodeJS.ProcessEnv = {}): CliRun {
  const run = startCli(
    [
      'run',
      '--imds-endpoint',
      fixture.url,
      '--poll-interval',
      '200',
      '--state-dir',
      stateDir,
      '--heartbeat-interval',
      '0',
      ...extraArgs,
    ],
    env,
  );
  running.push(run);
  return run;
}

const MINE = 'A7F6D8B0-2A4B-4C3D-9E1F-000000000001';
const OTHER = 'B1B1B1B1-0000-4000-8000-000000000002';
const phases = (run: CliRun) => run.records.map((r) => `${r.eventId as string}:${r.phase as string}`);

async function stop(run: CliRun) {
  run.child.kill('SIGTERM');
  return run.exited;
}

describe('se-shipper run', () => {
  it('sends a schema-valid heartbeat at start when heartbeats are on', async () => {
    const run = startCli([
      'run',
      '--imds-endpoint',
      fixture.url,
      '--poll-interval',
      '200',
      '--state-dir',
      stateDir,
    ]);
    running.push(run);
    await waitFor(() => run.records.length >= 1, 'heartbeat');
    await stop(run);
    expect(run.records[0]).toMatchObject({ recordType: 'heartbeat', phase: '', vmName: 'web_3' });
    assertValidRecord(run.records[0]);
  });

  it('ships Scheduled → Started → Completed for this VM only, enriched and schema-valid', async () => {
    fixture.setDocument(
      eventsDoc(1, [
        event({ EventId: MINE }),
        event({ EventId: OTHER, Resources: ['web_7'], EventType: 'Freeze' }),
      ]),
    );
    const run = shipper();
    await waitFor(() => run.records.length >= 1, 'Scheduled record');
    fixture.setDocument(eventsDoc(2, [event({ EventId: MINE, EventStatus: 'Started', NotBefore: '' })]));
    await waitFor(() => run.records.length >= 2, 'Started record');
    fixture.setDocument(eventsDoc(3, []));
    await waitFor(() => run.records.length >= 3, 'Completed record');
    expect(await stop(run)).toEqual({ code: 0, signal: null });

    expect(phases(run)).toEqual([`${MINE}:Scheduled`, `${MINE}:Started`, `${MINE}:Completed`]);
    for (const record of run.records) assertValidRecord(record);
    const [scheduled, started, completed] = run.records;
    expect(scheduled).toMatchObject({
      recordType: 'lifecycle',
      eventType: 'Reboot',
      eventStatus: 'Scheduled',
      notBefore: '2022-04-11T22:26:58.000Z',
      affectsThisVm: true,
      inferred: false,
      documentIncarnation: 1,
      vmName: 'web_3',
      vmScaleSetName: 'web',
      vmInstanceId: '3',
      zone: '2',
      priority: 'Spot',
      durationInSeconds: 15,
    });
    expect(started).toMatchObject({ eventStatus: 'Started', documentIncarnation: 2 });
    expect(completed).toMatchObject({ eventStatus: '', inferred: false, documentIncarnation: 3 });
    expect(new Set(run.records.map((r) => r.recordId)).size).toBe(3);
    // stdout carries only records; logs went to stderr as JSON.
    expect(run.logs.some((l) => l.msg === 'se-shipper started')).toBe(true);
    expect(run.logs.some((l) => l.msg === 'stopped')).toBe(true);
  });

  it('reports a NotBefore change as Rescheduled and a vanished Scheduled event as Canceled', async () => {
    fixture.setDocument(eventsDoc(1, [event({ EventId: MINE })]));
    const run = shipper();
    await waitFor(() => run.records.length >= 1, 'Scheduled');
    fixture.setDocument(eventsDoc(2, [event({ EventId: MINE, NotBefore: 'Mon, 11 Apr 2022 22:41:58 GMT' })]));
    await waitFor(() => run.records.length >= 2, 'Rescheduled');
    fixture.setDocument(eventsDoc(3, []));
    await waitFor(() => run.records.length >= 3, 'Canceled');
    await stop(run);
    expect(run.records.map((r) => r.phase)).toEqual(['Scheduled', 'Rescheduled', 'Canceled']);
    expect(run.records[1]?.notBefore).toBe('2022-04-11T22:41:58.000Z');
  });

  it('with --scope all also ships events of other VMs, marked affectsThisVm false', async () => {
    fixture.setDocument(eventsDoc(1, [event({ EventId: OTHER, Resources: ['web_7'] })]));
    const run = shipper(['--scope', 'all']);
    await waitFor(() => run.records.length >= 1, 'record of another VM');
    await stop(run);
    expect(run.records[0]).toMatchObject({ eventId: OTHER, affectsThisVm: false });
  });

  it('survives 429/410/500 bursts, a hang, a dropped connection, malformed and truncated JSON without losing or inventing records', async () => {
    fixture.setDocument(eventsDoc(1, [event({ EventId: MINE })]));
    const proxy = 'http://127.0.0.1:9';
    const run = shipper(['--imds-timeout', '1000'], {
      HTTP_PROXY: proxy,
      HTTPS_PROXY: proxy,
      http_proxy: proxy,
      https_proxy: proxy,
    });
    await waitFor(() => run.records.length >= 1, 'Scheduled through an unreachable proxy setting');
    const status = (s: number) => ({ kind: 'status' as const, status: s });
    fixture.fault(
      ...Array.from({ length: 4 }, () => status(429)),
      ...Array.from({ length: 4 }, () => status(410)),
      ...Array.from({ length: 4 }, () => status(500)),
      { kind: 'hang' },
      { kind: 'drop' },
      // A truncated or malformed document must not read as "no events" (that would cancel).
      { kind: 'raw', body: '{"DocumentIncarnation": 9, "Events": [' },
      { kind: 'raw', body: '{"DocumentIncarnation": 9}' },
      { kind: 'raw', body: 'upstream connect error' },
    );
    const served = () =>
      fixture.requests.filter((r) => r.path.startsWith('/metadata/scheduledevents')).length;
    const before = served();
    await waitFor(() => served() >= before + 20, 'faults consumed', 40_000);
    fixture.setDocument(eventsDoc(2, [event({ EventId: MINE, EventStatus: 'Started', NotBefore: '' })]));
    await waitFor(() => run.records.length >= 2, 'Started after the faults', 20_000);
    await stop(run);
    expect(run.records.map((r) => r.phase)).toEqual(['Scheduled', 'Started']);
    expect(run.logs.some((l) => /malformed scheduled events document/.test(JSON.stringify(l)))).toBe(true);
    expect(run.logs.some((l) => l.msg === 'IMDS answering again')).toBe(true);
  }, 60_000);

  it('after SIGTERM and restart with the same state dir, emits nothing twice and reports what ended while down', async () => {
    const second = 'C2C2C2C2-0000-4000-8000-000000000003';
    fixture.setDocument(
      eventsDoc(1, [
        event({ EventId: MINE }),
        event({ EventId: second, EventStatus: 'Started', NotBefore: '' }),
      ]),
    );
    const first = shipper();
    await waitFor(() => first.records.length >= 2, 'two records');
    expect(await stop(first)).toEqual({ code: 0, signal: null });

    // While down: the Started event ended; the Scheduled one is still there.
    fixture.setDocument(eventsDoc(2, [event({ EventId: MINE })]));
    const again = shipper();
    await waitFor(() => again.records.length >= 1, 'inferred Completed');
    // A few more polls to prove nothing else is re-emitted.
    const polls = fixture.requests.length;
    await waitFor(() => fixture.requests.length >= polls + 5, 'more polls');
    await stop(again);
    expect(again.records).toHaveLength(1);
    expect(again.records[0]).toMatchObject({ eventId: second, phase: 'Completed', inferred: true });
    expect(again.records[0]?.gapSeconds).toBeGreaterThanOrEqual(0);
    assertValidRecord(again.records[0]);
  });

  it('after the state file was deleted, a repeat carries the same recordId', async () => {
    fixture.setDocument(eventsDoc(1, [event({ EventId: MINE })]));
    const first = shipper();
    await waitFor(() => first.records.length >= 1, 'Scheduled');
    await stop(first);
    rmSync(join(stateDir, 'state.json'));
    const again = shipper();
    await waitFor(() => again.records.length >= 1, 'repeat after state loss');
    await stop(again);
    expect(again.records[0]?.recordId).toBe(first.records[0]?.recordId);
  });

  it('keeps shipping with empty identity while instance metadata is unavailable', async () => {
    fixture.setCompute(null);
    fixture.setDocument(eventsDoc(1, [event({ EventId: MINE })]));
    const run = shipper();
    await waitFor(() => run.records.length >= 1, 'record without identity');
    await stop(run);
    expect(run.records[0]).toMatchObject({ vmName: '', vmId: '', affectsThisVm: null });
    assertValidRecord(run.records[0]);
    expect(
      run.logs.some((l) => l.level === 'warn' && /instance metadata unavailable/.test(String(l.msg))),
    ).toBe(true);
  });

  it('logs an unknown EventType once and passes it through', async () => {
    fixture.setDocument(eventsDoc(1, [event({ EventId: MINE, EventType: 'LiveMigrate' })]));
    const run = shipper();
    await waitFor(() => run.records.length >= 1, 'record');
    const polls = fixture.requests.length;
    await waitFor(() => fixture.requests.length >= polls + 3, 'more polls');
    await stop(run);
    expect(run.records[0]?.eventType).toBe('LiveMigrate');
    expect(run.logs.filter((l) => /unknown EventType/.test(String(l.msg)))).toHaveLength(1);
  });

  it('appends NDJSON to a file with --sink file', async () => {
    const out = join(stateDir, 'records.ndjson');
    fixture.setDocument(eventsDoc(1, [event({ EventId: MINE })]));
    const run = shipper(['--sink', 'file', '--out', out]);
    await waitFor(() => {
      try {
        return readFileSync(out, 'utf8').includes('"phase":"Scheduled"');
      } catch {
        return false;
      }
    }, 'record in the file');
    await stop(run);
    expect(run.records).toHaveLength(0);
    const lines = readFileSync(out, 'utf8').trim().split('\n');
    expect(lines).toHaveLength(1);
    assertValidRecord(JSON.parse(lines[0] ?? ''));
  });

  it('takes its settings from SE_SHIPPER_* environment variables', async () => {
    fixture.setDocument(eventsDoc(1, [event({ EventId: OTHER, Resources: ['web_7'] })]));
    const run = startCli(['run'], {
      SE_SHIPPER_IMDS_ENDPOINT: fixture.url,
      SE_SHIPPER_POLL_INTERVAL: '200',
      SE_SHIPPER_STATE_DIR: stateDir,
      SE_SHIPPER_SCOPE: 'all',
      SE_SHIPPER_HEARTBEAT_INTERVAL: '0',
    });
    running.push(run);
    await waitFor(() => run.records.length >= 1, 'record');
    await stop(run);
    expect(run.records[0]?.eventId).toBe(OTHER);
  });
});
