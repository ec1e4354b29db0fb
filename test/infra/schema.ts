/**
 * Generates every sink-side table definition from the record contract (`recordFields`), so the
 * ADX tables, the ADX JSON mapping, the raw→typed expansion, the Log Analytics table columns and
 * the Data Collection Rule transformation cannot drift from the record.
 *
 * The generated files are committed (Bicep loads them with loadTextContent / loadJsonContent);
 * `test/infra/schema.test.ts` fails when a committed file differs from what is generated here.
 * Regenerate with: `UPDATE_INFRA_GENERATED=1 npx vitest run test/infra/schema.test.ts`.
 */
import { type FieldKind, type FieldSpec, recordFields } from '../../src/lifecycle/record.js';

export type KqlType = 'int' | 'long' | 'string' | 'bool' | 'datetime' | 'dynamic' | 'real';

/** The one place record kinds map to KQL scalar types. */
export const kqlTypeOfKind: Readonly<Record<FieldKind, KqlType>> = {
  int: 'int',
  long: 'long',
  string: 'string',
  bool: 'bool',
  datetime: 'datetime',
  'string[]': 'dynamic',
};

/** Log Analytics custom-table column types (the ARM `schema.columns[].type` vocabulary). */
export const laTypeOfKql: Readonly<Record<KqlType, string>> = {
  int: 'int',
  long: 'long',
  string: 'string',
  bool: 'boolean',
  datetime: 'dateTime',
  dynamic: 'dynamic',
  real: 'real',
};

const converterOfKind: Readonly<Record<FieldKind, string>> = {
  int: 'toint',
  long: 'tolong',
  string: 'tostring',
  bool: 'tobool',
  datetime: 'todatetime',
  'string[]': '',
};

export interface Column {
  readonly name: string;
  readonly type: KqlType;
  readonly description: string;
}

export const names = {
  adxRawTable: 'SeShipperRaw',
  adxTable: 'SeShipperRecords',
  adxLatestView: 'SeShipperLatest',
  adxMapping: 'SeShipperRawMapping',
  adxExpandFunction: 'SeShipperExpand',
  laTable: 'SeShipper_CL',
  dcrStream: 'Custom-SeShipperEventHub',
} as const;

export const recordColumns: readonly Column[] = (Object.entries(recordFields) as [string, FieldSpec][]).map(
  ([name, spec]) => ({ name, type: kqlTypeOfKind[spec.kind], description: spec.description }),
);

/** ADX raw landing table: the whole message body, plus the Event Hubs enqueued time. */
export const adxRawColumns: readonly Column[] = [
  { name: 'Record', type: 'dynamic', description: 'The Event Hubs message body (one v1 record).' },
  { name: 'EnqueuedTime', type: 'datetime', description: 'Event Hubs x-opt-enqueued-time.' },
];

/** ADX typed table: every record field in contract order, then the sink-side enqueued time. */
export const adxTypedColumns: readonly Column[] = [
  ...recordColumns,
  { name: 'enqueuedTime', type: 'datetime', description: 'When Event Hubs accepted the message.' },
];

/** Log Analytics custom table: TimeGenerated (= Event Hubs enqueued time) then every record field. */
export const laColumns: readonly Column[] = [
  { name: 'TimeGenerated', type: 'datetime', description: 'When Event Hubs accepted the message.' },
  ...recordColumns,
];

/** The stream the Event Hubs data import of a DCR produces (fixed by Azure Monitor). */
export const dcrStreamColumns: readonly Column[] = [
  { name: 'TimeGenerated', type: 'datetime', description: 'Event Hubs enqueued time.' },
  { name: 'RawData', type: 'string', description: 'Message body.' },
  { name: 'Properties', type: 'dynamic', description: 'Application properties.' },
];

export const schemaString = (cols: readonly Column[]): string =>
  `(${cols.map((c) => `${c.name}:${c.type}`).join(', ')})`;

const kqlString = (s: string): string => `"${s.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`;

/** `name = converter(source.name)` lines projecting the typed columns out of a dynamic bag. */
function projection(bag: string): string[] {
  return (Object.entries(recordFields) as [string, FieldSpec][]).map(([name, spec]) => {
    const conv = converterOfKind[spec.kind];
    return conv ? `${name} = ${conv}(${bag}.${name})` : `${name} = ${bag}.${name}`;
  });
}

