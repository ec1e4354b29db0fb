/**
 * Fault tests on the Event Hubs side, end to end (IMDS emulator → `se-shipper run --sink
 * eventhubs` → Event Hubs emulator → SDK consumer). Each one injects a fault while the lifecycle
 * script runs and asserts that no lifecycle record is lost: every (eventId, phase) this VM went
 * through arrives at least once, and copies of one transition share their recordId.
 *
 * Timings used (see harness.startShipper): polls every 200 ms, `--send-timeout 2000` (the delivery
 * loop's per-send timeout; the Event Hubs client's operation timeout follows it),
 * `--retry-max-backoff 1000`, `--flush-timeout 1000`.
 */
import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import {
  allArrived,
  allStderr,
  expectedTransitions,
  lifecycleScript,
  logsWith,
  play,
  type Stack,
  sleep,
  started,
  startShipper,
  startStack,
  stopShipper,
  verdict,
  waitFor,
  waitForLog,
} from './harness.js';

let stack: Stack | undefined;
afterEach(async () => {
  await stack?.close();
  stack = undefined;
});

describe('Event Hubs faults: no lifecycle record lost', () => {
  it('Event Hubs down for a while, then back on the same port', async () => {
    stack = await startStack();
    const s = stack;
    const run = startShipper(s);
    await started(run);
    const script = lifecycleScript('down');
    await play(s.imds, script.slice(0, 3));
    await allArrived(s.hub, expectedTransitions(s.imds));
    await s.hub.stopListening();
    await play(s.imds, script.slice(3, 7)); // spooled while the hub is unreachable
    await waitFor(() => logsWith(s, /send failed/).length > 0, 'a logged send failure');
    await sleep(1_500);
    const before = s.hub.events().length;
    await s.hub.resumeListening();
    await play(s.imds, script.slice(7));
    await verdict(s);
    expect(s.hub.events().length).toBeGreaterThan(before);
    expect(logsWith(s, /sink recovered/).length).toBeGreaterThan(0);
    expect(await stopShipper(run)).toEqual({ code: 0, signal: null });
  });

  it('links detached and connections reset mid-stream', async () => {
    stack = await startStack();
    const s = stack;
    const run = startShipper(s);
    await started(run);
    await play(s.imds, lifecycleScript('flap'), async (i) => {
      if (i === 2) s.hub.detachLinks({ which: 'producers' });
      if (i === 5) s.hub.dropConnections();
      if (i === 7) s.hub.detachLinks({ condition: 'com.microsoft:server-busy' });
    });
    await verdict(s);
    // After a service-side detach @azure/event-hubs 6.0.4 leaks a ref'd 45-min token-renewal timer
    // of the sender it re-created ('sender_close' closes the rhea link, not the EventHubSender);
    // `run` exits explicitly once stopped, so SIGTERM still ends the process promptly.
    expect(await stopShipper(run)).toEqual({ code: 0, signal: null });
    expect(run.logs.some((l) => l.msg === 'stopped')).toBe(true);
    expect(logsWith(s, /delivery stopped; spool empty/)).toHaveLength(1);
  });

  it('server-busy storms (rejectNextSends)', async () => {
    stack = await startStack();
    const s = stack;
    const run = startShipper(s);
    await started(run);
    const script = lifecycleScript('busy');
    s.hub.rejectNextSends(6);
    await play(s.imds, script.slice(0, 5));
    await waitFor(() => s.hub.faults.rejectNext === 0, 'the first storm to be spent');
    s.hub.rejectNextSends(4);
    await play(s.imds, script.slice(5));
    await verdict(s);
    expect(s.hub.stats.sendsRejected).toBe(10);
    expect(await stopShipper(run)).toEqual({ code: 0, signal: null });
  });

  it('a hanging send: the per-send timeout abandons it and delivery resumes after stopHanging', async () => {
    stack = await startStack();
    const s = stack;
    const run = startShipper(s);
    await started(run);
    const script = lifecycleScript('hang');
    await play(s.imds, script.slice(0, 2));
    await allArrived(s.hub, expectedTransitions(s.imds));
    s.hub.hangSends();
    await play(s.imds, script.slice(2, 6));
    await waitFor(() => s.hub.faults.hungDeliveries > 0, 'a hung send');
    await waitFor(() => logsWith(s, /send failed/).length > 0, 'the send timeout to fire');
    s.hub.stopHanging();
    await play(s.imds, script.slice(6));
    await verdict(s);
    expect(allStderr(s)).toMatch(/timed out/);
    expect(await stopShipper(run)).toEqual({ code: 0, signal: null });
  });

  it('wrong credentials, then the key is added at runtime: clear rate-limited error, key never printed', async () => {
    stack = await startStack();
    const s = stack;
    const key = randomBytes(32).toString('base64');
    const connectionString = s.hub.connectionStringFor({ keyName: 'shipper-send', key });
    const run = startShipper(s, { connectionString });
    await started(run);
    const script = lifecycleScript('auth');
    await play(s.imds, script.slice(0, 5));
    await waitForLog(s, /non-retryable/, 'error');
    // Several more failed attempts (backoff capped at 1 s) without another error line.
    await sleep(3_000);
    expect(s.hub.events()).toHaveLength(0);
    s.hub.setKey('shipper-send', key);
    await play(s.imds, script.slice(5));
    await verdict(s);
    const errors = logsWith(s, /non-retryable/, 'error');
    expect(errors).toHaveLength(1);
    expect(String((errors[0]?.err as { message?: string })?.message ?? '')).toMatch(
      /^Event Hubs send failed \(UnauthorizedError\)/,
    );
    const recovered = logsWith(s, /sink recovered/)[0];
    expect(recovered?.failedAttempts as number).toBeGreaterThanOrEqual(3);
    expect(await stopShipper(run)).toEqual({ code: 0, signal: null });
    expect(allStderr(s)).not.toContain(key);
    expect(allStderr(s)).not.toContain(encodeURIComponent(key));
  });
});
