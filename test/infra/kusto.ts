/**
 * Offline KQL checking with the real Kusto parser and binder (`@kusto/language-service-next`,
 * pinned in package.json because its generated `$ctorN` names change between releases).
 */
import { createRequire } from 'node:module';
import type { Column } from './schema.js';

const require = createRequire(import.meta.url);

// The Bridge.NET output is untyped JavaScript, hence any.
type Any = any;

let loaded: Any;
function kusto(): Any {
  if (!loaded) {
    require('@kusto/language-service-next/bridge.js');
    require('@kusto/language-service-next/Kusto.Language.Bridge.js');
    loaded = (globalThis as Any).Kusto.Language;
  }
  return loaded;
}

export interface Diagnostic {
  readonly severity: string;
  readonly message: string;
  readonly start: number;
  readonly length: number;
}

export interface TableDef {
  readonly name: string;
  readonly columns: readonly Column[];
}

export interface FunctionDef {
  readonly name: string;
  /** Body including braces, e.g. `{ T | take 1 }`. */
  readonly body: string;
}

/** Global state with one database holding the given tables (and materialized views as tables). */
export function globalsFor(
  database: string,
  tables: readonly TableDef[],
  functions: readonly FunctionDef[] = [],
): Any {
  const L = kusto();
  const symbols: Any[] = tables.map(
    (t) =>
      new L.Symbols.TableSymbol.$ctor7(
        t.name,
        `(${t.columns.map((c) => `['${c.name}']:${c.type}`).join(', ')})`,
        '',
      ),
  );
  for (const f of functions) {
    symbols.push(new L.Symbols.FunctionSymbol.$ctor16(f.name, '()', f.body, ''));
  }
  const db = new L.Symbols.DatabaseSymbol.ctor(database, symbols);
  return L.GlobalState.Default.WithDatabase(db);
}

function diagnosticsOf(list: Any): Diagnostic[] {
  const out: Diagnostic[] = [];
  for (let i = 0; i < list.Count; i++) {
    const d = list.getItem(i);
    out.push({ severity: String(d.Severity), message: String(d.Message), start: d.Start, length: d.Length });
  }
  return out;
}

/** Parse and bind one query; returns diagnostics and the result columns (name:type). */
export function analyzeQuery(
  text: string,
  globals: Any,
): { diagnostics: Diagnostic[]; resultColumns: string[] } {
  const L = kusto();
  const code = L.KustoCode.ParseAndAnalyze(text, globals);
  const resultColumns: string[] = [];
  const rt = code.ResultType;
  if (rt?.Columns) {
    for (let i = 0; i < rt.Columns.Count; i++) {
      const c = rt.Columns.getItem(i);
      resultColumns.push(`${c.Name}:${c.Type.Name}`);
    }
  }
  return { diagnostics: diagnosticsOf(code.GetDiagnostics()), resultColumns };
}

export interface Block {
  readonly text: string;
  readonly kind: string;
  readonly diagnostics: Diagnostic[];
}

/** Split a script into blocks (blank-line separated) and parse+bind each, commands included. */
export function analyzeScript(text: string, globals: Any): Block[] {
  const L = kusto();
  const script = L.Editor.CodeScript.From$1(text, globals);
  const out: Block[] = [];
  for (let i = 0; i < script.Blocks.Count; i++) {
    const b = script.Blocks.getItem(i);
    out.push({
      text: String(b.Text),
      kind: String(b.Service.Kind),
      diagnostics: diagnosticsOf(b.Service.GetDiagnostics()),
    });
  }
  return out;
}

/** Diagnostics worth failing on (errors; warnings are reported by the caller if it wants). */
export const errorsOf = (ds: readonly Diagnostic[]): Diagnostic[] => ds.filter((d) => d.severity === 'Error');

export const describe = (text: string, ds: readonly Diagnostic[]): string =>
  ds
    .map((d) => `${d.severity}: ${d.message} at "${text.slice(d.start, d.start + Math.max(d.length, 20))}"`)
    .join('\n');
