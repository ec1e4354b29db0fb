import http from 'node:http';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ImdsClient, SCHEDULED_EVENTS_API_VERSION } from '../../src/imds/client.js';
import { ImdsError } from '../../src/imds/errors.js';
import { event, eventsDoc, type ImdsFixture, startImdsFixture } from '../fixtures/imds-fixture.js';

let fixture: ImdsFixture;
let client: ImdsClient;

beforeEach(async () => {
  fixture = await startImdsFixture();
  client = new ImdsClient({
    endpoint: fixture.url,
    timeoutMs: 300,
    firstCallTimeoutMs: 3_000,
    minRetryDelayMs: 5,
    maxRetryDelayMs: 20,
  });
});
afterEach(async () => {
  client.close();
  await fixture.close();
});

async function failure(p: Promise<unknown>): Promise<ImdsError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ImdsError);
  return err as ImdsError;
}

describe('ImdsClient.getScheduledEvents', () => {
  it('sends Metadata: true and the api-version, and returns the validated document', async () => {
    fixture.setDocument(eventsDoc(3, [event({})]));
    const { document, notModified } = await client.getScheduledEvents();
    expect(notModified).toBe(false);
    expect(document.DocumentIncarnation).toBe(3);
    expect(document.Events[0]?.EventId).toBe('A7F6D8B0-2A4B-4C3D-9E1F-000000000001');
    const req = fixture.requests[0];
    expect(req?.headers.metadata).toBe('true');
    expect(req?.path).toBe(`/metadata/scheduledevents?api-version=${SCHEDULED_EVENTS_API_VERSION}`);
  });

  it('the fixture, like IMDS, refuses a request without the Metadata header', async () => {
    const status = await new Promise<number>((resolve) =>
      http.get(`${fixture.url}/metadata/scheduledevents?api-version=2020-07-01`, (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      }),
    );
    expect(status).toBe(400);
  });

  it('uses If-None-Match and returns the cached document on 304', async () => {
    fixture.setDocument(eventsDoc(1, [event({})]));
    const first = await client.getScheduledEvents();
    const second = await client.getScheduledEvents();
    expect(second.notModified).toBe(true);
    expect(second.document).toBe(first.document);
    expect(fixture.requests[1]?.headers['if-none-match']).toMatch(/^".+"$/);
    fixture.setDocument(eventsDoc(2, []));
    const third = await client.getScheduledEvents();
    expect(third.notModified).toBe(false);
    expect(third.document.DocumentIncarnation).toBe(2);
  });

  it.each([410, 429, 500, 503])('retries a burst of HTTP %i and succeeds', async (status) => {
    fixture.setDocument(eventsDoc(5, []));
    fixture.fault({ kind: 'status', status }, { kind: 'status', status });
    const result = await client.getScheduledEvents();
    expect(result.attempts).toBe(3);
    expect(result.document.DocumentIncarnation).toBe(5);
  });

  it('gives up after the bounded retries and reports the last status', async () => {
    fixture.fault(...Array.from({ length: 5 }, () => ({ kind: 'status' as const, status: 500 })));
    const err = await failure(client.getScheduledEvents());
    expect(err.kind).toBe('http');
    expect(err.status).toBe(500);
    expect(fixture.requests).toHaveLength(3);
  });

  it.each([400, 404])('does not hammer on HTTP %i', async (status) => {
    fixture.fault({ kind: 'status', status });
    const err = await failure(client.getScheduledEvents());
    expect(err.retryable).toBe(false);
    expect(fixture.requests).toHaveLength(1);
  });

  it('retries a dropped connection', async () => {
    fixture.setDocument(eventsDoc(9, []));
    fixture.fault({ kind: 'drop' });
    const result = await client.getScheduledEvents();
    expect(result.document.DocumentIncarnation).toBe(9);
  });

  it('times out a hanging request with the short timeout once IMDS has answered', async () => {
    await client.getScheduledEvents();
    fixture.fault({ kind: 'hang' }, { kind: 'hang' }, { kind: 'hang' });
    const err = await failure(client.getScheduledEvents());
    expect(err.kind).toBe('timeout');
  });

  it('gives the very first call the long enrolment timeout', async () => {
    // 600 ms is beyond the 300 ms steady-state timeout but within the 3 s first-call timeout.
    fixture.fault({ kind: 'delay', ms: 600 });
    await expect(client.getScheduledEvents()).resolves.toMatchObject({ attempts: 1 });
    fixture.fault({ kind: 'delay', ms: 600 }, { kind: 'delay', ms: 600 }, { kind: 'delay', ms: 600 });
    expect((await failure(client.getScheduledEvents())).kind).toBe('timeout');
  });

  it.each([
    ['not JSON', '<html>gateway</html>', /not JSON/],
    ['truncated JSON', '{"DocumentIncarnation": 4, "Events": [{"EventId": "x"', /not JSON/],
    ['no Events', '{"DocumentIncarnation": 4}', /Events must be an array/],
    ['no incarnation', '{"Events": []}', /DocumentIncarnation must be an integer/],
    [
      'event without EventId',
      '{"DocumentIncarnation": 4, "Events": [{"EventType": "Reboot", "EventStatus": "Scheduled"}]}',
      /Events\[0\]\.EventId/,
    ],
    [
      'bad Resources',
      '{"DocumentIncarnation": 4, "Events": [{"EventId": "a", "EventType": "Reboot", "EventStatus": "Scheduled", "Resources": ["vm1", 7]}]}',
      /Events\[0\]\.Resources/,
    ],
  ])(
    'rejects a malformed document (%s) with a clear error and no retry storm',
    async (_name, body, message) => {
      fixture.fault({ kind: 'raw', body });
      const err = await failure(client.getScheduledEvents());
      expect(err.kind).toBe('document');
      expect(err.message).toMatch(message);
      expect(fixture.requests).toHaveLength(1);
    },
  );

  it('keeps unknown fields out and unknown enum values verbatim; fills absent optional fields', async () => {
    fixture.setDocument({
      DocumentIncarnation: 2,
      FutureField: { x: 1 },
      Events: [
        {
          EventId: 'e1',
          EventType: 'LiveMigrate',
          EventStatus: 'Paused',
          Resources: ['web_3'],
          Surprise: true,
        },
      ],
    });
    const { document } = await client.getScheduledEvents();
    expect(document.Events[0]).toEqual({
      EventId: 'e1',
      EventType: 'LiveMigrate',
      ResourceType: '',
      Resources: ['web_3'],
      EventStatus: 'Paused',
      NotBefore: '',
      Description: '',
      EventSource: '',
      DurationInSeconds: -1,
    });
  });

  it('tolerates mistyped fields it only carries along, so one odd event cannot hide the others', async () => {
    fixture.setDocument({
      DocumentIncarnation: 3,
      Events: [
        {
          EventId: 'odd',
          EventType: '',
          EventStatus: 7,
          Resources: 'web_3',
          DurationInSeconds: '30',
          Description: null,
        },
        {
          EventId: 'preempt',
          EventType: 'Preempt',
          EventStatus: 'Scheduled',
          Resources: ['web_3'],
          DurationInSeconds: 'soon',
        },
      ],
    });
    const { document } = await client.getScheduledEvents();
    expect(document.Events[0]).toMatchObject({
      EventType: '',
      EventStatus: '7',
      Resources: ['web_3'],
      DurationInSeconds: 30,
      Description: '',
    });
    expect(document.Events[1]).toMatchObject({
      EventId: 'preempt',
      EventType: 'Preempt',
      DurationInSeconds: -1,
    });
  });

  it('ignores HTTP_PROXY / HTTPS_PROXY in its own process', async () => {
    const saved = { h: process.env.HTTP_PROXY, s: process.env.HTTPS_PROXY };
    process.env.HTTP_PROXY = 'http://127.0.0.1:9';
    process.env.HTTPS_PROXY = 'http://127.0.0.1:9';
    try {
      await expect(client.getScheduledEvents()).resolves.toBeDefined();
    } finally {
      if (saved.h === undefined) delete process.env.HTTP_PROXY;
      else process.env.HTTP_PROXY = saved.h;
      if (saved.s === undefined) delete process.env.HTTPS_PROXY;
      else process.env.HTTPS_PROXY = saved.s;
    }
  });

  it('aborts when its signal fires', async () => {
    fixture.fault({ kind: 'hang' });
    const ac = new AbortController();
    const p = client.getScheduledEvents(ac.signal);
    setTimeout(() => ac.abort(), 20);
    await expect(p).rejects.toThrow();
  });
});

