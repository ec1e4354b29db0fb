/**
 * Every KQL text of the sink side parses and binds without errors, with the real Kusto language
 * service, against table schemas generated from the record contract: the ADX database script
 * (tables, mapping, function, update policy, materialized view), the ADX and Log Analytics query
 * files, the Data Collection Rule transformation and the alert queries embedded in Bicep. JSON
 * inside the mapping and policy literals is parsed and its column/table names checked. Renaming a
 * record field therefore fails here wherever a query still uses the old name.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import type { Node } from 'web-tree-sitter';
import { declarations, literal, parseBicep, prop, stringValue } from './bicep.js';
import {
  analyzeQuery,
  analyzeScript,
  describe as describeDiagnostics,
  errorsOf,
  globalsFor,
} from './kusto.js';
import {
  adxRawColumns,
  adxTypedColumns,
  type Column,
  dcrStreamColumns,
  laColumns,
  names,
  recordColumns,
  schemaString,
} from './schema.js';

const repo = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const read = (p: string) => readFileSync(join(repo, p), 'utf8');
const kqlFiles = (dir: string) =>
  readdirSync(join(repo, dir))
    .filter((f) => f.endsWith('.kql'))
    .sort()
    .map((f) => `${dir}/${f}`);

const setupText = read('infra/kql/adx/setup.kql');
const setupCommands = setupText.split(/\n\s*\n/).filter((c) => c.trim() !== '');

function expandBody(): string {
  const cmd = setupCommands.find((c) => c.startsWith('.create-or-alter function'));
  if (!cmd) throw new Error('no .create-or-alter function in setup.kql');
  const start = cmd.indexOf('{');
  return cmd.slice(start, cmd.lastIndexOf('}') + 1);
}

function adxGlobals(typed: readonly Column[] = adxTypedColumns) {
  return globalsFor(
    'scheduledevents',
    [
      { name: names.adxRawTable, columns: adxRawColumns },
      { name: names.adxTable, columns: typed },
      { name: names.adxLatestView, columns: typed },
    ],
    [{ name: names.adxExpandFunction, body: expandBody() }],
  );
}

function laGlobals(cols: readonly Column[] = laColumns) {
  return globalsFor('workspace', [{ name: names.laTable, columns: cols }]);
}

function expectClean(text: string, diagnostics: Parameters<typeof errorsOf>[0], label: string): void {
  const errors = errorsOf(diagnostics);
  expect(errors, `${label}:\n${describeDiagnostics(text, errors)}`).toEqual([]);
}

/** The single-quoted literal after `@` in a command (Kusto verbatim string: '' escapes '). */
function verbatimLiteral(command: string): string {
  const m = /@'((?:[^']|'')*)'/.exec(command);
  if (!m?.[1]) throw new Error(`no @'...' literal in: ${command.slice(0, 80)}`);
  return m[1].replace(/''/g, "'");
}

function plainLiteral(command: string): string {
  const m = /\n\s*'((?:[^'\\]|\\.)*)'\s*$/.exec(command);
  if (!m?.[1]) throw new Error(`no '...' literal at the end of: ${command.slice(0, 80)}`);
  return m[1];
}

const typedSignature = (cols: readonly Column[]) => cols.map((c) => `${c.name}:${c.type}`);

