import { StoreError, tableNotFound } from '../errors.ts';
import type { ChangeEvent, ChangeStart, FeedOptions, TableRef } from '../store.ts';
import { FEED_PROGRESS_MS } from '../store.ts';
import type { DedicatedConnection, RedisConnection } from './connection.ts';
import { type TableKeys, tableKeys } from './keys.ts';
import { REDIS_LIMITS } from './limits.ts';
import { toStoreError } from './redis-errors.ts';
import { unpackMutations } from './row-codec.ts';
import { FEED_START, READ_CHANGES } from './scripts.ts';

/**
 * Entries one read takes at most. A change can carry a whole row's bytes (bytesPerRow), and Redis
 * bounds a read by entries only: few entries keep a reply of large rows bounded, and many small
 * ones still come in few round trips.
 */
const ENTRIES_PER_READ = 32;
/** How long a blocking read waits for a change, so that an idle feed reports progress well within FEED_PROGRESS_MS. */
const BLOCK_MS = FEED_PROGRESS_MS / 2;
/** How often a feed without a connection of its own looks for changes. */
const POLL_MS = 200;
/** Feeds of one store that block on a connection of their own; the others poll the shared one. */
export const FEED_CONNECTIONS = 100;

const RETENTION_MS = BigInt(REDIS_LIMITS.changeRetentionSeconds * 1000);
/**
 * An idle feed's position moves up to Redis's clock less this, so that it stays within the
 * retention: Redis gives a new entry an ID of its clock, and a clock stepped back by up to this
 * much still gives IDs past the position.
 */
const CLOCK_STEP_MS = 5000n;
const SEQ_MAX = 2n ** 64n - 1n;

/** A stream entry ID: Redis's clock in milliseconds when it was added, then a sequence within that millisecond. */
interface StreamId {
  readonly ms: bigint;
  readonly seq: bigint;
}

const ZERO_ID: StreamId = { ms: 0n, seq: 0n };

/**
 * A position is "r1.<generation>.<stream ID>": the generation names the table's stream (a table
 * created anew under the same name has another), the ID is the last entry the feed has passed.
 */
const POSITION = /^r1\.([0-9a-f]{12})\.([0-9]{1,20})-([0-9]{1,20})$/;

function position(generation: string, id: StreamId): string {
  return `r1.${generation}.${formatId(id)}`;
}

function parsePosition(text: string): { generation: string; id: StreamId } | undefined {
  const match = POSITION.exec(text);
  if (match === null) return undefined;
  const id = { ms: BigInt(match[2] as string), seq: BigInt(match[3] as string) };
  return id.ms <= SEQ_MAX && id.seq <= SEQ_MAX ? { generation: match[1] as string, id } : undefined;
}

function formatId(id: StreamId): string {
  return `${id.ms}-${id.seq}`;
}

function parseId(raw: Buffer | string): StreamId {
  const [ms, seq] = raw.toString().split('-');
  return { ms: BigInt(ms ?? '0'), seq: BigInt(seq ?? '0') };
}

function compareIds(a: StreamId, b: StreamId): number {
  if (a.ms !== b.ms) return a.ms < b.ms ? -1 : 1;
  return a.seq === b.seq ? 0 : a.seq < b.seq ? -1 : 1;
}

/**
 * FeedConnections bounds the connections a store's feeds block on: each open feed holds one, up
 * to FEED_CONNECTIONS; a feed beyond that polls the shared connection instead.
 */
export class FeedConnections {
  readonly #connection: RedisConnection;
  readonly #max: number;
  readonly #open = new Set<DedicatedConnection>();
  #reserved = 0;

  constructor(connection: RedisConnection, max = FEED_CONNECTIONS) {
    this.#connection = connection;
    this.#max = max;
  }

