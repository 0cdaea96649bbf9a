import { isStoreError } from '../store/errors.ts';
import type { Change, ChangeEvent, ChangeStart, ColumnSelector, KeyRange, Micros, Mutation, TableRef } from '../store/store.ts';
import { ApiError, ShedError } from './errors.ts';
import { decodeCursor, encodeCursor, invalidCursor } from './feed-cursors.ts';
import { notSupported } from './limits.ts';
import { apiErrorOf } from './store-errors.ts';
import type { StoreDirectory } from './stores.ts';
import type { TableTarget } from './tables.ts';

/** Where a feed starts and what of the table it follows, as a request asks for it. */
export interface FeedQuery {
  /** A cursor the feed gave, and the request field it came in (for the error naming it). */
  readonly cursor?: { readonly value: string; readonly field: string } | undefined;
  /** Start at this commit time (inclusive) instead; neither: from now. */
  readonly sinceMicros?: Micros | undefined;
  /** Only changes of keys in this range. */
  readonly range: KeyRange;
  /** Only the mutations of these columns or families (a row delete always). */
  readonly columns?: readonly ColumnSelector[] | undefined;
}

/** What a feed gives its reader: a change, or progress (a newer cursor and nothing to deliver). */
export type FeedEvent = { readonly type: 'change'; readonly change: Change; readonly cursor: string } | { readonly type: 'progress'; readonly cursor: string };

/** Why a feed ended other than by its reader leaving. */
export type FeedEnd = 'TABLE_DELETED' | 'SHUTTING_DOWN' | 'CREDENTIAL_EXPIRED' | 'SLOW_READER' | 'BACKEND_UNAVAILABLE';

/** The bounds on open feeds: in all, and per caller. */
export interface FeedLimits {
  readonly total: number;
  readonly perCaller: number;
}

/** What the feeds report, for metrics. */
export interface FeedObserver {
  opened(store: string): void;
  closed(store: string, reason: FeedEnd | 'CLIENT_GONE'): void;
  delivered(store: string, change: Change): void;
}

export interface FeedServiceDeps {
  readonly stores: StoreDirectory;
  readonly limits: FeedLimits;
  readonly observer?: FeedObserver;
  /** Resolves when the process starts shutting down: every open feed then ends, SHUTTING_DOWN. */
  readonly draining?: Promise<void>;
}

/**
 * FeedService opens change feeds: a store's readChanges, its positions wrapped in cursors bound to
 * the table, filtered by key range and columns, within the bounds on open feeds. A feed holds its
 * store iterator and nothing else; where it is, is in the cursor its reader holds.
 */
export class FeedService {
  readonly #stores: StoreDirectory;
  readonly #limits: FeedLimits;
  readonly #observer: FeedObserver | undefined;
  readonly #byCaller = new Map<string, number>();
  /** The feeds open now, to end them all at shutdown; a feed leaves when it closes. */
  readonly #feeds = new Set<OpenFeed>();
  /** Feeds admitted, open or starting, within the bounds. */
  #open = 0;
  #draining = false;

