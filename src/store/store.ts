import type { StoreError } from './errors.ts';

/**
 * The data store contract. Every store driver (bigtable/, embedded/, spanner/, redis/) opens a
 * DataStore, and the driver conformance suite (test/conformance/driver) holds each of them to the
 * same behaviour through this interface. Nothing outside src/store/<driver>/ knows which store is
 * in use; the service layer (src/service) speaks only these terms.
 *
 * The data model is the same everywhere: an instance holds tables; a table has column families,
 * fixed at creation, each with a retention policy; a row, named by a byte-string key, holds cells
 * addressed by family and column (a byte string, Bigtable's "qualifier"), each cell keeping
 * timestamped versions. Names of instances, tables and families are ASCII (the API validates
 * them); row keys, columns and values are arbitrary bytes, compared as unsigned bytes (memcmp).
 *
 * What the service layer guarantees before it calls a store, so that drivers need not check:
 * - every input is within the store's published `limits` and names only ASCII tables/families;
 * - nothing needing a capability the store lacks (see StoreCapabilities) is asked of it;
 * - the deadline has not passed and the caller has not gone when the call starts (checked once,
 *   by the layer that wraps every store, not in each driver);
 * - instances are among the store's configured ones.
 *
 * Failures are reported only as StoreError (errors.ts), never as a backend's own error type.
 */
export interface DataStore {
  /** What this store can do; constant for the store's lifetime. Published by GET /v2/stores. */
  readonly capabilities: StoreCapabilities;
  /** The bounds of one request to this store; constant for its lifetime. Published with it. */
  readonly limits: StoreLimits;

  /**
   * createTable creates `table` in `instance` with the given column families (at least one,
   * distinct names) and their retention policies. It must fail with ALREADY_EXISTS (resource
   * "table") if the table exists, and must not change an existing table in that case.
   */
  createTable(ref: TableRef, families: readonly FamilySpec[], options: CallOptions): Promise<void>;

  /**
   * describeTable returns the table's families and their *effective* retention policies, ordered
   * by family name; or fails with NOT_FOUND (resource "table").
   */
  describeTable(ref: TableRef, options: CallOptions): Promise<TableSchema>;

  /** listTables returns the names of all tables in the instance, in any order. */
  listTables(instance: string, options: CallOptions): Promise<string[]>;

  /**
   * deleteTable deletes the table and all its data. It must fail with NOT_FOUND (resource
   * "table") if there is no such table. A reader must never see part of a deleted table: once
   * this resolves, every later call treats the table as missing.
   */
  deleteTable(ref: TableRef, options: CallOptions): Promise<void>;

  /**
   * mutateRow applies `mutations` (at least one) to one row atomically and in order: afterwards
   * either all took effect or, if the call fails, none did. It must fail with NOT_FOUND (resource
   * "table") for a missing table and NOT_FOUND (resource "columnFamily", name = the first such
   * family in mutation order) when a mutation names a family the table does not have, deciding
   * the latter before anything is written.
   *
   * A `set` with the same family, column and timestamp as a stored version replaces its value;
   * other versions are kept, subject to the family's retention policy, which the store applies
   * on write and on read (see FamilyPolicy). Deleting what does not exist is not an error.
   */
  mutateRow(ref: TableRef, key: Buffer, mutations: readonly Mutation[], options: CallOptions): Promise<void>;

  /**
   * mutateRows applies each entry as mutateRow would, each entry atomic on its own, the batch
   * not. It resolves to one result per entry, in entry order: undefined for an entry applied,
   * or the StoreError that entry failed with (NOT_FOUND columnFamily, or a transient error for
   * that entry alone). It rejects only when the call as a whole fails (NOT_FOUND table, the
   * backend unreachable before anything was applied, deadline): then the caller cannot know
   * which entries were applied, exactly as for a failed mutateRow.
   * Entries may name the same row; they are then applied in entry order.
   */
  mutateRows(ref: TableRef, entries: readonly RowMutations[], options: CallOptions): Promise<Array<StoreError | undefined>>;

  /**
   * readRows returns one element per key, in the order of `keys` (which may repeat a key): the
   * row with the cells `selection` asks for, or null when the row has no such cell (including a
   * row that does not exist). It must fail with NOT_FOUND (resource "table") for a missing table.
   * Never returns a version the family's retention policy has expired, even if the backend has
   * not removed it yet.
   */
  readRows(ref: TableRef, keys: readonly Buffer[], selection: ReadSelection, options: CallOptions): Promise<Array<Row | null>>;

  /**
   * scanRows yields the rows of `scan.range` in key order (descending when `reverse`), at most
   * `scan.limit` of them, each with the cells `selection` asks for; rows with no such cell are
   * skipped, as in readRows. The caller may stop early (break, or iterator.return()): the store
   * must then release what the scan holds (cancel the backend call). NOT_FOUND (resource
   * "table") for a missing table is thrown from the first next().
   *
   * Consistency: each row is read atomically (never half of one mutateRow); the scan as a whole
   * is not a snapshot unless the driver says so in its page under docs/stores/. A row is yielded at most
   * once per call.
   */
  scanRows(ref: TableRef, scan: ScanRequest, options: CallOptions): AsyncIterable<Row>;

  /**
   * checkHealth resolves when every served instance answers within the deadline, and fails with
   * UNAVAILABLE or DEADLINE_EXCEEDED otherwise. It must be cheap: readiness probes call it.
   */
  checkHealth(options: CallOptions): Promise<void>;

