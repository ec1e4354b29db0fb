import { type FileHandle, open } from 'node:fs/promises';
import type { Writable } from 'node:stream';
import type { ShipperRecord } from '../lifecycle/record.js';
import { type Sink, SinkError } from './sink.js';

function toNdjson(batch: readonly ShipperRecord[]): string {
  let out = '';
  for (const record of batch) out += `${JSON.stringify(record)}\n`;
  return out;
}

/** NDJSON on a stream (stdout): one record per line, the batch confirmed once the stream took it. */
export class StreamNdjsonSink implements Sink {
  readonly name: string;
  constructor(
    private readonly stream: Writable,
    name = 'stdout',
  ) {
    this.name = name;
  }

  send(batch: readonly ShipperRecord[]): Promise<void> {
    if (batch.length === 0) return Promise.resolve();
    return new Promise((resolve, reject) => {
      this.stream.write(toNdjson(batch), (err) => {
        if (err)
          reject(new SinkError(`${this.name} write failed: ${err.message}`, { retryable: true, cause: err }));
        else resolve();
      });
    });
  }

  async close(): Promise<void> {}
}

/**
 * NDJSON appended to a file. Each batch is one write followed by fdatasync, so a confirmed batch
 * survives a crash of the VM, not just of the process.
 */
export class FileNdjsonSink implements Sink {
  readonly name = 'file';
  private handle: FileHandle | undefined;

  constructor(readonly path: string) {}

  private async fileHandle(): Promise<FileHandle> {
    this.handle ??= await open(this.path, 'a');
    return this.handle;
  }

  async send(batch: readonly ShipperRecord[]): Promise<void> {
    if (batch.length === 0) return;
    try {
      const handle = await this.fileHandle();
      await handle.appendFile(toNdjson(batch));
      await handle.datasync();
    } catch (err) {
      const e = err as NodeJS.ErrnoException;
      // Drop the handle: after ENOSPC/EIO a fresh open on the next try is the safest state.
      await this.handle?.close().catch(() => {});
      this.handle = undefined;
      throw new SinkError(`cannot append to ${this.path}: ${e.code ?? e.message}`, {
        retryable: true,
        cause: err,
      });
    }
  }

  async close(): Promise<void> {
    await this.handle?.close();
    this.handle = undefined;
  }
}
