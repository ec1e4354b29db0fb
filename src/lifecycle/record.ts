/**
 * The record contract, schema version 1: one flat camelCase JSON object per Event Hubs message.
 *
 * This file is the single source of truth. The TypeScript type, the JSON Schema (exported here
 * and committed as `schema/record.v1.schema.json`), the ADX/Log Analytics table columns and the
 * KQL checks are all derived from `recordFields` below, so renaming a field breaks every
 * consumer's test rather than silently drifting.
 */

export const SCHEMA_VERSION = 1 as const;

export const LIFECYCLE_PHASES = ['Scheduled', 'Rescheduled', 'Started', 'Completed', 'Canceled'] as const;
export type LifecyclePhase = (typeof LIFECYCLE_PHASES)[number];

export const RECORD_TYPES = ['lifecycle', 'heartbeat'] as const;
export type RecordType = (typeof RECORD_TYPES)[number];

/** Column kinds, named after what ADX / Log Analytics need. */
export type FieldKind = 'int' | 'long' | 'string' | 'bool' | 'datetime' | 'string[]';

export interface FieldSpec {
  readonly kind: FieldKind;
  /** `null` is a legal value (JSON Schema type union with null). */
  readonly nullable?: boolean;
  /** Present only on heartbeat records. */
  readonly heartbeatOnly?: boolean;
  readonly description: string;
}

/**
 * Every field of a v1 record, in the order columns are created downstream. The order is part of
 * the contract for ADX (`.create table`) so append new fields at the end only.
 */
export const recordFields = {
  schemaVersion: { kind: 'int', description: 'Record schema version (1).' },
  recordType: { kind: 'string', description: 'lifecycle or heartbeat.' },
  recordId: {
    kind: 'string',
    description:
      'Deterministic id: hash of (vmId or vmResourceId, eventId, phase, notBefore for Rescheduled). Dedup key.',
  },
  phase: {
    kind: 'string',
    description: 'Scheduled, Rescheduled, Started, Completed, Canceled; empty on heartbeats.',
  },
  inferred: { kind: 'bool', description: 'True when the phase was inferred across an observation gap.' },
  gapSeconds: {
    kind: 'int',
    description: 'Length of the observation gap an inferred phase spans, in seconds; 0 when not inferred.',
  },
  observedAt: { kind: 'datetime', description: 'When the shipper saw the transition (ISO 8601 UTC, ms).' },
  eventId: { kind: 'string', description: 'IMDS EventId, as given.' },
  eventType: {
    kind: 'string',
    description: 'Freeze, Reboot, Redeploy, Preempt, Terminate, or a newer value verbatim.',
  },
  eventStatus: {
    kind: 'string',
    description: 'Scheduled or Started as IMDS gave it; empty for Completed/Canceled.',
  },
  eventSource: { kind: 'string', description: 'Platform or User.' },
  resourceType: { kind: 'string', description: 'VirtualMachine.' },
  description: { kind: 'string', description: 'IMDS Description.' },
  resources: { kind: 'string[]', description: 'VM names the event affects, as IMDS gave them.' },
  affectsThisVm: {
    kind: 'bool',
    nullable: true,
    description: "Whether Resources names this VM; null while this VM's name is unknown.",
  },
  notBefore: {
    kind: 'datetime',
    nullable: true,
    description: 'Earliest start, ISO 8601 UTC; null when none.',
  },
  durationInSeconds: { kind: 'int', description: 'Expected impact in seconds; -1 when unknown.' },
  documentIncarnation: { kind: 'long', description: 'DocumentIncarnation of the document that showed it.' },
  vmName: { kind: 'string', description: 'compute.name.' },
  vmId: { kind: 'string', description: 'compute.vmId (partition key).' },
  vmResourceId: { kind: 'string', description: 'compute.resourceId.' },
  subscriptionId: { kind: 'string', description: 'compute.subscriptionId.' },
  resourceGroup: { kind: 'string', description: 'compute.resourceGroupName.' },
  location: { kind: 'string', description: 'compute.location.' },
  zone: { kind: 'string', description: 'compute.zone.' },
  vmSize: { kind: 'string', description: 'compute.vmSize.' },
  priority: { kind: 'string', description: 'compute.priority (Regular, Spot, Low).' },
  osType: { kind: 'string', description: 'compute.osType.' },
  vmScaleSetName: { kind: 'string', description: 'compute.vmScaleSetName.' },
  vmInstanceId: {
    kind: 'string',
    description: 'Scale-set instance id, from the name suffix {scaleSet}_{id} or the resource id.',
  },
  hostname: { kind: 'string', description: 'OS hostname of the VM running the shipper.' },
  shipperVersion: { kind: 'string', description: 'se-shipper version.' },
  activeEvents: { kind: 'int', heartbeatOnly: true, description: 'Events currently in the IMDS document.' },
  spoolDepth: { kind: 'int', heartbeatOnly: true, description: 'Records waiting in the spool.' },
  pollsOk: { kind: 'long', heartbeatOnly: true, description: 'Successful IMDS polls since start.' },
  pollsFailed: { kind: 'long', heartbeatOnly: true, description: 'Failed IMDS polls since start.' },
  lastIncarnation: {
    kind: 'long',
    heartbeatOnly: true,
    description: 'Last DocumentIncarnation seen; -1 if none.',
  },
  uptimeSeconds: { kind: 'long', heartbeatOnly: true, description: 'Seconds since the shipper started.' },
} as const satisfies Record<string, FieldSpec>;

