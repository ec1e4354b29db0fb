/**
 * Partition logs. Always in memory; with a store directory each accepted batch is also appended,
 * before the sender's delivery is accepted, to `<dir>/<hub>/<partition>.ndjson` (one JSON object
 * per event), and those files are read back on start so events survive an emulator restart.
 */
import { closeSync, fstatSync, ftruncateSync, mkdirSync, openSync, readFileSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import rhea from 'rhea';

const rheaMessage = rhea.message;

export interface StoredEvent {
  hub: string;
  partitionId: string;
  sequenceNumber: number;
  /** Byte position of the event in its partition, as a decimal string (Event Hubs offsets are strings). */
  offset: string;
  enqueuedTimeMs: number;
  partitionKey?: string;
  /** The AMQP message exactly as the producer encoded it (sections, no service annotations). */
  raw: Buffer;
}

/** One line of a partition's NDJSON file. `message` (base64 AMQP) is authoritative; `body` is for people. */
interface StoredLine {
  hub: string;
  partition: string;
  sequenceNumber: number;
  offset: string;
  enqueuedTime: string;
  partitionKey?: string;
  body: unknown;
  message: string;
}

export interface DecodedBody {
  /** JSON-parsed body when it is JSON text, else the UTF-8 text, else the bytes. AMQP value bodies as decoded. */
  body: unknown;
  /** The data section bytes (concatenated when several), when the body is binary data. */
  bodyBytes?: Buffer;
  applicationProperties?: Record<string, unknown>;
  properties?: Record<string, unknown>;
}

/** Decodes an encoded AMQP message the way people expect to read it back. */
export function decodeBody(raw: Buffer): DecodedBody {
  const msg = rheaMessage.decode(raw) as unknown as {
    body?: unknown;
    application_properties?: Record<string, unknown>;
    [k: string]: unknown;
  };
  const out: DecodedBody = { body: undefined };
  if (msg.application_properties) out.applicationProperties = msg.application_properties;
  const props: Record<string, unknown> = {};
  for (const k of [
    'message_id',
    'correlation_id',
    'content_type',
    'content_encoding',
    'subject',
    'to',
    'user_id',
  ]) {
    if (msg[k] !== undefined) props[k] = msg[k];
  }
  if (Object.keys(props).length > 0) out.properties = props;
  const body = msg.body as { typecode?: number; content?: unknown; multiple?: boolean } | undefined;
  if (body && typeof body === 'object' && body.typecode === 0x75) {
    const parts = body.multiple ? (body.content as Buffer[]) : [body.content as Buffer];
    const bytes = Buffer.concat(parts.map((p) => Buffer.from(p)));
    out.bodyBytes = bytes;
    const text = bytes.toString('utf8');
    if (Buffer.from(text, 'utf8').equals(bytes)) {
      try {
        out.body = JSON.parse(text);
      } catch {
        out.body = text;
      }
    } else {
      out.body = bytes;
    }
  } else if (body && typeof body === 'object' && body.typecode === 0x76) {
    out.body = body.content;
  } else {
    out.body = body;
  }
  return out;
}

function lineFor(e: StoredEvent): string {
  const decoded = decodeBody(e.raw);
  const body = Buffer.isBuffer(decoded.body) ? { base64: decoded.body.toString('base64') } : decoded.body;
  const line: StoredLine = {
    hub: e.hub,
    partition: e.partitionId,
    sequenceNumber: e.sequenceNumber,
    offset: e.offset,
    enqueuedTime: new Date(e.enqueuedTimeMs).toISOString(),
    ...(e.partitionKey !== undefined ? { partitionKey: e.partitionKey } : {}),
    body: body ?? null,
    message: e.raw.toString('base64'),
  };
  return `${JSON.stringify(line)}\n`;
}

export class PartitionLog {
  readonly events: StoredEvent[] = [];
  private nextOffset = 0;
  private fd: number | undefined;

  constructor(
    readonly hub: string,
    readonly partitionId: string,
    file?: string,
  ) {
    if (file) this.load(file);
  }

  private load(file: string): void {
    let text = '';
    try {
      text = readFileSync(file, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    }
    let goodBytes = 0;
    for (const line of text.split('\n')) {
      if (line.trim() === '') {
        goodBytes += Buffer.byteLength(line) + 1;
        continue;
      }
      let parsed: StoredLine;
      try {
        parsed = JSON.parse(line) as StoredLine;
      } catch {
        break; // a torn last line from a crash mid-write: dropped (it was never acknowledged)
      }
      const raw = Buffer.from(parsed.message, 'base64');
      this.events.push({
        hub: this.hub,
        partitionId: this.partitionId,
        sequenceNumber: this.events.length,
        offset: String(this.nextOffset),
        enqueuedTimeMs: Date.parse(parsed.enqueuedTime),
        ...(parsed.partitionKey !== undefined ? { partitionKey: parsed.partitionKey } : {}),
        raw,
      });
      this.nextOffset += raw.length;
      goodBytes += Buffer.byteLength(line) + 1;
    }
    this.fd = openSync(file, 'a+');
    const size = fstatSync(this.fd).size;
    if (goodBytes < size) ftruncateSync(this.fd, Math.min(goodBytes, size));
  }

  get length(): number {
    return this.events.length;
  }

  /** Appends a batch atomically (one write); returns the stored events. Throws on a disk error. */
  append(items: readonly { raw: Buffer; partitionKey?: string }[], nowMs: number): StoredEvent[] {
    const added: StoredEvent[] = [];
    let offset = this.nextOffset;
    for (const item of items) {
      added.push({
        hub: this.hub,
        partitionId: this.partitionId,
        sequenceNumber: this.events.length + added.length,
        offset: String(offset),
        enqueuedTimeMs: nowMs,
        ...(item.partitionKey !== undefined ? { partitionKey: item.partitionKey } : {}),
        raw: item.raw,
      });
      offset += item.raw.length;
    }
    if (this.fd !== undefined) {
      const buf = Buffer.from(added.map(lineFor).join(''), 'utf8');
      let written = 0;
      while (written < buf.length) written += writeSync(this.fd, buf, written, buf.length - written);
    }
    this.nextOffset = offset;
    for (const e of added) this.events.push(e);
    return added;
  }

  close(): void {
    if (this.fd !== undefined) closeSync(this.fd);
    this.fd = undefined;
  }
}

export function partitionFile(dir: string, hub: string, partitionId: string): string {
  const hubDir = join(dir, hub);
  mkdirSync(hubDir, { recursive: true });
  return join(hubDir, `${partitionId}.ndjson`);
}
