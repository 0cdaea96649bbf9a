import { mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import type { ResourceLimits } from 'node:worker_threads';
import { StoreError, callerGone, failing } from '../errors.ts';
import type {
  CallOptions,
  Cell,
  ConditionalMutations,
  DataStore,
  FamilySpec,
  ModifyRule,
  Mutation,
  ReadSelection,
  Row,
  RowMutations,
  ScanRequest,
  TableRef,
  TableSchema,
  ChangeEvent,
  ChangeStart,
  FeedOptions,
} from '../store.ts';
import { FEED_PROGRESS_MS } from '../store.ts';
import { decodeChangeMutations, formatPosition, invalidPosition, parsePosition } from './changes.ts';
import { COPY_PIECE_BYTES, type Decoder, type Encoder } from './codec.ts';
import { EMBEDDED_CAPABILITIES, EMBEDDED_LIMITS } from './limits.ts';
import { ProcessLock } from './process-lock.ts';
import { CANCEL_SLOTS, ConditionType, Kind, MutationType, RuleType, ScanFlag, StartType, decodeError, decodePolicyBound, encodePolicyBound } from './protocol.ts';
import { migrate } from './schema.ts';
import { encodeSelection } from './selection.ts';
import { SQLITE_BUSY, SQLITE_LOCKED, sqliteCode } from './sqlite-errors.ts';
import { type AnswerReader, ThreadClient } from './thread-client.ts';

export interface EmbeddedStoreOptions {
  /** Directory holding the database; created if missing. */
  readonly dataDir: string;
  /** Read-only connections, each on its own thread (default 2): a long read on one leaves the other free. */
  readonly readers?: number;
  /**
   * Bounds on each SQLite thread's heap (default THREAD_RESOURCE_LIMITS); a thread that passes them
   * ends, and its calls fail with UNAVAILABLE.
   */
  readonly threadResourceLimits?: ResourceLimits;
}

/** The database file inside the data directory. */
export const DATABASE_FILE = 'kvcrud.sqlite';

const DEFAULT_READERS = 2;
/**
 * Each SQLite thread's heap: a 12 MiB young generation (4 MiB semi-spaces) and at most 128 MiB of
 * old space, whatever sizes the main thread's (heap-size.ts). A thread keeps no data between calls,
 * only the garbage of the call it runs, so a small young generation is collected often and cheaply;
 * with the main thread's larger semi-spaces the threads' heaps, and the process's RSS, kept growing
 * under a soak. The old space is not sized down with the process's memory budget: the writer
 * thread's heap needs far more than a reader's to apply the largest write (100,000 cells), and a
 * thread past its limit ends, failing its calls. The figures: docs/performance.md.
 */
export const THREAD_RESOURCE_LIMITS: ResourceLimits = Object.freeze({ maxOldGenerationSizeMb: 128, maxYoungGenerationSizeMb: 12 });
/** Rows a scan asks its thread for at once: small enough that the first rows come quickly. */
const SCAN_CHUNK_ROWS = 256;
/** Mutations encoded in one slice; a request with more is encoded over several, yielding between them. */
const MUTATIONS_PER_PIECE = 2048;
/** How long open() waits for the threads to open their connections. */
const OPEN_TIMEOUT_MS = 60_000;
/** How long close() waits for the threads to finish what they were given. */
const CLOSE_TIMEOUT_MS = 60_000;
/**
 * An idle feed reads again, and yields progress, this long after its last event: early enough
 * that the read before it fits within FEED_PROGRESS_MS.
 */
const PROGRESS_DUE_MS = FEED_PROGRESS_MS - 200;
/** How long one read of a feed (its start, or the changes after a position) may take. */
const FEED_READ_TIMEOUT_MS = 30_000;

/**
 * EmbeddedStore is the DataStore in a SQLite database (node:sqlite) in one local directory: no
 * cloud, no emulator, one process. See docs/stores/embedded.md.
 *
 * SQLite runs on threads of its own, never on the main thread: one writer thread holds the only
 * writing connection and commits the writes that reach it together in one transaction (group
 * commit), durable (WAL, synchronous=FULL) before any of them is acknowledged; reader threads
 * hold read-only connections, so reads never queue behind a write (WAL gives each read a snapshot
 * of the last commit). The process holds a lock on the data directory (ProcessLock) for the
 * store's lifetime, so a second kvcrud on the same directory refuses to start.
 */
export class EmbeddedStore implements DataStore {
  readonly type = 'embedded';
  readonly capabilities = EMBEDDED_CAPABILITIES;
  readonly limits = EMBEDDED_LIMITS;
  readonly dataDir: string;
  readonly #lock: ProcessLock;
  readonly #writer: ThreadClient;
  readonly #readers: readonly ThreadClient[];
  #closed: Promise<void> | undefined;
  /** The tables followed by a feed, by `instance/table`: what wakes their feeds. */
  readonly #followed = new Map<string, FollowedTable>();

  /**
   * open opens (creating or migrating if needed) the store in `dataDir` and resolves once its
   * threads are ready, or rejects with a StoreError: UNAVAILABLE naming the directory when another
   * process has it open, INTERNAL when the database cannot be used (a newer schema version, a file
   * that is not a database) or the threads cannot start.
   */
  static async open(options: EmbeddedStoreOptions): Promise<EmbeddedStore> {
    const dataDir = resolve(options.dataDir);
    try {
      mkdirSync(dataDir, { recursive: true });
    } catch (error) {
      const { code, message } = error as NodeJS.ErrnoException;
      throw new StoreError('INTERNAL', `cannot create data directory ${dataDir}: ${code ?? message}`, { cause: error });
    }
    const lock = ProcessLock.acquire(dataDir);
    try {
      prepareDatabase(dataDir);
    } catch (error) {
      lock.release();
      throw error;
    }
    const store = new EmbeddedStore(dataDir, lock, options);
    try {
      await store.checkHealth({ deadline: Date.now() + OPEN_TIMEOUT_MS });
    } catch (error) {
      await store.close();
      throw new StoreError('INTERNAL', `cannot start the embedded store in ${dataDir}: ${(error as Error).message}`, { cause: error });
    }
    return store;
  }

  private constructor(dataDir: string, lock: ProcessLock, options: EmbeddedStoreOptions) {
    this.dataDir = dataDir;
    this.#lock = lock;
    const file = join(dataDir, DATABASE_FILE);
    const cancelled = new SharedArrayBuffer(CANCEL_SLOTS * Int32Array.BYTES_PER_ELEMENT);
    const limits = options.threadResourceLimits ?? THREAD_RESOURCE_LIMITS;
    this.#writer = new ThreadClient('writer', file, cancelled, limits);
    this.#readers = Array.from({ length: Math.max(1, options.readers ?? DEFAULT_READERS) }, () => new ThreadClient('reader', file, cancelled, limits));
  }

  createTable(ref: TableRef, families: readonly FamilySpec[], options: CallOptions): Promise<void> {
    return this.#write(ref, Kind.createTable, options, NO_ANSWER, (encoder) => {
      encoder.string(ref.instance);
      encoder.string(ref.table);
      encoder.u32(families.length);
      for (const spec of families) {
        encoder.string(spec.name);
        encodePolicyBound(encoder, spec.maxVersions);
        encodePolicyBound(encoder, spec.maxAgeSeconds);
      }
    });
  }

  describeTable(ref: TableRef, options: CallOptions): Promise<TableSchema> {
    return this.#read(Kind.describeTable, options, {
      done(decoder) {
        const families: FamilySpec[] = [];
        for (let count = decoder.u32(), i = 0; i < count; i++) {
          const name = decoder.string();
          const maxVersions = decodePolicyBound(decoder);
          const maxAgeSeconds = decodePolicyBound(decoder);
          families.push({
            name,
            ...(maxVersions === undefined ? {} : { maxVersions }),
            ...(maxAgeSeconds === undefined ? {} : { maxAgeSeconds }),
          });
        }
        return { name: ref.table, families };
      },
    }, (encoder) => {
      encoder.string(ref.instance);
      encoder.string(ref.table);
    });
  }

  listTables(instance: string, options: CallOptions): Promise<string[]> {
    return this.#read(Kind.listTables, options, {
      done(decoder) {
        const names: string[] = [];
        for (let count = decoder.u32(), i = 0; i < count; i++) names.push(decoder.string());
        return names;
      },
    }, (encoder) => encoder.string(instance));
  }

  deleteTable(ref: TableRef, options: CallOptions): Promise<void> {
    return this.#write(ref, Kind.deleteTable, options, NO_ANSWER, (encoder) => {
      encoder.string(ref.instance);
      encoder.string(ref.table);
    });
  }

  async mutateRow(ref: TableRef, key: Buffer, mutations: readonly Mutation[], options: CallOptions): Promise<void> {
    const [error] = await this.#mutate(ref, [{ key, mutations }], options);
    if (error !== undefined) throw error;
  }

  mutateRows(ref: TableRef, entries: readonly RowMutations[], options: CallOptions): Promise<Array<StoreError | undefined>> {
    return this.#mutate(ref, entries, options);
  }

  readRows(ref: TableRef, keys: readonly Buffer[], selection: ReadSelection, options: CallOptions): Promise<Array<Row | null>> {
    return this.#readRows(ref, keys, selection, options, makeCell);
  }

    async *scanRows(ref: TableRef, scan: ScanRequest, options: CallOptions): AsyncIterable<Row> {
    let remaining = scan.limit;
    let tableId = 0;
    let chunk = this.#scanChunk(ref, scan, tableId, undefined, Math.min(remaining, SCAN_CHUNK_ROWS), options);
    try {
      for (;;) {
        const { rows, next, id } = await chunk.result;
        tableId = id;
        remaining -= rows.length;
        const more = next !== undefined && remaining > 0;
        // The next chunk is read while the caller takes this one.
        if (more) chunk = this.#scanChunk(ref, scan, tableId, next, Math.min(remaining, SCAN_CHUNK_ROWS), options);
        for (const row of rows) yield row;
        if (!more) return;
      }
    } finally {
      // Stopped early: a chunk still being read is not wanted any more.
      chunk.abandon();
    }
  }

  /**
   * The writer thread evaluates the conditions and applies the branch in one SQLite transaction
   * (see Writer), so no other write comes between them.
   */
  checkAndMutateRow(ref: TableRef, key: Buffer, check: ConditionalMutations, options: CallOptions): Promise<boolean> {
    const large =
      check.mutations.length + check.otherwise.length > MUTATIONS_PER_PIECE ||
      check.mutations.some(tallSet) ||
      check.otherwise.some(tallSet) ||
      check.conditions.some((condition) => condition.type === 'columnEquals' && condition.value.byteLength > COPY_PIECE_BYTES);
    return this.#writeEncoded(ref, Kind.checkAndMutate, options, { done: (decoder) => decoder.u8() === 1 }, large, (encoder) => encodeCheck(encoder, ref, key, check));
  }

  /** The writer thread reads, computes and writes the new versions in one SQLite transaction (see Writer). */
  readModifyWriteRow(ref: TableRef, key: Buffer, rules: readonly ModifyRule[], options: CallOptions): Promise<Row> {
    const reader: AnswerReader<Row> = {
      done(decoder) {
        const cells: Cell[] = [];
        for (let count = decoder.u32(), i = 0; i < count; i++) {
          const family = decoder.string();
          const column = decoder.bytes();
          const value = decoder.bytes();
          cells.push({ family, column, value, timestampMicros: decoder.i64() });
        }
        return { key, cells };
      },
    };
    const large = rules.length > MUTATIONS_PER_PIECE || rules.some((rule) => rule.type === 'append' && rule.value.byteLength > COPY_PIECE_BYTES);
    return this.#writeEncoded(ref, Kind.readModifyWrite, options, reader, large, (encoder) => encodeRules(encoder, ref, key, rules));
  }

  /**
   * A feed reads the changes table on a reader thread: first where it starts, then the changes
   * after its position, again whenever a write of this store settles (the data directory is
   * locked to this process, so every write goes through it) and at least every FEED_PROGRESS_MS.
   * Between reads it holds nothing but a timer and a listener.
   */
  readChanges(ref: TableRef, start: ChangeStart, options: FeedOptions): AsyncIterable<ChangeEvent> {
    if (this.#closed !== undefined) return failing(closedError());
    if (start.type === 'after') {
      try {
        parsePosition(start.position);
      } catch {
        return failing(invalidPosition(start.position));
      }
    }
    return this.#follow(ref, start, options.signal);
  }

  async *#follow(ref: TableRef, start: ChangeStart, signal: AbortSignal): AsyncGenerator<ChangeEvent> {
    const call = () => ({ deadline: Date.now() + FEED_READ_TIMEOUT_MS, signal });
    let begun: { tableId: number; seq: bigint };
    try {
      begun = await this.#read(Kind.changeStart, call(), { done: (decoder) => ({ tableId: decoder.u32(), seq: decoder.i64() }) }, (encoder) => {
        encoder.string(ref.instance);
        encoder.string(ref.table);
        encoder.u8(StartType[start.type]);
        encoder.i64(start.type === 'since' ? start.sinceMicros : start.type === 'after' ? parsePosition(start.position) : 0n);
      });
    } catch (error) {
      if (signal.aborted) return;
      throw error;
    }
    const name = `${ref.instance}/${ref.table}`;
    let followed = this.#followed.get(name);
    if (followed === undefined) {
      followed = { feeds: 0, settled: 0, waiters: new Set() };
      this.#followed.set(name, followed);
    }
    followed.feeds++;
    try {
      yield* this.#changesAfter(ref, begun.tableId, begun.seq, followed, signal);
    } finally {
      if (--followed.feeds === 0) this.#followed.delete(name);
    }
  }

  async *#changesAfter(ref: TableRef, tableId: number, from: bigint, followed: FollowedTable, signal: AbortSignal): AsyncGenerator<ChangeEvent> {
    const call = () => ({ deadline: Date.now() + FEED_READ_TIMEOUT_MS, signal });
    let seq = from;
    yield { type: 'progress', position: formatPosition(seq) };
    let lastEvent = Date.now();
    for (;;) {
      const settledBefore = followed.settled;
      let batch: ChangeBatch;
      try {
        batch = await this.#read(Kind.changes, call(), { done: (decoder) => decodeChangeBatch(decoder) }, (encoder) => {
          encoder.string(ref.instance);
          encoder.string(ref.table);
          encoder.u32(tableId);
          encoder.i64(seq);
        });
      } catch (error) {
        if (signal.aborted) return;
        throw error;
      }
      for (const { key, commitMicros, mutations: stored, seq: at } of batch.changes) {
        const mutations: Mutation[] = [];
        try {
          for (const piece of decodeChangeMutations(stored, mutations)) {
            void piece;
            await new Promise((resolve) => setImmediate(resolve));
          }
        } catch (error) {
          throw new StoreError('INTERNAL', `cannot decode change ${at}: ${(error as Error).message}`, { cause: error });
        }
        yield { type: 'change', change: { key, commitMicros, mutations }, position: formatPosition(at) };
        lastEvent = Date.now();
      }
      seq = batch.through;
      if (!batch.complete) continue;
      // Every change committed before the deletion has been yielded.
      if (!batch.present) throw new StoreError('NOT_FOUND', `table ${ref.instance}/${ref.table} was deleted`, { resource: 'table', name: ref.table });
      // Due by the clock, not by a quiet wait: writes that fail wake the feed too, with no change.
      if (Date.now() - lastEvent >= PROGRESS_DUE_MS) {
        yield { type: 'progress', position: formatPosition(seq) };
        lastEvent = Date.now();
      }
      if (batch.changes.length > 0 || settledBefore !== followed.settled) continue;
      await waitForWrite(followed, lastEvent + PROGRESS_DUE_MS - Date.now(), signal);
      if (signal.aborted) return;
    }
  }

  /**
   * Wakes the feeds of the table when `written` settles (committed, failed, or given up on: one
   * read too many is cheap, a missed wake-up would cost a feed FEED_PROGRESS_MS); returns it.
   */
  #noticed<T>(ref: TableRef, written: Promise<T>): Promise<T> {
    const settled = () => {
      const followed = this.#followed.get(`${ref.instance}/${ref.table}`);
      if (followed === undefined) return;
      followed.settled++;
      wake(followed);
    };
    written.then(settled, settled);
    return written;
  }

  async checkHealth(options: CallOptions): Promise<void> {
    const ping = (thread: ThreadClient) => thread.request(Kind.ping, options.deadline, undefined, NO_ANSWER, options.signal);
    if (this.#closed !== undefined) throw closedError();
    await Promise.all([ping(this.#writer), ...this.#readers.map(ping)]);
  }

  /** Commits what is queued, lets the threads finish and close their connections, then releases the directory. */
  close(): Promise<void> {
    this.#closed ??= (async () => {
      const deadline = Date.now() + CLOSE_TIMEOUT_MS;
      // Feeds waiting read again, and end: the store is closed.
      for (const followed of this.#followed.values()) wake(followed);
      try {
        await Promise.allSettled([this.#writer, ...this.#readers].map((thread) => thread.close(deadline)));
      } finally {
        this.#lock.release();
      }
    })();
    return this.#closed;
  }

  /** readRows, making each cell with `make` as it is decoded. */
  #readRows<C>(ref: TableRef, keys: readonly Buffer[], selection: ReadSelection, options: CallOptions, make: CellMaker<C>) {
    const rows = new Array<RowOf<C> | null>(keys.length).fill(null);
    const collect = (decoder: Decoder) =>
      decodeSegments(decoder, make, (index, key) => {
        const row = rows[index] ?? { key: keys[index] ?? key, cells: [] };
        rows[index] = row;
        return row.cells;
      });
    return this.#read(
      Kind.readRows,
      options,
      {
        part: collect,
        done(decoder) {
          collect(decoder);
          return rows;
        },
      },
      (encoder) => {
        encoder.string(ref.instance);
        encoder.string(ref.table);
        encodeSelection(encoder, selection);
        encoder.u32(keys.length);
        for (const key of keys) encoder.bytes(key);
      },
    );
  }

  #mutate(ref: TableRef, entries: readonly EncodableEntry[], options: CallOptions): Promise<Array<StoreError | undefined>> {
    if (this.#closed !== undefined) return Promise.reject(closedError());
    const reader: AnswerReader<Array<StoreError | undefined>> = {
      done(decoder) {
        const results: Array<StoreError | undefined> = [];
        for (let count = decoder.u32(), i = 0; i < count; i++) results.push(decoder.u8() === 1 ? undefined : decodeError(decoder));
        return results;
      },
    };
    let mutations = 0;
    for (const entry of entries) mutations += entry.mutations.length;
    const large = mutations > MUTATIONS_PER_PIECE || entries.some((entry) => entry.mutations.some(tallSet));
    return this.#writeEncoded(ref, Kind.mutate, options, reader, large, (encoder) => encodeMutations(encoder, ref, entries));
  }

  /**
   * A write request whose payload `encode` writes: in the shared message, or, when `large` (more
   * than MUTATIONS_PER_PIECE mutations or rules, or a tall value), in a message of its own, a piece
   * per slice (ThreadClient.requestLarge), a tall value being copied into it a piece per slice too.
   */
  #writeEncoded<T>(ref: TableRef, kind: number, options: CallOptions, reader: AnswerReader<T>, large: boolean, encode: (encoder: Encoder) => Generator<void>): Promise<T> {
    if (this.#closed !== undefined) return Promise.reject(closedError());
    if (!large) {
      return this.#noticed(
        ref,
        this.#writer.request(kind, options.deadline, (encoder) => {
          for (const piece of encode(encoder)) void piece;
        }, reader, options.signal),
      );
    }
    return this.#noticed(ref, this.#writer.requestLarge(kind, options.deadline, encode, reader, options.signal));
  }

  #scanChunk(ref: TableRef, scan: ScanRequest, tableId: number, after: Buffer | undefined, limit: number, options: CallOptions) {
    const rows: Array<RowOf<Cell>> = [];
    let continuing = false;
    const collect = (decoder: Decoder) => {
      continuing = decodeSegments(
        decoder,
        makeCell,
        (_, key, continued) => {
          const last = rows.at(-1);
          if (continued && last !== undefined) return last.cells;
          const row: RowOf<Cell> = { key, cells: [] };
          rows.push(row);
          return row.cells;
        },
        continuing,
      );
    };
    const controller = new AbortController();
    const forward = () => controller.abort();
    if (options.signal?.aborted === true) controller.abort();
    options.signal?.addEventListener('abort', forward, { once: true });
    const result = this.#read(
      Kind.scan,
      { deadline: options.deadline, signal: controller.signal },
      {
        part: collect,
        done(decoder) {
          collect(decoder);
          const id = decoder.u32();
          const next = decoder.u8() === 1 ? undefined : decoder.bytes();
          return { rows, next, id };
        },
      },
      (encoder) => {
        encoder.string(ref.instance);
        encoder.string(ref.table);
        encoder.u32(tableId);
        encodeSelection(encoder, scan);
        const flags =
          (scan.range.start === undefined ? 0 : ScanFlag.start) |
          (scan.range.end === undefined ? 0 : ScanFlag.end) |
          (after === undefined ? 0 : ScanFlag.after) |
          (scan.reverse ? ScanFlag.reverse : 0);
        encoder.u8(flags);
        if (scan.range.start !== undefined) encoder.bytes(scan.range.start);
        if (scan.range.end !== undefined) encoder.bytes(scan.range.end);
        if (after !== undefined) encoder.bytes(after);
        encoder.u32(limit);
      },
    );
    const settled = result.catch((error: unknown) => {
      throw options.signal?.aborted === true ? callerGone() : error;
    });
    // A chunk read ahead and then abandoned fails with nobody waiting for it.
    settled
      .catch(() => {})
      .finally(() => options.signal?.removeEventListener('abort', forward));
    return { result: settled, abandon: () => controller.abort() };
  }

  #write<T>(ref: TableRef, kind: number, options: CallOptions, reader: AnswerReader<T>, write: (encoder: Encoder) => void): Promise<T> {
    if (this.#closed !== undefined) return Promise.reject(closedError());
    return this.#noticed(ref, this.#writer.request(kind, options.deadline, write, reader, options.signal));
  }

  #read<T>(kind: number, options: CallOptions, reader: AnswerReader<T>, write: (encoder: Encoder) => void): Promise<T> {
    if (this.#closed !== undefined) return Promise.reject(closedError());
    // An idle reader if there is one, else the one most recently idle: a read queued behind a
    // large one waits for all of it.
    let thread = this.#readers[0] as ThreadClient;
    for (const candidate of this.#readers) if (candidate.busySince > thread.busySince) thread = candidate;
    return thread.request(kind, options.deadline, write, reader, options.signal);
  }

}

