/**
 * Enrichment: turns tracker transitions into v1 records stamped with this VM's identity (from
 * instance metadata) and the shipper's, with a deterministic `recordId`; builds heartbeats;
 * decides scope. Pure functions; records are built only when something happened, never on the
 * unchanged-document path.
 */
import { createHash } from 'node:crypto';
import type { InstanceCompute } from '../imds/types.js';
import { rescheduleVariant } from './emitted-keys.js';
import {
  EMPTY_VM_IDENTITY,
  type HeartbeatRecord,
  type LifecyclePhase,
  type LifecycleRecord,
  SCHEMA_VERSION,
  type ShipperIdentity,
  type ShipperRecord,
  type VmIdentity,
} from './record.js';
import type { Transition } from './tracker.js';

export type Scope = 'self' | 'all';

// …/virtualMachineScaleSets/{scaleSet}/virtualMachines/{instanceId}: a uniform scale-set
// instance. A plain (or flexible-orchestration) VM's id ends in /virtualMachines/{name} without
// the scale-set segment and must not be read as an instance id.
const SCALE_SET_VM_ID = /\/virtualMachineScaleSets\/[^/]+\/virtualMachines\/([^/]+)\/?$/i;

/**
 * The scale-set instance id: from a scale-set VM resource id, else from the name
 * `{vmScaleSetName}_{id}` (uniform: a number; flexible: the generated suffix). '' for a VM not
 * in a scale set, or when neither source tells.
 */
export function parseVmInstanceId(
  c: Pick<InstanceCompute, 'name' | 'resourceId' | 'vmScaleSetName'>,
): string {
  const m = SCALE_SET_VM_ID.exec(c.resourceId);
  if (m !== null) return m[1] as string;
  const ss = c.vmScaleSetName;
  if (ss === '' || c.name.length <= ss.length + 1) return '';
  const prefix = c.name.slice(0, ss.length + 1);
  if (prefix.toLowerCase() !== `${ss.toLowerCase()}_`) return '';
  return c.name.slice(ss.length + 1);
}

export function vmIdentityFromCompute(c: InstanceCompute): VmIdentity {
  return {
    vmName: c.name,
    vmId: c.vmId,
    vmResourceId: c.resourceId,
    subscriptionId: c.subscriptionId,
    resourceGroup: c.resourceGroupName,
    location: c.location,
    zone: c.zone,
    vmSize: c.vmSize,
    priority: c.priority,
    osType: c.osType,
    vmScaleSetName: c.vmScaleSetName,
    vmInstanceId: parseVmInstanceId(c),
  };
}

/**
 * Whether `resources` names this VM (case-insensitively). null while this VM's name is unknown
 * (null or ''): the caller must not drop what it cannot rule out.
 */
export function affectsVm(resources: readonly string[], vmName: string | null): boolean | null {
  if (vmName === null || vmName === '') return null;
  const name = vmName.toLowerCase();
  for (const r of resources) if (r.toLowerCase() === name) return true;
  return false;
}

export interface RecordIdParts {
  vmId: string;
  vmResourceId: string;
  /** Used only when both vmId and vmResourceId are unknown, so two VMs never share an id. */
  hostname: string;
  eventId: string;
  phase: LifecyclePhase;
  notBefore: string | null;
  /** For Rescheduled: the event's Resources and duration after the change (see rescheduleVariant). */
  resources?: readonly string[];
  durationInSeconds?: number;
}

/** Which VM a record is about, for ids: vmId, else the resource id, else the host name. */
function vmKey(p: Pick<RecordIdParts, 'vmId' | 'vmResourceId' | 'hostname'>): string {
  if (p.vmId !== '') return `vm:${p.vmId.toLowerCase()}`;
  if (p.vmResourceId !== '') return `rid:${p.vmResourceId.toLowerCase()}`;
  return `host:${p.hostname.toLowerCase()}`;
}

function hash128(parts: readonly string[]): string {
  // NUL cannot occur in any of the parts, so the joined text is unambiguous.
  return createHash('sha256').update(parts.join('\u0000')).digest('hex').slice(0, 32);
}

/**
 * Deterministic record id (128 bits of sha256, hex): the same transition of the same VM gets the
 * same id across retries, restarts and state loss, so downstream dedup by recordId is exact.
 */
