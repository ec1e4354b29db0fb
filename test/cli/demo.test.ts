import { describe, expect, it } from 'vitest';
import { runCli } from '../fixtures/child.js';
import { assertValidRecord } from '../fixtures/record-schema.js';

/** What `npm start` runs: the whole pipeline on the emulators, checked end to end by the demo itself. */
describe('se-shipper demo', () => {
  it('delivers every lifecycle transition of the demo scenario and exits 0 (NDJSON when piped)', async () => {
    const result = await runCli(['demo', '--timeout', '100'], {}, 120_000);
    expect(result.code, result.stderr).toBe(0);
    const summaryLine = result.stderr
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { summary?: Record<string, unknown> })
      .find((l) => l.summary);
    expect(summaryLine?.summary).toMatchObject({ ok: true, lost: [] });
    expect(summaryLine?.summary?.expected).toBeGreaterThanOrEqual(15);
    const lifecycle = result.records.filter((r) => r.recordType === 'lifecycle');
    const kinds = new Set(lifecycle.map((r) => r.eventType));
    for (const kind of ['Freeze', 'Reboot', 'Redeploy', 'Preempt', 'Terminate'])
      expect(kinds).toContain(kind);
    expect(lifecycle.some((r) => r.phase === 'Canceled')).toBe(true);
    // scope self: the peer VM's event is not shipped.
    expect(lifecycle.every((r) => r.affectsThisVm === true)).toBe(true);
    for (const record of result.records) assertValidRecord(record);
  }, 130_000);
});