  /** close releases connections and files. The store is not used afterwards. */
  close(): Promise<void>;
}

export interface TableRef {
  readonly instance: string;
  readonly table: string;
}

export interface CallOptions {
  /** Absolute deadline (milliseconds since the epoch) after which the call must give up. */
  readonly deadline: number;
  /**
   * Aborted when the caller has gone (the HTTP client disconnected). A driver should then stop
   * the call and its retries, and must not start work it has not started yet; it reports
   * callerGone() (errors.ts).
   */
  readonly signal?: AbortSignal;
}

/**
 * How long a family keeps the versions of each of its columns. A version is expired, and must
 * never be read again, as soon as either bound says so:
 * - `maxVersions`: only the newest N versions of a column (by timestamp) are kept;
 * - `maxAgeSeconds`: a version whose timestamp is more than this many seconds before now is gone.
 * Neither set: every version is kept.
 */
export interface FamilyPolicy {
  readonly maxVersions?: number;
  readonly maxAgeSeconds?: number;
}

export interface FamilySpec extends FamilyPolicy {
  readonly name: string;
}

export interface TableSchema {
  readonly name: string;
  /** Ordered by family name. */
  readonly families: readonly FamilySpec[];
}

/**
 * A timestamp in microseconds since the epoch. Always a multiple of limits.timestampGranularityMicros,
 * from 0 to 2^63 - 1 (Bigtable's int64; reverse timestamps come near the top), so a store keeps
 * it exactly: not as a double, which holds integers only up to 2^53.
 */
export type Micros = bigint;

/**
 * One change to a row. `set` writes one version of a column; the deletes remove every version
 * of a column, of every column of a family, or of the whole row.
 */
export type Mutation =
  | { readonly type: 'set'; readonly family: string; readonly column: Buffer; readonly value: Buffer; readonly timestampMicros: Micros }
  | { readonly type: 'deleteColumn'; readonly family: string; readonly column: Buffer }
  | { readonly type: 'deleteFamily'; readonly family: string }
  | { readonly type: 'deleteRow' };

export interface RowMutations {
  readonly key: Buffer;
  /** At least one. */
  readonly mutations: readonly Mutation[];
}

/** One stored cell version, as read back. */
export interface Cell {
  readonly family: string;
  readonly column: Buffer;
  readonly value: Buffer;
  readonly timestampMicros: Micros;
}

/** A row as read: its cells ordered by family name, then column (bytes), then timestamp, newest first. */
export interface Row {
  readonly key: Buffer;
  /** At least one. */
  readonly cells: readonly Cell[];
}

/** A whole family (no `column`), or one column of it. */
export interface ColumnSelector {
  readonly family: string;
  readonly column?: Buffer;
}

export interface ReadSelection {
  /** Only these columns and families (at least one when present); absent: every column. */
  readonly columns?: readonly ColumnSelector[];
  /** The newest N versions of each selected column; 1 for the latest only. */
  readonly versions: number;
}

/** A key range. Both bounds are byte strings; absent means unbounded on that side. */
export interface KeyRange {
  /** Inclusive. */
  readonly start?: Buffer;
  /** Exclusive. */
  readonly end?: Buffer;
}

export interface ScanRequest extends ReadSelection {
  readonly range: KeyRange;
  /** Descending key order: the scan starts at the largest key below `end`. */
  readonly reverse: boolean;
  /** Most rows to yield (at least 1); the service asks for what it needs, often one more than a page. */
  readonly limit: number;
}

/**
 * What a store can do. A request that needs a capability the store lacks is refused with
 * 501 NOT_SUPPORTED_BY_STORE naming the capability, before the store is called: a store never
 * degrades silently. Published as is under `capabilities` by GET /v2/stores.
 */
export interface StoreCapabilities {
  /**
   * More than the latest version of a column is kept and readable: reads with versions > 1, and
   * families whose policy keeps more than one version (including "keep all"), need it. A store
   * without it keeps the latest version only, and describes every family as maxVersions 1.
   */
  readonly multipleVersions: boolean;
  /** maxAgeSeconds policies are honoured. */
  readonly maxAge: boolean;
  /** scanRows with reverse: true. */
  readonly reverseScan: boolean;
}

/**
 * The bounds of one request to a store, checked by the service before the store is called, and
 * published under `limits` by GET /v2/stores. Each comes from what the backend itself accepts.
 */
export interface StoreLimits {
  /** Longest row key, in bytes. */
  readonly keyBytes: number;
  /** Longest column name (qualifier), in bytes. */
  readonly columnBytes: number;
  /** Largest value of one cell, in bytes. */
  readonly valueBytes: number;
  /** Most mutations in one mutateRow, or in one entry of mutateRows. */
  readonly mutationsPerRow: number;
  /** Most bytes (keys, columns and values) one mutateRow may write. */
  readonly bytesPerRow: number;
  /** Most entries in one mutateRows, and keys in one readRows. */
  readonly entriesPerBatch: number;
  /** Most mutations over all entries of one mutateRows. */
  readonly mutationsPerBatch: number;
  /** Most bytes over all entries of one mutateRows. */
  readonly bytesPerBatch: number;
  /** Most rows in one scan page (ScanRequest.limit is at most this plus one). */
  readonly rowsPerPage: number;
  /** Most families in one table. */
  readonly familiesPerTable: number;
  /** Most versions a read may ask for (ReadSelection.versions). */
  readonly versionsPerRead: number;
  /** Timestamps written must be multiples of this (1000 for stores of millisecond precision). */
  readonly timestampGranularityMicros: number;
}
