/**
 * The data store contract. Every adapter (Bigtable today; later an embedded store, Spanner and
 * Redis) implements DataStore, and the conformance suite in test/conformance holds each of them
 * to the same behaviour through the HTTP API. Nothing outside src/store/<adapter>/ knows which
 * store is in use.
 *
 * The data model is Bigtable's: an instance holds tables; a table has column families fixed at
 * creation; a row, named by a byte-string key, holds cells addressed by family and qualifier, each
 * cell keeping timestamped versions. Names of instances, tables and families are ASCII (the API
 * validates them); row keys, qualifiers and values are arbitrary bytes.
 *
 * Failures are reported only as StoreError (see errors.ts), never as a backend's own error type.
 */
export interface DataStore {
  /** Short, stable name of the store type ("bigtable"), for logs and metric labels. */
  readonly type: string;

  /**
   * createTable creates `table` in `instance` with the given column families (at least one).
   * It must fail with ALREADY_EXISTS (resource "table") if the table exists, and must not change
   * an existing table in that case.
   */
  createTable(ref: TableRef, families: readonly string[], options: CallOptions): Promise<void>;

  /**
   * deleteTable deletes the table and all its data. It must fail with NOT_FOUND (resource
   * "table") if there is no such table.
   */
  deleteTable(ref: TableRef, options: CallOptions): Promise<void>;

  /** listTables returns the names of all tables in the instance, in any order. */
  listTables(instance: string, options: CallOptions): Promise<string[]>;

  /**
   * writeRow writes all cells to one row atomically: afterwards either every cell is stored or,
   * if the call fails, none is. It must fail with NOT_FOUND (resource "table") for a missing
   * table and NOT_FOUND (resource "columnFamily", name = the family) when any cell names a family
   * the table does not have, and must decide the latter deterministically, before writing.
   * A cell with the same family, qualifier and timestamp as a stored one replaces it; other
   * versions are kept.
   */
  writeRow(ref: TableRef, rowKey: Buffer, cells: readonly CellWrite[], options: CallOptions): Promise<void>;

  /**
   * readRow returns the latest version of every column of the row, ordered by family name, then
   * by qualifier in byte order; or null when the row has no cells. It must fail with NOT_FOUND
   * (resource "table") for a missing table.
   */
  readRow(ref: TableRef, rowKey: Buffer, options: CallOptions): Promise<Cell[] | null>;

  /**
   * checkHealth resolves when every served instance answers within the deadline, and fails with
   * UNAVAILABLE or DEADLINE_EXCEEDED otherwise. It must be cheap: readiness probes call it.
   */
  checkHealth(options: CallOptions): Promise<void>;

  /** close releases connections. The store is not used afterwards. */
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
   * Aborted when the caller has gone (the HTTP client disconnected). An adapter should then stop
   * the call and its retries, and must not start work it has not started yet; it reports
   * callerGone() (errors.ts).
   */
  readonly signal?: AbortSignal;
}

/** One cell to write. Timestamps are chosen by the caller, so a retried write is idempotent. */
export interface CellWrite {
  readonly family: string;
  readonly qualifier: Buffer;
  readonly value: Buffer;
  /** Microseconds since the epoch; a multiple of 1000 (Bigtable's default granularity). */
  readonly timestampMicros: bigint;
}

/** One stored cell version, as read back. */
export interface Cell {
  readonly family: string;
  readonly qualifier: Buffer;
  readonly value: Buffer;
  readonly timestampMicros: bigint;
}