export type RecordFieldName = keyof typeof recordFields;

/** The VM identity part of a record (from instance metadata; empty strings when unknown). */
export interface VmIdentity {
  vmName: string;
  vmId: string;
  vmResourceId: string;
  subscriptionId: string;
  resourceGroup: string;
  location: string;
  zone: string;
  vmSize: string;
  priority: string;
  osType: string;
  vmScaleSetName: string;
  vmInstanceId: string;
}

export interface ShipperIdentity {
  hostname: string;
  shipperVersion: string;
}

interface RecordBase extends VmIdentity, ShipperIdentity {
  schemaVersion: typeof SCHEMA_VERSION;
  recordId: string;
  observedAt: string;
}

export interface LifecycleRecord extends RecordBase {
  recordType: 'lifecycle';
  phase: LifecyclePhase;
  inferred: boolean;
  gapSeconds: number;
  eventId: string;
  eventType: string;
  eventStatus: string;
  eventSource: string;
  resourceType: string;
  description: string;
  resources: string[];
  affectsThisVm: boolean | null;
  notBefore: string | null;
  durationInSeconds: number;
  documentIncarnation: number;
}

export interface HeartbeatRecord extends RecordBase {
  recordType: 'heartbeat';
  phase: '';
  activeEvents: number;
  spoolDepth: number;
  pollsOk: number;
  pollsFailed: number;
  lastIncarnation: number;
  uptimeSeconds: number;
}

export type ShipperRecord = LifecycleRecord | HeartbeatRecord;

export const EMPTY_VM_IDENTITY: Readonly<VmIdentity> = Object.freeze({
  vmName: '',
  vmId: '',
  vmResourceId: '',
  subscriptionId: '',
  resourceGroup: '',
  location: '',
  zone: '',
  vmSize: '',
  priority: '',
  osType: '',
  vmScaleSetName: '',
  vmInstanceId: '',
});

function jsonSchemaOf(spec: FieldSpec): Record<string, unknown> {
  const base: Record<string, unknown> = { description: spec.description };
  switch (spec.kind) {
    case 'int':
    case 'long':
      base.type = spec.nullable ? ['integer', 'null'] : 'integer';
      break;
    case 'string':
      base.type = spec.nullable ? ['string', 'null'] : 'string';
      break;
    case 'bool':
      base.type = spec.nullable ? ['boolean', 'null'] : 'boolean';
      break;
    case 'datetime':
      base.type = spec.nullable ? ['string', 'null'] : 'string';
      base.format = 'date-time';
      break;
    case 'string[]':
      base.type = 'array';
      base.items = { type: 'string' };
      break;
  }
  return base;
}

const fieldEntries = Object.entries(recordFields) as [RecordFieldName, FieldSpec][];
const commonFieldNames = ['schemaVersion', 'recordType', 'recordId', 'observedAt', 'phase'] as const;
const identityFieldNames = Object.keys(EMPTY_VM_IDENTITY).concat(['hostname', 'shipperVersion']);
const lifecycleFieldNames = fieldEntries.filter(([, s]) => !s.heartbeatOnly).map(([n]) => n);
const heartbeatFieldNames = [
  ...commonFieldNames,
  ...identityFieldNames,
  ...fieldEntries.filter(([, s]) => s.heartbeatOnly).map(([n]) => n),
];

/**
 * JSON Schema (draft 2020-12) of a v1 record. Lifecycle and heartbeat records are two branches
 * of a `oneOf`, each closed (`additionalProperties: false`) so a stray field fails validation.
 */
export const recordJsonSchema = {
  $schema: 'https://json-schema.org/draft/2020-12/schema',
  $id: 'https://github.com/scheduled-events-shipper/schema/record.v1.schema.json',
  title: 'scheduled-events-shipper record, schema version 1',
  $defs: {
    lifecycle: {
      type: 'object',
      additionalProperties: false,
      required: lifecycleFieldNames,
      properties: {
        ...Object.fromEntries(lifecycleFieldNames.map((n) => [n, jsonSchemaOf(recordFields[n])])),
        schemaVersion: { const: SCHEMA_VERSION },
        recordType: { const: 'lifecycle' },
        phase: { enum: [...LIFECYCLE_PHASES] },
        recordId: { type: 'string', minLength: 1 },
        observedAt: { type: 'string', format: 'date-time' },
      },
    },
    heartbeat: {
      type: 'object',
      additionalProperties: false,
      required: heartbeatFieldNames,
      properties: {
        ...Object.fromEntries(
          heartbeatFieldNames.map((n) => [n, jsonSchemaOf(recordFields[n as RecordFieldName])]),
        ),
        schemaVersion: { const: SCHEMA_VERSION },
        recordType: { const: 'heartbeat' },
        phase: { const: '' },
        recordId: { type: 'string', minLength: 1 },
        observedAt: { type: 'string', format: 'date-time' },
      },
    },
  },
  oneOf: [{ $ref: '#/$defs/lifecycle' }, { $ref: '#/$defs/heartbeat' }],
} as const;
