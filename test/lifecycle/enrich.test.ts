import { describe, expect, it } from 'vitest';
import type { InstanceCompute } from '../../src/imds/types.js';
import {
  affectsVm,
  buildHeartbeatRecord,
  buildLifecycleRecord,
  computeRecordId,
  inScope,
  parseVmInstanceId,
  vmIdentityFromCompute,
} from '../../src/lifecycle/enrich.js';
import { EMPTY_VM_IDENTITY, type LifecyclePhase, type VmIdentity } from '../../src/lifecycle/record.js';
import type { Transition } from '../../src/lifecycle/tracker.js';
import { ev, expectValidRecord, SHIPPER, T0, VM } from './helpers.js';

const SUB =
  '/subscriptions/8d10da13-8125-4ba9-a717-bf7490507b3d/resourceGroups/rg/providers/Microsoft.Compute';

function compute(over: Partial<InstanceCompute>): InstanceCompute {
  return {
    name: '',
    vmId: '',
    resourceId: '',
    subscriptionId: '',
    resourceGroupName: '',
    location: '',
    zone: '',
    vmSize: '',
    osType: '',
    priority: '',
    evictionPolicy: '',
    vmScaleSetName: '',
    computerName: '',
    ...over,
  };
}

function transition(phase: LifecyclePhase, over: Partial<Transition> = {}): Transition {
  const ended = phase === 'Completed' || phase === 'Canceled';
  return {
    phase,
    inferred: false,
    gapSeconds: 0,
    event: ev(phase === 'Started' ? { EventStatus: 'Started', NotBefore: '' } : {}),
    notBefore: phase === 'Started' ? null : '2022-04-11T22:26:58.000Z',
    observedAt: T0,
    documentIncarnation: ended ? 4 : 2,
    ...over,
  };
}

describe('vmIdentityFromCompute and instance ids', () => {
  it('uniform scale set: from the scale-set resource id (and the name suffix agrees)', () => {
    const c = compute({
      name: 'WestNO_12',
      vmId: '02aab8a4-74ef-476e-8182-f6d2ba4166a6',
      resourceId: `${SUB}/virtualMachineScaleSets/WestNO/virtualMachines/12`,
      subscriptionId: '8d10da13-8125-4ba9-a717-bf7490507b3d',
      resourceGroupName: 'rg',
      location: 'norwaywest',
      zone: '2',
      vmSize: 'Standard_D2s_v5',
      osType: 'Linux',
      priority: 'Spot',
      evictionPolicy: 'Deallocate',
      vmScaleSetName: 'WestNO',
      computerName: 'westno00000c',
    });
    expect(vmIdentityFromCompute(c)).toEqual({
      vmName: 'WestNO_12',
      vmId: '02aab8a4-74ef-476e-8182-f6d2ba4166a6',
      vmResourceId: `${SUB}/virtualMachineScaleSets/WestNO/virtualMachines/12`,
      subscriptionId: '8d10da13-8125-4ba9-a717-bf7490507b3d',
      resourceGroup: 'rg',
      location: 'norwaywest',
      zone: '2',
      vmSize: 'Standard_D2s_v5',
      priority: 'Spot',
      osType: 'Linux',
      vmScaleSetName: 'WestNO',
      vmInstanceId: '12',
    });
    // From the name alone when the resource id is missing.
    expect(parseVmInstanceId({ ...c, resourceId: '' })).toBe('12');
    // From the resource id alone when the scale-set name is missing.
    expect(parseVmInstanceId({ ...c, vmScaleSetName: '', name: '' })).toBe('12');
  });

  it('flexible scale set: a VM resource, instance id is the suffix after {scaleSet}_', () => {
    const c = compute({
      name: 'webflex_4f2a9c1e',
      resourceId: `${SUB}/virtualMachines/webflex_4f2a9c1e`,
      vmScaleSetName: 'webflex',
    });
    expect(vmIdentityFromCompute(c).vmInstanceId).toBe('4f2a9c1e');
    expect(parseVmInstanceId({ ...c, name: 'WEBFLEX_4f2a9c1e' })).toBe('4f2a9c1e');
  });

  it('plain VM: no instance id, even with an underscore in its name or /virtualMachines/<name> in its id', () => {
    expect(parseVmInstanceId(compute({ name: 'api_01', resourceId: `${SUB}/virtualMachines/api_01` }))).toBe(
      '',
    );
    expect(parseVmInstanceId(compute({ name: 'db', resourceId: `${SUB}/virtualMachines/db` }))).toBe('');
    // A scale-set name that is not a prefix of the name tells nothing.
    expect(parseVmInstanceId(compute({ name: 'other_3', vmScaleSetName: 'WestNO' }))).toBe('');
    expect(parseVmInstanceId(compute({ name: 'WestNO_', vmScaleSetName: 'WestNO' }))).toBe('');
  });

  it('empty instance metadata gives the empty identity', () => {
    expect(vmIdentityFromCompute(compute({}))).toEqual(EMPTY_VM_IDENTITY);
  });
});