describe('ADX database script (infra/kql/adx/setup.kql)', () => {
  it('has only database-level commands allowed in a database script, separated by blank lines', () => {
    expect(setupCommands.length).toBeGreaterThanOrEqual(7);
    for (const c of setupCommands) {
      expect(c, c.slice(0, 60)).toMatch(
        /^\.(create-merge|create-or-alter|alter-merge|alter|create ifnotexists|add) /,
      );
    }
    expect(setupText).not.toMatch(/^\s*\/\//m);
  });

  it('every command parses and binds (embedded function and view queries included)', () => {
    const blocks = analyzeScript(setupText, adxGlobals());
    expect(blocks.filter((b) => b.text.trim() !== '').length).toBe(setupCommands.length);
    for (const b of blocks) {
      expect(b.kind === 'Command' || b.text.trim() === '', b.text.slice(0, 60)).toBe(true);
      expectClean(b.text, b.diagnostics, b.text.slice(0, 60));
    }
  });

  it('the expansion function yields exactly the typed table columns, in order', () => {
    const body = expandBody();
    const r = analyzeQuery(body.slice(1, -1), adxGlobals());
    expectClean(body, r.diagnostics, 'function body');
    expect(r.resultColumns).toEqual(typedSignature(adxTypedColumns));
  });

  it('the tables are created with the generated schemas', () => {
    const create = (t: string) => setupCommands.find((c) => c.startsWith(`.create-merge table ${t} (`)) ?? '';
    const colsOf = (cmd: string) =>
      cmd
        .slice(cmd.indexOf('(') + 1, cmd.indexOf(')'))
        .split(',')
        .map((s) => s.trim().replace(/\s+/g, ''));
    expect(colsOf(create(names.adxRawTable))).toEqual(typedSignature(adxRawColumns));
    expect(colsOf(create(names.adxTable))).toEqual(typedSignature(adxTypedColumns));
    expect(schemaString(recordColumns)).toContain('recordId:string');
  });

  it('the JSON ingestion mapping parses and maps only real raw-table columns', () => {
    const cmd = setupCommands.find((c) => c.includes('ingestion json mapping')) ?? '';
    expect(cmd).toContain(
      `.create-or-alter table ${names.adxRawTable} ingestion json mapping "${names.adxMapping}"`,
    );
    const mapping = JSON.parse(plainLiteral(cmd)) as { column: string; Properties: { Path: string } }[];
    const raw = adxRawColumns.map((c) => c.name);
    expect(mapping.map((m) => m.column).sort()).toEqual([...raw].sort());
    for (const m of mapping) expect(m.Properties.Path).toMatch(/^\$/);
    expect(mapping.find((m) => m.column === 'Record')?.Properties.Path).toBe('$');
  });

  it('the update policy JSON parses, reads the raw table and its query yields the typed table', () => {
    const cmd = setupCommands.find((c) => c.includes('policy update')) ?? '';
    expect(cmd).toMatch(new RegExp(`^\\.alter table ${names.adxTable} policy update`));
    const policy = JSON.parse(verbatimLiteral(cmd)) as {
      IsEnabled: boolean;
      Source: string;
      Query: string;
      IsTransactional: boolean;
    }[];
    expect(policy).toHaveLength(1);
    const [p] = policy;
    expect(p?.Source).toBe(names.adxRawTable);
    expect(p?.IsEnabled).toBe(true);
    expect(p?.IsTransactional).toBe(true);
    const r = analyzeQuery(p?.Query ?? '', adxGlobals());
    expectClean(p?.Query ?? '', r.diagnostics, 'update policy query');
    expect(r.resultColumns).toEqual(typedSignature(adxTypedColumns));
  });

  it('the materialized view deduplicates by recordId keeping the latest observation', () => {
    const cmd = setupCommands.find((c) => c.includes('materialized-view')) ?? '';
    expect(cmd).toContain(`${names.adxLatestView} on table ${names.adxTable}`);
    const query = cmd.slice(cmd.indexOf('{') + 1, cmd.lastIndexOf('}'));
    expect(query.replace(/\s+/g, ' ')).toContain('summarize arg_max(observedAt, *) by recordId');
    const r = analyzeQuery(query, adxGlobals());
    expectClean(query, r.diagnostics, 'materialized view query');
    expect([...r.resultColumns].sort()).toEqual(typedSignature(adxTypedColumns).sort());
  });
});

describe('ADX query files', () => {
  const files = kqlFiles('infra/kql/adx/queries');
  it('covers the documented queries', () => {
    expect(files.map((f) => f.split('/').pop())).toEqual(
      expect.arrayContaining([
        'latest-state-per-event.kql',
        'events-over-time.kql',
        'events-per-vm.kql',
        'open-maintenance.kql',
        'terminate-preempt-last-hour.kql',
        'notice-given.kql',
        'silent-shippers.kql',
        'unannounced-starts.kql',
      ]),
    );
  });
  for (const f of files) {
    it(`${f} parses and binds`, () => {
      const text = read(f);
      expectClean(text, analyzeQuery(text, adxGlobals()).diagnostics, f);
    });
  }
});

describe('Log Analytics', () => {
  const files = kqlFiles('infra/kql/loganalytics/queries');
  it('has the same query set as ADX', () => {
    expect(files.map((f) => f.split('/').pop())).toEqual(
      kqlFiles('infra/kql/adx/queries').map((f) => f.split('/').pop()),
    );
  });
  for (const f of files) {
    it(`${f} parses and binds against SeShipper_CL`, () => {
      const text = read(f);
      expectClean(text, analyzeQuery(text, laGlobals()).diagnostics, f);
    });
  }

  it('the DCR transformation binds against the Event Hubs stream and yields exactly the table columns', () => {
    const text = read('infra/kql/loganalytics/dcr-transform.kql');
    const r = analyzeQuery(text, globalsFor('dcr', [{ name: 'source', columns: dcrStreamColumns }]));
    expectClean(text, r.diagnostics, 'dcr-transform.kql');
    expect(r.resultColumns).toEqual(typedSignature(laColumns));
    expect(text).not.toMatch(/\/\//); // DCR transformations do not accept comments
  });

  it('every workbook query parses and binds, and every query file has a panel', () => {
    const wb = JSON.parse(read('infra/workbook/se-shipper.workbook.json')) as {
      items: { type: number; content: { query?: string } }[];
    };
    const queries = wb.items.filter((i) => i.type === 3).map((i) => i.content.query ?? '');
    expect(queries).toHaveLength(files.length);
    for (const q of queries) expectClean(q, analyzeQuery(q, laGlobals()).diagnostics, q.split('\n')[0] ?? '');
  });

  it('the generated Log Analytics columns JSON matches the table schema', () => {
    const json = JSON.parse(read('infra/bicep/generated/loganalytics-columns.json')) as { name: string }[];
    expect(json.map((c) => c.name)).toEqual(laColumns.map((c) => c.name));
  });
});

// ---- alert queries embedded in Bicep ----

interface EmbeddedQuery {
  readonly name: string;
  readonly text: string;
}

/** `var xQuery = '''...'''` or `format('''...''', args)`; `{n}` placeholders get sample values. */
function queryText(node: Node | undefined, samples: readonly string[]): string | undefined {
  if (!node) return undefined;
  if (node.type === 'string') return stringValue(node);
  if (node.type === 'call_expression' && node.childForFieldName('function')?.text === 'format') {
    const args = node.namedChildren.find((c) => c?.type === 'arguments');
    const first = args?.namedChildren[0];
    const tmpl = first ? stringValue(first) : undefined;
    return tmpl?.replace(/\{(\d+)\}/g, (_m, i: string) => samples[Number(i)] ?? '1');
  }
  return undefined;
}

async function alertQueries(): Promise<{ queries: EmbeddedQuery[]; rules: Record<string, unknown>[] }> {
  const b = await parseBicep(join(repo, 'infra', 'bicep', 'modules', 'alerts.bicep'));
  const vars = declarations(b, 'variable_declaration');
  const queries: EmbeddedQuery[] = [];
  for (const [name, node] of vars) {
    if (!name.endsWith('Query')) continue;
    const text = queryText(node, ['15']);
    if (text === undefined) throw new Error(`alerts.bicep var ${name} is not a literal query`);
    queries.push({ name, text });
  }
  const rulesNode = vars.get('rules');
  const rules: Record<string, unknown>[] = [];
  for (const o of rulesNode?.namedChildren ?? []) {
    if (o?.type !== 'object') continue;
    const value = literal(o) as Record<string, unknown>;
    value.query = prop(o, 'query')?.text; // an identifier naming one of the *Query variables
    rules.push(value);
  }
  return { queries, rules };
}

describe('alert queries embedded in infra/bicep/modules/alerts.bicep', () => {
  it('every query parses and binds against SeShipper_CL and returns its alert dimensions', async () => {
    const { queries, rules } = await alertQueries();
    expect(queries.map((q) => q.name).sort()).toEqual([
      'evictionQuery',
      'silentShipperQuery',
      'unannouncedQuery',
    ]);
    expect(rules).toHaveLength(3);
    for (const rule of rules) {
      const q = queries.find((x) => x.name === rule.query);
      expect(q, `rule ${String(rule.name)} uses ${String(rule.query)}`).toBeDefined();
      const r = analyzeQuery(q?.text ?? '', laGlobals());
      expectClean(q?.text ?? '', r.diagnostics, `${String(rule.name)} (${q?.name})`);
      const resultNames = r.resultColumns.map((c) => c.split(':')[0]);
      for (const d of rule.dimensions as string[])
        expect(resultNames, `${String(rule.name)} dimension ${d}`).toContain(d);
    }
  });

  it('the silent-shipper window spans several heartbeat intervals', async () => {
    const b = await parseBicep(join(repo, 'infra', 'bicep', 'modules', 'alerts.bicep'));
    const params = declarations(b, 'parameter_declaration');
    const vars = declarations(b, 'variable_declaration');
    expect(params.get('heartbeatIntervalSeconds')?.text).toBe('300');
    expect(Number(params.get('silentAfterIntervals')?.text)).toBeGreaterThanOrEqual(3);
    expect(vars.get('silentAfterMinutes')?.text).toContain('heartbeatIntervalSeconds * silentAfterIntervals');
    expect(vars.get('silentShipperQuery')?.text).toContain('ago({0}m)');
  });

  it('is live: renaming a record field makes the alert queries fail to bind', async () => {
    const { queries } = await alertQueries();
    const renamed = laColumns.map((c) => (c.name === 'eventType' ? { ...c, name: 'eventKind' } : c));
    const failing = queries.filter(
      (q) => errorsOf(analyzeQuery(q.text, laGlobals(renamed)).diagnostics).length > 0,
    );
    expect(failing.map((q) => q.name).sort()).toEqual([
      'evictionQuery',
      'silentShipperQuery',
      'unannouncedQuery',
    ]);
    const typedRenamed = adxTypedColumns.map((c) => (c.name === 'observedAt' ? { ...c, name: 'seenAt' } : c));
    const blocks = analyzeScript(setupText, adxGlobals(typedRenamed));
    expect(blocks.some((b) => errorsOf(b.diagnostics).length > 0)).toBe(true);
  });
});
