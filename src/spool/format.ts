/**
 * On-disk format of one spooled record (see docs/spool.md).
 *
 * File name: `<seq, 16 decimal digits>-<l|h>.rec`, so that the lexicographic order of the
 * directory is the delivery order and the record type is known without reading the file.
 * Content: a one-line header, then the record as one line of JSON:
 *
 *   SESPOOL1 <l|h> <crc32 of the payload, 8 hex digits> <payload length in bytes>\n
 *   <payload: JSON.stringify(record)>\n
 *
 * The length and CRC catch truncated or damaged files; such files are quarantined, never
 * delivered half-parsed.
 */
import { crc32 } from 'node:zlib';
import type { RecordType, ShipperRecord } from '../lifecycle/record.js';

export const MAGIC = 'SESPOOL1';
export const RECORD_SUFFIX = '.rec';
export const TEMP_SUFFIX = '.tmp';
const SEQ_DIGITS = 16;
const NAME_RE = /^(\d{16})-([lh])\.rec$/;
const HEADER_RE = /^SESPOOL1 ([lh]) ([0-9a-f]{8}) (\d{1,9})$/;

export type TypeCode = 'l' | 'h';

export function typeCode(recordType: RecordType): TypeCode {
  return recordType === 'lifecycle' ? 'l' : 'h';
}

export function recordTypeOf(code: TypeCode): RecordType {
  return code === 'l' ? 'lifecycle' : 'heartbeat';
}

export function fileName(seq: number, recordType: RecordType): string {
  return `${String(seq).padStart(SEQ_DIGITS, '0')}-${typeCode(recordType)}${RECORD_SUFFIX}`;
}

/** Parses a spool file name; `null` when the name is not one of ours. */
export function parseFileName(name: string): { seq: number; recordType: RecordType } | null {
  const m = NAME_RE.exec(name);
  if (!m) return null;
  const seq = Number(m[1]);
  if (!Number.isSafeInteger(seq)) return null;
  return { seq, recordType: recordTypeOf(m[2] as TypeCode) };
}

/** Encodes a record as the bytes of its spool file. */
export function encodeRecord(record: ShipperRecord): Buffer {
  const payload = Buffer.from(JSON.stringify(record), 'utf8');
  const header = `${MAGIC} ${typeCode(record.recordType)} ${crc32(payload).toString(16).padStart(8, '0')} ${payload.length}\n`;
  return Buffer.concat([Buffer.from(header, 'latin1'), payload, Buffer.from('\n', 'latin1')]);
}

export class CorruptRecordError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'CorruptRecordError';
  }
}

/**
 * Decodes and verifies a spool file. Throws CorruptRecordError when the header, length, CRC,
 * JSON or the record's type/id do not check out, or when the type disagrees with `expected`.
 */
export function decodeRecord(data: Buffer, expected: RecordType): ShipperRecord {
  const nl = data.indexOf(0x0a);
  if (nl < 0 || nl > 64) throw new CorruptRecordError('missing or oversized header line');
  const m = HEADER_RE.exec(data.toString('latin1', 0, nl));
  if (!m) throw new CorruptRecordError('bad header');
  const [, code, crcHex, lenText] = m as unknown as [string, TypeCode, string, string];
  const length = Number(lenText);
  const start = nl + 1;
  if (data.length !== start + length + 1 || data[start + length] !== 0x0a) {
    throw new CorruptRecordError(
      `length mismatch: header says ${length}, file has ${data.length - start - 1}`,
    );
  }
  const payload = data.subarray(start, start + length);
  if (crc32(payload) !== Number.parseInt(crcHex, 16)) throw new CorruptRecordError('CRC mismatch');
  let parsed: unknown;
  try {
    parsed = JSON.parse(payload.toString('utf8'));
  } catch (err) {
    throw new CorruptRecordError(`payload is not JSON: ${(err as Error).message}`);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw new CorruptRecordError('payload is not an object');
  }
  const rec = parsed as { recordType?: unknown; recordId?: unknown };
  if (rec.recordType !== recordTypeOf(code) || rec.recordType !== expected) {
    throw new CorruptRecordError(`record type mismatch (${String(rec.recordType)})`);
  }
  if (typeof rec.recordId !== 'string' || rec.recordId.length === 0) {
    throw new CorruptRecordError('missing recordId');
  }
  return parsed as ShipperRecord;
}