/**
 * A table some feed follows: its write calls settled so far (a feed that read before the count
 * moved reads again at once), and the feeds waiting for the next one.
 */
interface FollowedTable {
  feeds: number;
  settled: number;
  readonly waiters: Set<() => void>;
}

function wake(followed: FollowedTable): void {
  for (const waiter of [...followed.waiters]) waiter();
}

/** Resolves true when a write to the table settles, false after `ms` or once `signal` is aborted. */
function waitForWrite(followed: FollowedTable, ms: number, signal: AbortSignal): Promise<boolean> {
  if (ms <= 0) return Promise.resolve(false);
  return new Promise((resolve) => {
    const finish = (woken: boolean) => {
      clearTimeout(timer);
      signal.removeEventListener('abort', onAbort);
      followed.waiters.delete(onWrite);
      resolve(woken);
    };
    const onWrite = () => finish(true);
    const onAbort = () => finish(false);
    const timer = setTimeout(() => finish(false), ms);
    if (signal.aborted) {
      finish(false);
      return;
    }
    signal.addEventListener('abort', onAbort, { once: true });
    followed.waiters.add(onWrite);
  });
}

/** One answer to a feed's read (Reader.changes); each change's mutations still encoded. */
interface ChangeBatch {
  readonly present: boolean;
  readonly complete: boolean;
  readonly through: bigint;
  readonly changes: ReadonlyArray<{ readonly seq: bigint; readonly key: Buffer; readonly commitMicros: bigint; readonly mutations: Buffer }>;
}