describe('ImdsClient.approveEvents', () => {
  it('POSTs StartRequests with the Metadata header', async () => {
    await client.approveEvents(['e1', 'e2']);
    const req = fixture.requests[0];
    expect(req?.method).toBe('POST');
    expect(req?.headers.metadata).toBe('true');
    expect(JSON.parse(req?.body ?? '')).toEqual({ StartRequests: [{ EventId: 'e1' }, { EventId: 'e2' }] });
  });
});

describe('ImdsClient.getInstanceCompute', () => {
  it('reads compute fields, with missing values as empty strings', async () => {
    fixture.setCompute({ name: 'vm1', vmId: 'id1', osProfile: { computerName: 'host1' } });
    const compute = await client.getInstanceCompute();
    expect(compute.name).toBe('vm1');
    expect(compute.computerName).toBe('host1');
    expect(compute.zone).toBe('');
    expect(fixture.requests[0]?.path).toMatch(/^\/metadata\/instance\?api-version=/);
  });

  it('fails with an http error when instance metadata is unavailable', async () => {
    fixture.faultInstance(
      { kind: 'status', status: 500 },
      { kind: 'status', status: 500 },
      { kind: 'status', status: 500 },
    );
    expect((await failure(client.getInstanceCompute())).status).toBe(500);
  });
});