describe('affectsVm', () => {
  it('matches names case-insensitively; null while the name is unknown', () => {
    expect(affectsVm(['WestNO_0', 'WestNO_1'], 'westno_1')).toBe(true);
    expect(affectsVm(['WestNO_0', 'WestNO_1'], 'WestNO_2')).toBe(false);
    expect(affectsVm([], 'WestNO_2')).toBe(false);
    expect(affectsVm(['WestNO_0'], null)).toBeNull();
    expect(affectsVm(['WestNO_0'], '')).toBeNull();
  });
});

describe('computeRecordId', () => {
  const base = {
    vmId: VM.vmId,
    vmResourceId: VM.vmResourceId,
    hostname: 'h',
    eventId: 'ABC',
    phase: 'Scheduled' as LifecyclePhase,
    notBefore: '2022-04-11T22:26:58.000Z',
  };

  it('is deterministic, 128-bit hex, and ignores EventId case', () => {
    const id = computeRecordId(base);
    expect(id).toMatch(/^[0-9a-f]{32}$/);
    expect(computeRecordId({ ...base })).toBe(id);
    expect(computeRecordId({ ...base, eventId: 'abc' })).toBe(id);
  });

  it('differs by VM, event and phase; notBefore counts only for Rescheduled', () => {
    const id = computeRecordId(base);
    expect(computeRecordId({ ...base, vmId: 'other' })).not.toBe(id);
    expect(computeRecordId({ ...base, eventId: 'ABD' })).not.toBe(id);
    expect(computeRecordId({ ...base, phase: 'Started' })).not.toBe(id);
    expect(computeRecordId({ ...base, notBefore: null })).toBe(id);
    const r1 = computeRecordId({ ...base, phase: 'Rescheduled' });
    expect(
      computeRecordId({ ...base, phase: 'Rescheduled', notBefore: '2022-04-11T22:41:58.000Z' }),
    ).not.toBe(r1);
  });

  it('falls back to the resource id, then to the host name, so VMs never share ids', () => {
    const noVmId = computeRecordId({ ...base, vmId: '' });
    expect(noVmId).not.toBe(computeRecordId(base));
    const unknown = { ...base, vmId: '', vmResourceId: '' };
    expect(computeRecordId({ ...unknown, hostname: 'a' })).not.toBe(
      computeRecordId({ ...unknown, hostname: 'b' }),
    );
    // The host name is not used while a VM id is known.
    expect(computeRecordId({ ...base, hostname: 'other' })).toBe(computeRecordId(base));
  });
});