  constructor(deps: FeedServiceDeps) {
    this.#stores = deps.stores;
    this.#limits = deps.limits;
    this.#observer = deps.observer;
    void deps.draining?.then(() => {
      this.#draining = true;
      for (const feed of [...this.#feeds]) feed.close('SHUTTING_DOWN');
    });
  }

  /** Feeds open now, or starting. */
  get openFeeds(): number {
    return this.#open;
  }

  /**
   * Opens a feed and waits for its start, so that a missing table (404), a cursor of another table
   * (400 INVALID_CURSOR) or one older than the store keeps (410 CURSOR_EXPIRED) is answered as
   * such. Beyond the bounds on open feeds, a ShedError: 429 RATE_LIMITED for the caller's
   * (`feeds_per_caller`), 503 OVERLOADED for the service's (`feeds`). The feed must be closed.
   */
  async open(target: TableTarget, query: FeedQuery, callerKey: string, signal: AbortSignal): Promise<OpenFeed> {
    const named = this.#stores.instance(target.store, target.instance);
    if (!named.store.capabilities.changeFeed) throw notSupported(named.name, 'changeFeed');
    const start: ChangeStart =
      query.cursor !== undefined
        ? { type: 'after', position: decodeCursor(target, query.cursor.value, query.cursor.field) }
        : query.sinceMicros !== undefined
          ? { type: 'since', sinceMicros: query.sinceMicros }
          : { type: 'now' };
    if (this.#draining) throw new ApiError('SHUTTING_DOWN', 'The service is shutting down: follow the feed on another replica.');
    this.#admit(callerKey);
    const abort = new AbortController();
    const stop = () => abort.abort();
    signal.addEventListener('abort', stop, { once: true });
    const opened: { feed?: OpenFeed } = {};
    const release = () => {
      signal.removeEventListener('abort', stop);
      abort.abort();
      this.#release(callerKey);
      if (opened.feed !== undefined) this.#feeds.delete(opened.feed);
    };
    const ref: TableRef = { instance: target.instance, table: target.table };
    let iterator: AsyncIterator<ChangeEvent>;
    let first: IteratorResult<ChangeEvent>;
    try {
      iterator = named.store.readChanges(ref, start, { signal: abort.signal })[Symbol.asyncIterator]();
      first = await iterator.next();
    } catch (error) {
      release();
      throw openError(error, query);
    }
    if (first.done === true || first.value.type !== 'progress') {
      release();
      throw new Error('a change feed must start with a progress event');
    }
    this.#observer?.opened(named.name);
    const feed = new OpenFeed(target, named.name, iterator, encodeCursor(target, first.value.position), query, { release, signal, observer: this.#observer });
    opened.feed = feed;
    this.#feeds.add(feed);
    // Shutdown began while the feed was starting.
    if (this.#draining) feed.close('SHUTTING_DOWN');
    return feed;
  }

  #admit(callerKey: string): void {
    if (this.#open >= this.#limits.total) {
      throw new ShedError('feeds', 'OVERLOADED', `The service follows as many feeds as it takes (${this.#limits.total}). Retry later.`);
    }
    const held = this.#byCaller.get(callerKey) ?? 0;
    if (held >= this.#limits.perCaller) {
      throw new ShedError('feeds_per_caller', 'RATE_LIMITED', `This caller follows as many feeds as one caller may (${this.#limits.perCaller}). Close one first.`);
    }
    this.#byCaller.set(callerKey, held + 1);
    this.#open += 1;
  }

  #release(callerKey: string): void {
    const held = this.#byCaller.get(callerKey) ?? 0;
    if (held <= 1) this.#byCaller.delete(callerKey);
    else this.#byCaller.set(callerKey, held - 1);
    this.#open -= 1;
  }
}

/**
 * One open feed. `next` gives the next event, filtered, or undefined once the feed has ended: then
 * `ended` says why (undefined: it was closed by its reader).
 */
export class OpenFeed {
  /** The cursor of where the feed starts. */
  readonly start: string;
  readonly #target: TableTarget;
  readonly #store: string;
  readonly #iterator: AsyncIterator<ChangeEvent>;
  readonly #query: FeedQuery;
  readonly #release: () => void;
  readonly #observer: FeedObserver | undefined;
  #closed = false;
  #ended: FeedEnd | undefined;
  #cursor: string;

  readonly #signal: AbortSignal;

  constructor(
    target: TableTarget,
    store: string,
    iterator: AsyncIterator<ChangeEvent>,
    start: string,
    query: FeedQuery,
    held: { readonly release: () => void; readonly signal: AbortSignal; readonly observer: FeedObserver | undefined },
  ) {
    this.#target = target;
    this.#store = store;
    this.#iterator = iterator;
    this.start = start;
    this.#cursor = start;
    this.#query = query;
    this.#release = held.release;
    this.#signal = held.signal;
    this.#observer = held.observer;
  }

  /** The cursor after the last event given: where a reader resumes. */
  get cursor(): string {
    return this.#cursor;
  }

  get ended(): FeedEnd | undefined {
    return this.#ended;
  }

  async next(): Promise<FeedEvent | undefined> {
    while (!this.#closed) {
      let result: IteratorResult<ChangeEvent>;
      try {
        result = await this.#iterator.next();
      } catch (error) {
        if (this.#signal.aborted) this.close();
        else this.close(isStoreError(error, 'NOT_FOUND') && error.resource === 'table' ? 'TABLE_DELETED' : 'BACKEND_UNAVAILABLE', error);
        return undefined;
      }
      if (this.#closed) return undefined;
      if (result.done === true) {
        // The store ends a feed only when asked to: the reader left, or it failed.
        this.close(this.#signal.aborted ? undefined : 'BACKEND_UNAVAILABLE');
        return undefined;
      }
      const event = result.value;
      this.#cursor = encodeCursor(this.#target, event.position);
      if (event.type === 'progress') return { type: 'progress', cursor: this.#cursor };
      const change = filtered(event.change, this.#query);
      // A change this reader does not follow moves its cursor on all the same.
      if (change === undefined) return { type: 'progress', cursor: this.#cursor };
      this.#observer?.delivered(this.#store, change);
      return { type: 'change', change, cursor: this.#cursor };
    }
    return undefined;
  }

  /** Ends the feed: with a reason when the service ends it, without when its reader left. Idempotent. */
  close(reason?: FeedEnd, cause?: unknown): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#ended = reason;
    this.cause = cause;
    this.#release();
    void this.#iterator.return?.().catch(() => undefined);
    this.#observer?.closed(this.#store, reason ?? 'CLIENT_GONE');
  }

  /** The store's error that ended the feed, for the log. */
  cause: unknown;
}

/**
 * The bytes of a change's key, columns and values: what bounds a long poll's answer
 * (SERVICE_LIMITS.pageBytes) and what it takes from the answer budget, as rowBytes counts a row.
 */
export function changeBytes(change: Change): number {
  let bytes = change.key.length;
  for (const mutation of change.mutations) {
    if (mutation.type === 'set') bytes += mutation.column.length + mutation.value.length;
    else if (mutation.type === 'deleteColumn') bytes += mutation.column.length;
  }
  return bytes;
}

/** The change as the query follows it, or undefined when it has nothing the query follows. */
function filtered(change: Change, query: FeedQuery): Change | undefined {
  const { start, end } = query.range;
  if (start !== undefined && Buffer.compare(change.key, start) < 0) return undefined;
  if (end !== undefined && Buffer.compare(change.key, end) >= 0) return undefined;
  const columns = query.columns;
  if (columns === undefined) return change;
  const mutations = change.mutations.filter((mutation) => follows(columns, mutation));
  return mutations.length === 0 ? undefined : { ...change, mutations };
}

function follows(columns: readonly ColumnSelector[], mutation: Mutation): boolean {
  if (mutation.type === 'deleteRow') return true;
  if (mutation.type === 'deleteFamily') return columns.some((selector) => selector.family === mutation.family);
  return columns.some((selector) => selector.family === mutation.family && (selector.column === undefined || selector.column.equals(mutation.column)));
}

function openError(error: unknown, query: FeedQuery): unknown {
  if (!isStoreError(error)) return error;
  if (error.code === 'INVALID_ARGUMENT') return query.cursor === undefined ? apiErrorOf(error) : invalidCursor(query.cursor.field);
  return apiErrorOf(error);
}