function decodeChangeBatch(decoder: Decoder): ChangeBatch {
  const present = decoder.u8() === 1;
  const complete = decoder.u8() === 1;
  const through = decoder.i64();
  const changes: Array<ChangeBatch['changes'][number]> = [];
  for (let count = decoder.u32(), i = 0; i < count; i++) {
    const seq = decoder.i64();
    const commitMicros = decoder.i64();
    // Copied out of the message, so that a change kept by the caller does not hold all of it.
    const key = Buffer.from(decoder.bytes());
    changes.push({ seq, key, commitMicros, mutations: decoder.bytes() });
  }
  return { present, complete, through, changes };
}

function closedError(): StoreError {
  return new StoreError('UNAVAILABLE', 'the embedded store is closed');
}

interface RowOf<C> {
  readonly key: Buffer;
  readonly cells: C[];
}

type CellMaker<C> = (family: string, column: Buffer, value: Buffer, timestampMicros: bigint) => C;
const makeCell: CellMaker<Cell> = (family, column, value, timestampMicros) => ({ family, column, value, timestampMicros });

/** An entry to encode. */
type EncodableEntry = RowMutations;

const NO_ANSWER: AnswerReader<void> = { done: () => undefined };

/** A set whose value is copied into a request a piece per slice (Encoder.bytesInPieces). */
function tallSet(mutation: Mutation): boolean {
  return mutation.type === 'set' && mutation.value.byteLength > COPY_PIECE_BYTES;
}