  /** A connection of the feed's own, near `key`; undefined when the cap is reached (or none can be opened now). */
  async acquire(key: string): Promise<DedicatedConnection | undefined> {
    if (this.#open.size + this.#reserved >= this.#max) return undefined;
    this.#reserved += 1;
    try {
      const dedicated = await this.#connection.openDedicated(key);
      this.#open.add(dedicated);
      return dedicated;
    } catch {
      // The shared connection may do: the feed polls it, and fails there if Redis is down.
      return undefined;
    } finally {
      this.#reserved -= 1;
    }
  }

  release(dedicated: DedicatedConnection): void {
    dedicated.close();
    this.#open.delete(dedicated);
  }

  /** How many feeds block on a connection of their own now. */
  get open(): number {
    return this.#open.size;
  }

  closeAll(): void {
    for (const dedicated of this.#open) dedicated.close();
    this.#open.clear();
  }
}

export interface FeedContext {
  readonly connection: RedisConnection;
  readonly feeds: FeedConnections;
  /** The table's live generation (fresh: read from its record, not the cache); NOT_FOUND when there is none. */
  readonly generation: (ref: TableRef, fresh: boolean) => Promise<string>;
}

interface ChangeEntry {
  readonly id: StreamId;
  readonly key: Buffer;
  readonly mutations: ReturnType<typeof unpackMutations>;
}

/**
 * followChanges reads a table's change stream (see scripts.ts, recordChange): from where `start`
 * says, blocking on a connection of its own (XREAD BLOCK) or, beyond FEED_CONNECTIONS, polling
 * the shared one. Whenever a read finds nothing, one script reads the stream and the table's
 * record together: once the record no longer names the stream's generation, no change can come
 * after what that read returned, and the feed ends with NOT_FOUND.
 */
export async function* followChanges(ref: TableRef, start: ChangeStart, options: FeedOptions, context: FeedContext): AsyncGenerator<ChangeEvent> {
  try {
    yield* follow(ref, start, options, context);
  } catch (error) {
    // Stopped by its signal while a call was under way: the feed ends as asked, without an error.
    if (!options.signal.aborted) throw error;
  }
}

async function* follow(ref: TableRef, start: ChangeStart, options: FeedOptions, context: FeedContext): AsyncGenerator<ChangeEvent> {
  const { signal } = options;
  const { connection } = context;
  await connection.firstAttempt;
  const run = async (script: typeof FEED_START, keys: TableKeys, args: readonly string[]): Promise<unknown> => {
    try {
      return await abortable(connection.run(script, [keys.record, keys.changes], args), signal);
    } catch (error) {
      throw toStoreError(error, 'readChanges');
    }
  };
  const begin = async (generation: string) => {
    const keys = tableKeys(ref.instance, ref.table, generation);
    const [current, nowMs, last, trimmed] = (await run(FEED_START, keys, [generation])) as [number, number, Buffer, number];
    return { keys, current: current === 1, nowMs: BigInt(nowMs), last: parseId(last), trimmed: trimmed === 1 };
  };

  let generation: string;
  let after: StreamId;
  let keys: TableKeys;
  if (start.type === 'after') {
    const parsed = parsePosition(start.position);
    if (parsed === undefined) throw new StoreError('INVALID_ARGUMENT', 'readChanges: not a position of this store');
    generation = parsed.generation;
    after = parsed.id;
    const state = await begin(generation);
    keys = state.keys;
    // No stream and not the table's: a table deleted (and its stream reclaimed), or never this table's.
    if (!state.current && compareIds(state.last, ZERO_ID) === 0) throw tableNotFound(ref);
    // Past the last change, a position is an idle feed's, never later than Redis's clock.
    if (compareIds(after, state.last) > 0 && after.ms > state.nowMs) throw new StoreError('INVALID_ARGUMENT', 'readChanges: a position past the end of the table\'s changes');
    // Trimming removes what is older than the retention at the time of a write: after the last
    // one, nothing from retention before it on was removed.
    if (state.trimmed && after.ms < state.last.ms - RETENTION_MS) throw outOfRange();
    const [, , next] = (await run(READ_CHANGES, keys, [generation, formatId(after), '1'])) as [number, number, Array<[Buffer, Buffer[]]>];
    const first = next[0];
    if (first !== undefined && parseId(first[0]).ms < state.nowMs - RETENTION_MS) throw outOfRange();
  } else {
    const generationOf = async (fresh: boolean) => {
      try {
        return await abortable(context.generation(ref, fresh), signal);
      } catch (error) {
        throw toStoreError(error, 'readChanges');
      }
    };
    generation = await generationOf(false);
    let state = await begin(generation);
    if (!state.current) {
      // A cached generation since deleted: the record says which is live, if any.
      const fresh = await generationOf(true);
      if (fresh === generation) throw tableNotFound(ref);
      generation = fresh;
      state = await begin(generation);
      if (!state.current) throw tableNotFound(ref);
    }
    keys = state.keys;
    after = state.last;
    if (start.type === 'since') {
      if (start.sinceMicros < state.nowMs * 1000n - RETENTION_MS * 1000n) throw outOfRange();
      // Every entry of a millisecond at or after sinceMicros comes after this ID.
      const fromMs = (start.sinceMicros + 999n) / 1000n;
      const before = fromMs === 0n ? ZERO_ID : { ms: fromMs - 1n, seq: SEQ_MAX };
      // Nothing is after the last ID yet, and whatever comes later is: start at the earlier of
      // the two. A start within the retention is after everything trimmed.
      if (compareIds(before, after) < 0) after = before;
    }
  }

  yield { type: 'progress', position: position(generation, after) };
  let lastEvent = Date.now();
  const dedicated = await context.feeds.acquire(keys.changes);
  const onAbort = () => dedicated?.close();
  signal.addEventListener('abort', onAbort, { once: true });
  try {
    yield* readOn();
  } finally {
    signal.removeEventListener('abort', onAbort);
    if (dedicated !== undefined) context.feeds.release(dedicated);
  }

  async function* readOn(): AsyncGenerator<ChangeEvent> {
    while (!signal.aborted) {
      let entries: ChangeEntry[] = [];
      if (dedicated !== undefined) {
        let reply: unknown;
        try {
          reply = await dedicated.send(['XREAD', 'COUNT', String(ENTRIES_PER_READ), 'BLOCK', String(BLOCK_MS), 'STREAMS', keys.changes, formatId(after)]);
        } catch (error) {
          throw toStoreError(error, 'readChanges');
        }
        if (reply !== null) entries = ((reply as Array<[Buffer, Array<[Buffer, Buffer[]]>]>)[0]?.[1] ?? []).map(toEntry);
      }
      if (entries.length === 0) {
        const [current, nowMs, found] = (await run(READ_CHANGES, keys, [generation, formatId(after), String(ENTRIES_PER_READ)])) as [number, number, Array<[Buffer, Buffer[]]>];
        entries = found.map(toEntry);
        if (entries.length === 0) {
          if (current !== 1) throw tableNotFound(ref);
          const idle = { ms: BigInt(nowMs) - CLOCK_STEP_MS - 1n, seq: SEQ_MAX };
          if (compareIds(idle, after) > 0) after = idle;
          if (dedicated === undefined && !(await pause(POLL_MS, signal))) return;
          if (Date.now() - lastEvent >= BLOCK_MS / 2) {
            yield { type: 'progress', position: position(generation, after) };
            lastEvent = Date.now();
          }
          continue;
        }
      }
      for (const entry of entries) {
        after = entry.id;
        if (entry.mutations === undefined) throw new StoreError('INTERNAL', `redis readChanges: entry ${formatId(entry.id)} is not a change of this store`);
        yield { type: 'change', change: { key: entry.key, commitMicros: entry.id.ms * 1000n, mutations: entry.mutations }, position: position(generation, after) };
      }
      lastEvent = Date.now();
    }
  }
}

function toEntry([id, fields]: [Buffer, Buffer[]]): ChangeEntry {
  let key: Buffer | undefined;
  let mutations: ChangeEntry['mutations'];
  for (let i = 0; i + 1 < fields.length; i += 2) {
    const name = (fields[i] as Buffer).toString('latin1');
    if (name === 'key') key = fields[i + 1];
    else if (name === 'mutations') mutations = unpackMutations(fields[i + 1] as Buffer);
  }
  return { id: parseId(id), key: key ?? Buffer.alloc(0), mutations: key === undefined ? undefined : mutations };
}

/** Waits `ms`; false when the signal was aborted first. */
function pause(ms: number, signal: AbortSignal): Promise<boolean> {
  if (signal.aborted) return Promise.resolve(false);
  return new Promise((resolve) => {
    const onAbort = () => {
      clearTimeout(timer);
      resolve(false);
    };
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve(true);
    }, ms);
    signal.addEventListener('abort', onAbort, { once: true });
  });
}

/** `work`, unless the signal is aborted first: then a rejection (the feed is ending; nobody reads it). */
function abortable<T>(work: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(new StoreError('DEADLINE_EXCEEDED', 'readChanges: the feed was stopped'));
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(new StoreError('DEADLINE_EXCEEDED', 'readChanges: the feed was stopped'));
    signal.addEventListener('abort', onAbort, { once: true });
    work.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(error instanceof Error ? error : new Error(String(error)));
      },
    );
  });
}

function outOfRange(): StoreError {
  return new StoreError('OUT_OF_RANGE', `readChanges: the start is older than the ${REDIS_LIMITS.changeRetentionSeconds} s the store keeps changes`);
}