describe('buildLifecycleRecord', () => {
  it.each(['Scheduled', 'Rescheduled', 'Started', 'Completed', 'Canceled'] as const)(
    '%s: a valid v1 record with the VM identity',
    (phase) => {
      const r = buildLifecycleRecord(transition(phase), VM, SHIPPER);
      expectValidRecord(r);
      expect(r).toMatchObject({
        schemaVersion: 1,
        recordType: 'lifecycle',
        phase,
        observedAt: '2022-04-11T22:10:00.000Z',
        eventId: 'C7061BAC-AFDC-4513-B24B-AA5F13A16123',
        eventType: 'Freeze',
        resources: ['WestNO_0', 'WestNO_1'],
        affectsThisVm: true,
        durationInSeconds: 5,
        vmName: 'WestNO_0',
        vmInstanceId: '0',
        hostname: SHIPPER.hostname,
        shipperVersion: SHIPPER.shipperVersion,
      });
      const expectedStatus = {
        Scheduled: 'Scheduled',
        Rescheduled: 'Scheduled',
        Started: 'Started',
      } as Record<string, string>;
      expect(r.eventStatus).toBe(expectedStatus[phase] ?? '');
      expect(r.recordId).toBe(
        computeRecordId({
          vmId: VM.vmId,
          vmResourceId: VM.vmResourceId,
          hostname: SHIPPER.hostname,
          eventId: r.eventId,
          phase,
          notBefore: r.notBefore,
          resources: r.resources,
          durationInSeconds: r.durationInSeconds,
        }),
      );
    },
  );

  it('inferred Completed carries the gap', () => {
    const r = buildLifecycleRecord(transition('Completed', { inferred: true, gapSeconds: 95 }), VM, SHIPPER);
    expectValidRecord(r);
    expect(r).toMatchObject({ inferred: true, gapSeconds: 95, eventStatus: '' });
  });

  it('unknown VM: empty identity fields and affectsThisVm null', () => {
    const r = buildLifecycleRecord(transition('Scheduled'), null, SHIPPER);
    expectValidRecord(r);
    expect(r.affectsThisVm).toBeNull();
    for (const [field, value] of Object.entries(EMPTY_VM_IDENTITY)) {
      expect(r[field as keyof VmIdentity]).toBe(value);
    }
  });

  it('another VM of the availability set: affectsThisVm false', () => {
    const r = buildLifecycleRecord(transition('Scheduled'), { ...VM, vmName: 'WestNO_7' }, SHIPPER);
    expectValidRecord(r);
    expect(r.affectsThisVm).toBe(false);
  });

  it('durationInSeconds -1 when unknown or not an integer; notBefore null stays null', () => {
    for (const d of [-1, Number.NaN, 2.5, -7]) {
      const t = transition('Scheduled', { event: ev({ DurationInSeconds: d }), notBefore: null });
      const r = buildLifecycleRecord(t, VM, SHIPPER);
      expectValidRecord(r);
      expect(r.durationInSeconds).toBe(-1);
      expect(r.notBefore).toBeNull();
    }
  });

  it('an unknown EventType and EventStatus pass through verbatim', () => {
    const t = transition('Scheduled', { event: ev({ EventType: 'Hibernate', EventStatus: 'Approved' }) });
    const r = buildLifecycleRecord(t, VM, SHIPPER);
    expectValidRecord(r);
    expect([r.eventType, r.eventStatus]).toEqual(['Hibernate', 'Approved']);
  });

  it('the record does not share the Resources array with the tracker state', () => {
    const t = transition('Scheduled');
    const r = buildLifecycleRecord(t, VM, SHIPPER);
    expect(r.resources).toEqual(t.event.Resources);
    expect(r.resources).not.toBe(t.event.Resources);
  });
});

describe('buildHeartbeatRecord and inScope', () => {
  const counters = {
    activeEvents: 1,
    spoolDepth: 3,
    pollsOk: 86_400,
    pollsFailed: 2,
    lastIncarnation: -1,
    uptimeSeconds: 86_402,
  };

  it('builds a valid heartbeat with the counters, deterministic id per VM and time', () => {
    const h = buildHeartbeatRecord(counters, T0, VM, SHIPPER);
    expectValidRecord(h);
    expect(h).toMatchObject({
      recordType: 'heartbeat',
      phase: '',
      ...counters,
      observedAt: '2022-04-11T22:10:00.000Z',
    });
    expect(buildHeartbeatRecord(counters, T0, VM, SHIPPER).recordId).toBe(h.recordId);
    expect(buildHeartbeatRecord(counters, T0 + 60_000, VM, SHIPPER).recordId).not.toBe(h.recordId);
    const anonymous = buildHeartbeatRecord(counters, T0, null, SHIPPER);
    expectValidRecord(anonymous);
    expect(anonymous.vmId).toBe('');
  });

  it("scope 'self' ships what affects this VM or cannot be ruled out; 'all' ships everything", () => {
    const mine = buildLifecycleRecord(transition('Scheduled'), VM, SHIPPER);
    const theirs = buildLifecycleRecord(transition('Scheduled'), { ...VM, vmName: 'WestNO_7' }, SHIPPER);
    const unknown = buildLifecycleRecord(transition('Scheduled'), null, SHIPPER);
    const heartbeat = buildHeartbeatRecord(counters, T0, VM, SHIPPER);
    expect([mine, theirs, unknown, heartbeat].map((r) => inScope(r, 'self'))).toEqual([
      true,
      false,
      true,
      true,
    ]);
    expect([mine, theirs, unknown, heartbeat].map((r) => inScope(r, 'all'))).toEqual([
      true,
      true,
      true,
      true,
    ]);
  });
});
