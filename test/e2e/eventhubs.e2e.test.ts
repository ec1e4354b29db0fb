/**
 * End to end, the happy path: IMDS emulator → `se-shipper run --sink eventhubs` (child process) →
 * Event Hubs emulator → the official EventHubConsumerClient, from the earliest position.
 */
import { afterEach, describe, expect, it } from 'vitest';
import {
  allArrived,
  assertNoLoss,
  expectedTransitions,
  lifecycleScript,
  play,
  readBackAndCheck,
  SCRIPT_RECORDS,
  type Stack,
  started,
  startShipper,
  startStack,
  stopShipper,
} from './harness.js';

let stack: Stack | undefined;
afterEach(async () => {
  await stack?.close();
  stack = undefined;
});

describe('se-shipper run → Event Hubs (end to end)', () => {
  it('delivers every lifecycle record of this VM, schema-valid, keyed by vmId, with application properties', async () => {
    stack = await startStack();
    const { imds, hub } = stack;
    const run = startShipper(stack, { args: ['--heartbeat-interval', '1'] });
    await started(run);
    await play(imds, lifecycleScript('e'));
    const expected = expectedTransitions(imds);
    expect([...expected.values()].reduce((a, b) => a + b, 0)).toBe(SCRIPT_RECORDS);
    await allArrived(hub, expected);
    // At least one heartbeat went the same way.
    await hub.waitForEvents((events) =>
      events.some((e) => (e.body as { recordType?: string }).recordType === 'heartbeat'),
    );
    expect(await stopShipper(run)).toEqual({ code: 0, signal: null });

    const records = await readBackAndCheck(hub, imds.identity.vmId);
    assertNoLoss(records, expected);
    // Nothing was lost or doubled on the happy path, and one VM's records are in the order IMDS
    // made the changes (one partition, in order).
    expect(records).toHaveLength(SCRIPT_RECORDS);
    const phasesOf = (ref: string) => {
      const id = imds.eventIdOf(ref)?.toLowerCase();
      return records.filter((r) => r.eventId.toLowerCase() === id).map((r) => r.phase);
    };
    expect(phasesOf('ea')).toEqual(['Scheduled', 'Rescheduled', 'Started', 'Completed']);
    expect(phasesOf('eb')).toEqual(['Scheduled', 'Canceled']);
    expect(phasesOf('ed')).toEqual(['Started', 'Completed']);
    expect(phasesOf('epeer')).toEqual([]);
    expect(records.every((r) => r.inferred === false)).toBe(true);
    // The connection string's key never reaches the logs.
    const key = /SharedAccessKey=([^;]+)/.exec(hub.connectionString)?.[1] as string;
    expect(run.stderrText()).not.toContain(key);
  });
});
