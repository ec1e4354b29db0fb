/**
 * Persists `{ tracker, emittedKeys }` in the state directory, atomically: write a temporary file,
 * fsync it, rename it over `state.json`, fsync the directory. A reader therefore sees either
 * the old or the new state, never a torn one, even across a power cut.
 *
 * `load` never fails the daemon: a missing file is `null` (first start); an unreadable or
 * corrupt one is logged at warn, moved aside as `state.json.corrupt-<timestamp>` for a human
 * to inspect, and also `null`, so the tracker starts afresh (the emitted-key memory is lost
 * with it; a repeated record then carries the same recordId and is deduplicated downstream).
 */
import { mkdir, open, readdir, readFile, rename, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from '../observability/logger.js';
import { type EmittedKeysDump, parseEmittedKeysDump } from './emitted-keys.js';
import type { LifecycleRecord } from './record.js';
import { parseTrackerState, type TrackerState } from './tracker.js';

export const STATE_FILE_VERSION = 1 as const;
export const STATE_FILE_NAME = 'state.json';

export interface PersistedState {
  tracker: TrackerState;
  emittedKeys: EmittedKeysDump;
  /**
   * Records derived from the tracker state in this file but not yet confirmed in the spool: the
   * state is saved before the records are spooled (a write-ahead), and whoever loads the file
   * spools these again (duplicates share their recordId).
   */
  pending?: LifecycleRecord[];
}

interface StateFile extends PersistedState {
  version: typeof STATE_FILE_VERSION;
}

export interface StateStoreOptions {
  logger?: Pick<Logger, 'warn'>;
  fileName?: string;
  /** Epoch-ms clock for the name of a moved-aside corrupt file. */
  now?: () => number;
}

/** Parses the text of a state file; null when it is not a valid version-1 state file. */
export function parseStateFile(text: string): PersistedState | null {
  let x: unknown;
  try {
    x = JSON.parse(text);
  } catch {
    return null;
  }
  if (typeof x !== 'object' || x === null) return null;
  const f = x as Partial<Record<keyof StateFile, unknown>>;
  if (f.version !== STATE_FILE_VERSION) return null;
  const tracker = parseTrackerState(f.tracker);
  const emittedKeys = parseEmittedKeysDump(f.emittedKeys);
  if (tracker === null || emittedKeys === null) return null;
  const pending = parsePending(f.pending);
  if (pending === null) return null;
  return pending.length > 0 ? { tracker, emittedKeys, pending } : { tracker, emittedKeys };
}

/** Absent means none; anything but an array of lifecycle records makes the file corrupt. */
function parsePending(x: unknown): LifecycleRecord[] | null {
  if (x === undefined) return [];
  if (!Array.isArray(x)) return null;
  for (const r of x as unknown[]) {
    const rec = r as Partial<LifecycleRecord> | null;
    if (typeof rec !== 'object' || rec === null || rec.recordType !== 'lifecycle') return null;
    if (typeof rec.recordId !== 'string' || rec.recordId === '') return null;
  }
  return x as LifecycleRecord[];
}

function errorCode(err: unknown): string | undefined {
  return typeof err === 'object' && err !== null && 'code' in err ? String(err.code) : undefined;
}

let tmpCounter = 0;

export class StateStore {
  readonly dir: string;
  readonly path: string;
  readonly #fileName: string;
  readonly #logger: Pick<Logger, 'warn'> | undefined;
  readonly #now: () => number;
  /** Saves run one after another so that the last save called is the one left on disk. */
  #queue: Promise<void> = Promise.resolve();

  constructor(dir: string, options: StateStoreOptions = {}) {
    this.dir = dir;
    this.#fileName = options.fileName ?? STATE_FILE_NAME;
    this.path = join(dir, this.#fileName);
    this.#logger = options.logger;
    this.#now = options.now ?? Date.now;
  }

  /** The persisted state, or null when there is none usable. Never throws. */
  async load(): Promise<PersistedState | null> {
    await this.#queue;
    await this.#removeStaleTemporaries();
    let text: string;
    try {
      text = await readFile(this.path, 'utf8');
    } catch (err) {
      if (errorCode(err) === 'ENOENT') return null;
      this.#logger?.warn(
        { err, path: this.path },
        'state file unreadable; starting with empty lifecycle state',
      );
      await this.#moveAside();
      return null;
    }
    const state = parseStateFile(text);
    if (state === null) {
      this.#logger?.warn({ path: this.path }, 'state file corrupt; starting with empty lifecycle state');
      await this.#moveAside();
    }
    return state;
  }

  /**
   * Writes the state durably. Throws when it could not (disk full, read-only file system): the
   * caller keeps the previous state committed and logs loudly; the old file stays intact.
   */
  save(state: PersistedState): Promise<void> {
    const run = this.#queue.then(() => this.#write(state));
    this.#queue = run.catch(() => {});
    return run;
  }

  async #write(state: PersistedState): Promise<void> {
    const file: StateFile = {
      version: STATE_FILE_VERSION,
      tracker: state.tracker,
      emittedKeys: state.emittedKeys,
      ...(state.pending && state.pending.length > 0 ? { pending: state.pending } : {}),
    };
    const text = `${JSON.stringify(file)}\n`;
    await mkdir(this.dir, { recursive: true });
    tmpCounter = (tmpCounter + 1) % 1_000_000;
    const tmp = `${this.path}.tmp-${process.pid}-${tmpCounter}`;
    try {
      const handle = await open(tmp, 'w', 0o600);
      try {
        await handle.writeFile(text, 'utf8');
        await handle.sync();
      } finally {
        await handle.close();
      }
      await rename(tmp, this.path);
    } catch (err) {
      await unlink(tmp).catch(() => {});
      throw err;
    }
    await this.#syncDir();
  }

  /** fsync of the directory makes the rename durable. Not possible on Windows; skipped there. */
  async #syncDir(): Promise<void> {
    if (process.platform === 'win32') return;
    const handle = await open(this.dir, 'r');
    try {
      await handle.sync();
    } catch (err) {
      // Some file systems refuse fsync on a directory; the rename is still atomic there.
      const code = errorCode(err);
      if (code !== 'EINVAL' && code !== 'ENOTSUP' && code !== 'EISDIR') throw err;
    } finally {
      await handle.close();
    }
  }

  async #moveAside(): Promise<void> {
    const stamp = new Date(this.#now()).toISOString().replace(/[:.]/g, '-');
    const aside = `${this.path}.corrupt-${stamp}`;
    try {
      await rename(this.path, aside);
      this.#logger?.warn({ path: aside }, 'moved the unusable state file aside');
    } catch (err) {
      this.#logger?.warn({ err, path: this.path }, 'could not move the unusable state file aside');
    }
  }

  /** Temporary files left by a crash between write and rename are garbage. */
  async #removeStaleTemporaries(): Promise<void> {
    let names: string[];
    try {
      names = await readdir(this.dir);
    } catch {
      return;
    }
    const prefix = `${this.#fileName}.tmp-`;
    for (const name of names) {
      if (name.startsWith(prefix)) await unlink(join(this.dir, name)).catch(() => {});
    }
  }
}