function tableCommand(table: string, cols: readonly Column[], folder: string, doc: string): string {
  const body = cols.map((c) => `    ${c.name}: ${c.type}`).join(',\n');
  return `.create-merge table ${table} (\n${body}\n) with (folder = "${folder}", docstring = ${kqlString(doc)})`;
}

export const adxMappingJson: ReadonlyArray<{ column: string; Properties: { Path: string } }> = [
  { column: 'Record', Properties: { Path: '$' } },
  { column: 'EnqueuedTime', Properties: { Path: '$.x-opt-enqueued-time' } },
];

export const adxUpdatePolicyJson = [
  {
    IsEnabled: true,
    Source: names.adxRawTable,
    Query: `${names.adxExpandFunction}()`,
    IsTransactional: true,
    PropagateIngestionProperties: false,
  },
];

/**
 * The ADX database script (run by `Microsoft.Kusto/clusters/databases/scripts`). Only database-level
 * `.create-merge`, `.create-or-alter`, `.alter`, `.alter-merge` and `.create ifnotexists` commands,
 * separated by blank lines, so it can be rerun on every deployment. No comments: the file is sent to
 * the cluster verbatim.
 */
export function adxSetupScript(): string {
  const t = names;
  const expandBody = [
    `    ${t.adxRawTable}`,
    `    | project`,
    ...projection('Record').map((l) => `        ${l},`),
    `        enqueuedTime = EnqueuedTime`,
  ].join('\n');
  const commands = [
    tableCommand(t.adxRawTable, adxRawColumns, 'se-shipper', 'Raw Event Hubs messages from se-shipper.'),
    `.alter-merge table ${t.adxRawTable} policy retention softdelete = 14d recoverability = disabled`,
    `.create-or-alter table ${t.adxRawTable} ingestion json mapping "${t.adxMapping}"\n` +
      `    '${JSON.stringify(adxMappingJson)}'`,
    tableCommand(t.adxTable, adxTypedColumns, 'se-shipper', 'se-shipper records, schema v1, typed.'),
    `.create-or-alter function with (folder = "se-shipper", docstring = "Raw to typed records (update policy)", skipvalidation = "false")\n` +
      `${t.adxExpandFunction}() {\n${expandBody}\n}`,
    `.alter table ${t.adxTable} policy update\n` + `    @'${JSON.stringify(adxUpdatePolicyJson)}'`,
    `.create ifnotexists materialized-view with (folder = "se-shipper", docstring = "Latest copy of each record: dedup of at-least-once delivery by recordId")\n` +
      `${t.adxLatestView} on table ${t.adxTable} {\n` +
      `    ${t.adxTable}\n    | summarize arg_max(observedAt, *) by recordId\n}`,
  ];
  return `${commands.join('\n\n')}\n`;
}

/** The DCR transformation (Event Hubs stream → SeShipper_CL), a single-line-friendly KQL text. */
export function dcrTransform(): string {
  const lines = [
    'source',
    '| extend r = parse_json(RawData)',
    '| project',
    '    TimeGenerated,',
    ...projection('r').map((l, i, a) => `    ${l}${i === a.length - 1 ? '' : ','}`),
  ];
  return `${lines.join('\n')}\n`;
}

export interface LaColumnJson {
  name: string;
  type: string;
  description: string;
}

export const laColumnsJson = (cols: readonly Column[]): LaColumnJson[] =>
  cols.map((c) => ({ name: c.name, type: laTypeOfKql[c.type], description: c.description }));

/** Every generated artifact, by path relative to the repository root. */
export function generatedFiles(): Record<string, string> {
  return {
    'infra/kql/adx/setup.kql': adxSetupScript(),
    'infra/kql/loganalytics/dcr-transform.kql': dcrTransform(),
    'infra/bicep/generated/loganalytics-columns.json': `${JSON.stringify(laColumnsJson(laColumns), null, 2)}\n`,
    'infra/bicep/generated/dcr-stream-columns.json': `${JSON.stringify(
      dcrStreamColumns.map(({ name, type }) => ({ name, type })),
      null,
      2,
    )}\n`,
  };
}