/**
 * Decodes `u32 segments, segment*` of a read's answer. `rowOf` returns the cell list a segment's
 * cells go to, given its row index, key and whether it continues the previous segment's row
 * (`continuing` for the first: the last segment of the previous part was not complete). Returns
 * whether the last segment's row goes on in the next part.
 */
function decodeSegments<C>(
  decoder: Decoder,
  make: CellMaker<C>,
  rowOf: (index: number, key: Buffer, continued: boolean) => C[],
  continuing = false,
): boolean {
  let continued = continuing;
  for (let segments = decoder.u32(), s = 0; s < segments; s++) {
    const index = decoder.u32();
    const key = decoder.bytes();
    const cells = rowOf(index, key, continued);
    let family = '';
    for (let count = decoder.u32(), c = 0; c < count; c++) {
      if (decoder.u8() === 1) family = decoder.string();
      const column = decoder.bytes();
      const value = decoder.bytes();
      cells.push(make(family, column, value, decoder.i64Repeated()));
    }
    continued = decoder.u8() === 0;
  }
  return continued;
}

/**
 * Encodes `instance, table, u32 families, family*, u32 entries, (key, mutation list)*`,
 * families by index; yields after every MUTATIONS_PER_PIECE mutations, and between the pieces of
 * a tall value (Encoder.bytesInPieces).
 */