export function computeRecordId(p: RecordIdParts): string {
  return hash128([
    'lifecycle',
    vmKey(p),
    p.eventId.toLowerCase(),
    p.phase,
    p.phase === 'Rescheduled'
      ? rescheduleVariant(p.notBefore, p.resources ?? [], p.durationInSeconds ?? -1)
      : '',
  ]);
}

function durationOf(d: number): number {
  return Number.isInteger(d) && d >= -1 ? d : -1;
}

/** The identity columns, copied field by field so that nothing else from the inputs leaks into a record. */
function identityFields(id: VmIdentity, shipper: ShipperIdentity): VmIdentity & ShipperIdentity {
  return {
    vmName: id.vmName,
    vmId: id.vmId,
    vmResourceId: id.vmResourceId,
    subscriptionId: id.subscriptionId,
    resourceGroup: id.resourceGroup,
    location: id.location,
    zone: id.zone,
    vmSize: id.vmSize,
    priority: id.priority,
    osType: id.osType,
    vmScaleSetName: id.vmScaleSetName,
    vmInstanceId: id.vmInstanceId,
    hostname: shipper.hostname,
    shipperVersion: shipper.shipperVersion,
  };
}

export function buildLifecycleRecord(
  t: Transition,
  vm: VmIdentity | null,
  shipper: ShipperIdentity,
): LifecycleRecord {
  const id = vm ?? EMPTY_VM_IDENTITY;
  const e = t.event;
  const ended = t.phase === 'Completed' || t.phase === 'Canceled';
  return {
    schemaVersion: SCHEMA_VERSION,
    recordType: 'lifecycle',
    recordId: computeRecordId({
      vmId: id.vmId,
      vmResourceId: id.vmResourceId,
      hostname: shipper.hostname,
      eventId: e.EventId,
      phase: t.phase,
      notBefore: t.notBefore,
      resources: e.Resources,
      durationInSeconds: e.DurationInSeconds,
    }),
    phase: t.phase,
    inferred: t.inferred,
    gapSeconds: t.gapSeconds,
    observedAt: new Date(t.observedAt).toISOString(),
    eventId: e.EventId,
    eventType: e.EventType,
    eventStatus: ended ? '' : e.EventStatus,
    eventSource: e.EventSource,
    resourceType: e.ResourceType,
    description: e.Description,
    resources: e.Resources.slice(),
    affectsThisVm: affectsVm(e.Resources, vm === null ? null : vm.vmName),
    notBefore: t.notBefore,
    durationInSeconds: durationOf(e.DurationInSeconds),
    documentIncarnation: t.documentIncarnation,
    ...identityFields(id, shipper),
  };
}

export interface HeartbeatCounters {
  activeEvents: number;
  spoolDepth: number;
  pollsOk: number;
  pollsFailed: number;
  /** -1 when no document has been seen. */
  lastIncarnation: number;
  uptimeSeconds: number;
}

export function buildHeartbeatRecord(
  counters: HeartbeatCounters,
  observedAt: number,
  vm: VmIdentity | null,
  shipper: ShipperIdentity,
): HeartbeatRecord {
  const id = vm ?? EMPTY_VM_IDENTITY;
  const observed = new Date(observedAt).toISOString();
  return {
    schemaVersion: SCHEMA_VERSION,
    recordType: 'heartbeat',
    recordId: hash128(['heartbeat', vmKey({ ...id, hostname: shipper.hostname }), observed]),
    phase: '',
    observedAt: observed,
    ...identityFields(id, shipper),
    activeEvents: Math.trunc(counters.activeEvents),
    spoolDepth: Math.trunc(counters.spoolDepth),
    pollsOk: Math.trunc(counters.pollsOk),
    pollsFailed: Math.trunc(counters.pollsFailed),
    lastIncarnation: Math.trunc(counters.lastIncarnation),
    uptimeSeconds: Math.trunc(counters.uptimeSeconds),
  };
}

/**
 * Whether a record is shipped under `scope`: `all` ships everything; `self` ships what affects
 * this VM or cannot be ruled out (affectsThisVm null), and always heartbeats.
 */
export function inScope(record: ShipperRecord, scope: Scope): boolean {
  if (scope === 'all' || record.recordType === 'heartbeat') return true;
  return record.affectsThisVm !== false;
}
