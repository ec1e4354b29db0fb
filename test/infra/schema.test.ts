/**
 * The committed sink-side table definitions are exactly what test/infra/schema.ts generates from
 * the record contract. Rename or retype a field in src/lifecycle/record.ts and this fails until the
 * generated files are refreshed (UPDATE_INFRA_GENERATED=1 npx vitest run test/infra/schema.test.ts;
 * this also regenerates the workbook from the Log Analytics query files),
 * and then the KQL tests fail wherever a query still uses the old name.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { recordFields, recordJsonSchema } from '../../src/lifecycle/record.js';
import {
  adxMappingJson,
  adxRawColumns,
  adxTypedColumns,
  adxUpdatePolicyJson,
  generatedFiles,
  kqlTypeOfKind,
  laColumns,
  names,
} from './schema.js';
import { workbookJson } from './workbook.js';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const update = process.env.UPDATE_INFRA_GENERATED === '1';

describe('generated sink-side schema files', () => {
  const files = { ...generatedFiles(), 'infra/workbook/se-shipper.workbook.json': workbookJson(root) };
  for (const [path, content] of Object.entries(files)) {
    it(`${path} is up to date with recordFields`, () => {
      const abs = join(root, path);
      if (update) {
        mkdirSync(dirname(abs), { recursive: true });
        writeFileSync(abs, content);
      }
      expect(existsSync(abs), `${path} missing; run with UPDATE_INFRA_GENERATED=1`).toBe(true);
      expect(readFileSync(abs, 'utf8'), `${path} drifted; run with UPDATE_INFRA_GENERATED=1`).toBe(content);
    });
  }
});

describe('column generation follows the record JSON Schema', () => {
  const schemaProps = {
    ...recordJsonSchema.$defs.lifecycle.properties,
    ...recordJsonSchema.$defs.heartbeat.properties,
  } as Record<string, unknown>;

  it('every JSON Schema property is a typed ADX column and a Log Analytics column, and vice versa', () => {
    const typed = adxTypedColumns.map((c) => c.name);
    const la = laColumns.map((c) => c.name);
    for (const name of Object.keys(schemaProps)) {
      expect(typed).toContain(name);
      expect(la).toContain(name);
    }
    const sinkOnly = new Set(['enqueuedTime', 'TimeGenerated']);
    for (const name of [...typed, ...la].filter((n) => !sinkOnly.has(n))) {
      expect(Object.keys(schemaProps)).toContain(name);
    }
  });

  it('types follow the JSON Schema (integer→int/long, boolean→bool, date-time→datetime, array→dynamic)', () => {
    const { lifecycle, heartbeat } = recordJsonSchema.$defs;
    const raw = { ...lifecycle.properties, ...heartbeat.properties } as Record<
      string,
      Record<string, unknown>
    >;
    for (const c of adxTypedColumns) {
      if (c.name === 'enqueuedTime') continue;
      const field = recordFields[c.name as keyof typeof recordFields];
      expect(c.type).toBe(kqlTypeOfKind[field.kind]);
      // Use the generic per-kind schema (the const/enum overrides carry no type).
      const js = raw[c.name];
      const jsType = js && 'type' in js ? ([] as unknown[]).concat(js.type).filter((t) => t !== 'null') : [];
      if (jsType.length === 0) continue;
      const expected: Record<string, string[]> = {
        integer: ['int', 'long'],
        string: js?.format === 'date-time' ? ['datetime'] : ['string'],
        boolean: ['bool'],
        array: ['dynamic'],
      };
      expect(expected[String(jsType[0])], `${c.name}`).toContain(c.type);
    }
  });

  it('Log Analytics table has TimeGenerated as a datetime column', () => {
    expect(laColumns[0]).toMatchObject({ name: 'TimeGenerated', type: 'datetime' });
  });

  it('the ADX mapping and update policy JSON name real columns and tables', () => {
    const raw = adxRawColumns.map((c) => c.name);
    for (const m of adxMappingJson) expect(raw).toContain(m.column);
    expect(adxUpdatePolicyJson[0]?.Source).toBe(names.adxRawTable);
  });
});