function* encodeMutations(encoder: Encoder, ref: TableRef, entries: readonly EncodableEntry[]): Generator<void> {
  encoder.string(ref.instance);
  encoder.string(ref.table);
  const families = encodeFamilies(
    encoder,
    entries.flatMap((entry) => entry.mutations.flatMap((mutation) => (mutation.type === 'deleteRow' ? [] : [mutation.family]))),
  );
  encoder.u32(entries.length);
  const pieces = { count: 0 };
  for (const entry of entries) {
    encoder.bytes(entry.key);
    yield* encodeMutationList(encoder, families, entry.mutations, pieces);
  }
}

/**
 * Encodes `instance, table, key, u32 families, family*, u32 conditions, condition*, mutation list
 * (the mutations), mutation list (otherwise)`, families by index, in the order the conditions and
 * then the two branches name them.
 */
function* encodeCheck(encoder: Encoder, ref: TableRef, key: Buffer, check: ConditionalMutations): Generator<void> {
  encoder.string(ref.instance);
  encoder.string(ref.table);
  encoder.bytes(key);
  const named = check.conditions.flatMap((condition) => (condition.type === 'rowExists' ? [] : [condition.family]));
  for (const mutation of [...check.mutations, ...check.otherwise]) if (mutation.type !== 'deleteRow') named.push(mutation.family);
  const families = encodeFamilies(encoder, named);
  encoder.u32(check.conditions.length);
  for (const condition of check.conditions) {
    switch (condition.type) {
      case 'rowExists':
        encoder.u8(ConditionType.rowExists);
        encoder.u8(condition.exists ? 1 : 0);
        break;
      case 'familyExists':
        encoder.u8(ConditionType.familyExists);
        encoder.u32(families.get(condition.family) as number);
        encoder.u8(condition.exists ? 1 : 0);
        break;
      case 'columnExists':
        encoder.u8(ConditionType.columnExists);
        encoder.u32(families.get(condition.family) as number);
        encoder.bytes(condition.column);
        encoder.u8(condition.exists ? 1 : 0);
        break;
      case 'columnEquals':
        encoder.u8(ConditionType.columnEquals);
        encoder.u32(families.get(condition.family) as number);
        encoder.bytes(condition.column);
        yield* encoder.bytesInPieces(condition.value);
        break;
    }
  }
  const pieces = { count: 0 };
  yield* encodeMutationList(encoder, families, check.mutations, pieces);
  yield* encodeMutationList(encoder, families, check.otherwise, pieces);
}

