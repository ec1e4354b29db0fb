/**
 * Offline Bicep inspection with the tree-sitter-bicep grammar (WASM, via web-tree-sitter): syntax
 * errors, every `type@apiVersion`, resource bodies as plain values, and string literals.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join, relative } from 'node:path';
import { Language, type Node, Parser } from 'web-tree-sitter';

const require = createRequire(import.meta.url);
let parserPromise: Promise<Parser> | undefined;

export function bicepParser(): Promise<Parser> {
  parserPromise ??= (async () => {
    await Parser.init();
    const lang = await Language.load(require.resolve('tree-sitter-bicep/tree-sitter-bicep.wasm'));
    const p = new Parser();
    p.setLanguage(lang);
    return p;
  })();
  return parserPromise;
}

export interface ParsedBicep {
  readonly file: string;
  readonly text: string;
  readonly root: Node;
}

export async function parseBicep(file: string): Promise<ParsedBicep> {
  const text = readFileSync(file, 'utf8');
  const tree = (await bicepParser()).parse(text);
  if (!tree) throw new Error(`tree-sitter returned no tree for ${file}`);
  return { file, text, root: tree.rootNode };
}

export function listBicepFiles(dir: string): string[] {
  const out: string[] = [];
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) out.push(...listBicepFiles(p));
    else if (e.name.endsWith('.bicep')) out.push(p);
  }
  return out.sort();
}

/** ERROR and MISSING nodes, as "line:col text". */
export function syntaxProblems(b: ParsedBicep): string[] {
  const out: string[] = [];
  const walk = (n: Node): void => {
    if (n.isError || n.isMissing) {
      out.push(
        `${relative(process.cwd(), b.file)}:${n.startPosition.row + 1}:${n.startPosition.column + 1} ${n.type} ${JSON.stringify(n.text.slice(0, 60))}`,
      );
    }
    for (const c of n.children) if (c) walk(c);
  };
  walk(b.root);
  return out;
}

/** Value of a string node without quotes; undefined when it contains interpolation. */
export function stringValue(n: Node): string | undefined {
  if (n.type !== 'string') return undefined;
  if (n.namedChildren.some((c) => c?.type === 'interpolation')) return undefined;
  const t = n.text;
  if (t.startsWith("'''")) return t.slice(3, -3).replace(/^\r?\n/, '');
  return t.slice(1, -1).replace(/\\(['\\nrt$])/g, (_m, c: string) => ({ n: '\n', r: '\r', t: '\t' })[c] ?? c);
}

export interface ResourceDecl {
  readonly symbol: string;
  readonly type: string;
  readonly apiVersion: string;
  readonly existing: boolean;
  /** The body object node (inside `if` / `for` when present). */
  readonly body: Node | undefined;
  readonly line: number;
}

function bodyObject(n: Node): Node | undefined {
  if (n.type === 'object') return n;
  for (const c of n.namedChildren) {
    if (!c) continue;
    if (c.type === 'object') return c;
    if (c.type === 'if_statement' || c.type === 'for_statement') return bodyObject(c);
  }
  return undefined;
}

export function resources(b: ParsedBicep): ResourceDecl[] {
  const out: ResourceDecl[] = [];
  for (const n of b.root.namedChildren) {
    if (n?.type !== 'resource_declaration') continue;
    const [id, typeNode] = n.namedChildren;
    const ref = typeNode ? stringValue(typeNode) : undefined;
    if (!id || !ref)
      throw new Error(`unreadable resource declaration at ${b.file}:${n.startPosition.row + 1}`);
    const [type = '', apiVersion = ''] = ref.split('@');
    const existing = n.children.some((c) => c?.type === 'existing' || c?.text === 'existing');
    out.push({
      symbol: id.text,
      type,
      apiVersion,
      existing,
      body: bodyObject(n),
      line: n.startPosition.row + 1,
    });
  }
  return out;
}

/** Property value node of an object node, by dotted path (`properties.minimumTlsVersion`). */
export function prop(obj: Node | undefined, path: string): Node | undefined {
  let cur: Node | undefined = obj;
  for (const key of path.split('.')) {
    if (cur?.type !== 'object') return undefined;
    let next: Node | undefined;
    for (const p of cur.namedChildren) {
      if (p?.type !== 'object_property') continue;
      const k = p.namedChildren[0];
      const keyText = k ? (k.type === 'string' ? stringValue(k) : k.text) : undefined;
      if (keyText === key) next = p.namedChildren[p.namedChildren.length - 1] ?? undefined;
    }
    cur = next;
  }
  return cur;
}

/** Top-level declarations (param/var/output) by name → their value node (default / value). */
export function declarations(
  b: ParsedBicep,
  kind: 'parameter_declaration' | 'variable_declaration' | 'output_declaration',
): Map<string, Node | undefined> {
  const out = new Map<string, Node | undefined>();
  for (const n of b.root.namedChildren) {
    if (!n || n.type !== kind) continue;
    const id = n.namedChildren[0];
    const last = n.namedChildren[n.namedChildren.length - 1];
    if (id) out.set(id.text, last && last !== id && last.type !== 'type' ? last : undefined);
  }
  return out;
}

/** Every string literal node in the file (including multi-line '''...''' strings). */
export function allStrings(b: ParsedBicep): Node[] {
  const out: Node[] = [];
  const walk = (n: Node): void => {
    if (n.type === 'string') out.push(n);
    for (const c of n.namedChildren) if (c) walk(c);
  };
  walk(b.root);
  return out;
}

/** Plain JS value of a literal Bicep node (object/array/string/number/bool); undefined otherwise. */
export function literal(n: Node | undefined): unknown {
  if (!n) return undefined;
  switch (n.type) {
    case 'string':
      return stringValue(n);
    case 'number':
      return Number(n.text);
    case 'boolean':
      return n.text === 'true';
    case 'array':
      return n.namedChildren.filter((c): c is Node => !!c && c.type !== 'comment').map((c) => literal(c));
    case 'object': {
      const o: Record<string, unknown> = {};
      for (const p of n.namedChildren) {
        if (p?.type !== 'object_property') continue;
        const k = p.namedChildren[0];
        const v = p.namedChildren[p.namedChildren.length - 1];
        if (k) o[k.type === 'string' ? (stringValue(k) ?? k.text) : k.text] = literal(v ?? undefined);
      }
      return o;
    }
    default:
      return undefined;
  }
}