/** Encodes `instance, table, key, u32 rules, (u8 type, family, column, i64 amount | value)*`. */
function* encodeRules(encoder: Encoder, ref: TableRef, key: Buffer, rules: readonly ModifyRule[]): Generator<void> {
  encoder.string(ref.instance);
  encoder.string(ref.table);
  encoder.bytes(key);
  encoder.u32(rules.length);
  for (const rule of rules) {
    encoder.u8(rule.type === 'increment' ? RuleType.increment : RuleType.append);
    encoder.string(rule.family);
    encoder.bytes(rule.column);
    if (rule.type === 'increment') encoder.i64(rule.amount);
    else yield* encoder.bytesInPieces(rule.value);
  }
}

/** Encodes `u32 families, family*`, each name once in order of first mention; returns each one's index. */
function encodeFamilies(encoder: Encoder, named: readonly string[]): Map<string, number> {
  const families = new Map<string, number>();
  for (const family of named) if (!families.has(family)) families.set(family, families.size);
  encoder.u32(families.size);
  for (const name of families.keys()) encoder.string(name);
  return families;
}

/**
 * Encodes `u32 mutations, mutation*`, families by index; yields after every MUTATIONS_PER_PIECE
 * mutations (counted in `pieces` across lists), and between the pieces of a tall value.
 */
function* encodeMutationList(encoder: Encoder, families: ReadonlyMap<string, number>, mutations: readonly Mutation[], pieces: { count: number }): Generator<void> {
  encoder.u32(mutations.length);
  for (const mutation of mutations) {
    if (++pieces.count === MUTATIONS_PER_PIECE) {
      pieces.count = 0;
      yield;
    }
    switch (mutation.type) {
      case 'set':
        encoder.u8(MutationType.set);
        encoder.u32(families.get(mutation.family) as number);
        encoder.bytes(mutation.column);
        yield* encoder.bytesInPieces(mutation.value);
        encoder.i64(mutation.timestampMicros);
        break;
      case 'deleteColumn':
        encoder.u8(MutationType.deleteColumn);
        encoder.u32(families.get(mutation.family) as number);
        encoder.bytes(mutation.column);
        break;
      case 'deleteFamily':
        encoder.u8(MutationType.deleteFamily);
        encoder.u32(families.get(mutation.family) as number);
        break;
      case 'deleteRow':
        encoder.u8(MutationType.deleteRow);
        break;
    }
  }
}

/** Creates or migrates the database, in WAL mode, before any thread opens it. */
function prepareDatabase(dataDir: string): void {
  let db: DatabaseSync | undefined;
  try {
    db = new DatabaseSync(join(dataDir, DATABASE_FILE), { timeout: 0 });
    db.exec('PRAGMA journal_mode = WAL');
    db.exec('BEGIN IMMEDIATE');
    migrate(db);
    db.exec('COMMIT');
  } catch (error) {
    const code = sqliteCode(error);
    // A kvcrud from before the lock file holds the database itself exclusively.
    if (code === SQLITE_BUSY || code === SQLITE_LOCKED) {
      throw new StoreError('UNAVAILABLE', `data directory ${dataDir} is in use by another process`, { cause: error });
    }
    throw new StoreError('INTERNAL', `cannot open the database in ${dataDir}: ${(error as Error).message}`, { cause: error });
  } finally {
    if (db?.isOpen === true) db.close();
  }
}
