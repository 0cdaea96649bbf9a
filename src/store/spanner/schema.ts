import type { Database } from '@google-cloud/spanner';
import { StoreError } from '../errors.ts';

/**
 * The fixed schema of a kvcrud database on Spanner. No DDL runs per kvcrud table: schema
 * changes on Spanner are slow, throttled and lock the emulator, so kvcrud tables are rows of a
 * catalog and their cells are rows of one table.
 *
 * - kvcrud_schema: one row, the schema version this layout is at.
 * - kvcrud_tables: the catalog, one row per kvcrud table: its name, a random table_id that its
 *   cells are keyed by (a table recreated under the same name gets a new one, so nothing of the
 *   old table shows through), and its families with their retention policies (JSON).
 * - kvcrud_dropped: table_ids of deleted tables whose cells are still being removed.
 * - kvcrud_cells: one row per cell version, keyed (table_id, row_key, family, col_hash, ts DESC),
 *   so a row's cells are contiguous and each column's versions come newest first. The column is
 *   keyed by its SHA-256 (col_hash) and kept whole in `col`: Spanner keys are at most 8 KiB over
 *   all their parts, and a column may be 16 KiB. So within a row, columns come in hash order;
 *   a read puts them in byte order.
 * - kvcrud_changes (version 2): one row per row key written by a commit, inserted in the write's
 *   own transaction, holding the mutations that commit applied to that row, values included
 *   (changes.ts), in parts of at most 8 MiB (a BYTES value is at most 10 MiB); keyed (table_id,
 *   row_key, committed, part), `committed` its commit timestamp. A delete
 *   of cells cannot say by itself whether it was a column, family or row delete, or retention's
 *   trimming: this row says. Its rows are removed by Spanner's row deletion policy once older than
 *   the feed's retention, off the request path.
 * - kvcrud_feed (version 2): the change stream on kvcrud_changes and on the catalog's key (a
 *   table's deletion), read by readChanges. Not on kvcrud_cells: the emulator takes time
 *   quadratic in the rows a commit writes to a tracked table (figures: docs/performance.md), and
 *   a write of many cells is one kvcrud_changes row.
 */
export const SCHEMA_VERSION = 2;

/** How long the change stream keeps a change, and kvcrud_changes its rows: one day (limits.ts). */
export const FEED_RETENTION = { ddl: '1d', days: 1 } as const;

export const SCHEMA_DDL: readonly string[] = [
  'CREATE TABLE IF NOT EXISTS kvcrud_schema (id INT64 NOT NULL, version INT64 NOT NULL) PRIMARY KEY (id)',
  'CREATE TABLE IF NOT EXISTS kvcrud_tables (name STRING(MAX) NOT NULL, table_id STRING(32) NOT NULL, families STRING(MAX) NOT NULL) PRIMARY KEY (name)',
  'CREATE TABLE IF NOT EXISTS kvcrud_dropped (table_id STRING(32) NOT NULL) PRIMARY KEY (table_id)',
  'CREATE TABLE IF NOT EXISTS kvcrud_cells (table_id STRING(32) NOT NULL, row_key BYTES(MAX) NOT NULL, family STRING(64) NOT NULL, col_hash BYTES(32) NOT NULL, ts INT64 NOT NULL, col BYTES(MAX) NOT NULL, value BYTES(MAX) NOT NULL) PRIMARY KEY (table_id, row_key, family, col_hash, ts DESC)',
  `CREATE TABLE IF NOT EXISTS kvcrud_changes (table_id STRING(32) NOT NULL, row_key BYTES(MAX) NOT NULL, committed TIMESTAMP NOT NULL OPTIONS (allow_commit_timestamp = true), part INT64 NOT NULL, changes BYTES(MAX) NOT NULL) PRIMARY KEY (table_id, row_key, committed, part), ROW DELETION POLICY (OLDER_THAN(committed, INTERVAL ${FEED_RETENTION.days} DAY))`,
];

/** The change stream, created once (CREATE CHANGE STREAM has no IF NOT EXISTS). */
export const FEED_STREAM = 'kvcrud_feed';
const STREAM_DDL = `CREATE CHANGE STREAM ${FEED_STREAM} FOR kvcrud_changes, kvcrud_tables() OPTIONS (retention_period = '${FEED_RETENTION.ddl}', value_capture_type = 'NEW_ROW')`;

const SCHEMA_TABLES = ['kvcrud_schema', 'kvcrud_tables', 'kvcrud_dropped', 'kvcrud_cells', 'kvcrud_changes'];

export interface SchemaOptions {
  /** Milliseconds each step may take. */
  readonly timeout: number;
  /** Runs a read-write transaction (serialised against the emulator). */
  readonly transact: <T>(work: () => Promise<T>) => Promise<T>;
}

/**
 * ensureSchema makes the database's schema the one this kvcrud knows, or refuses it.
 *
 * Two replicas starting at once against a new database both run the same DDL: every statement is
 * CREATE TABLE IF NOT EXISTS, and Spanner applies schema changes one at a time, so the second is
 * a no-op. Both then record the version in one read-write transaction each; Spanner orders them,
 * and the second finds the row the first wrote. Neither fails.
 *
 * A database of version 1 (no change feed) is upgraded the same way: the statements it lacks run,
 * then the version row is raised to 2. Writes of a version-1 kvcrud still running meanwhile are
 * not in the feed; a feed covers what was committed after the upgrade.
 */
export async function ensureSchema(database: Database, options: SchemaOptions): Promise<void> {
  const started = Date.now();
  for (let attempt = 0; ; attempt++) {
    const [present] = await database.run({
      sql: 'SELECT table_name FROM information_schema.tables WHERE table_schema = "" AND table_name IN UNNEST(@names)',
      params: { names: SCHEMA_TABLES },
      json: true,
      gaxOptions: { timeout: options.timeout },
    });
    const [streams] = await database.run({
      sql: 'SELECT change_stream_name FROM information_schema.change_streams WHERE change_stream_name = @name',
      params: { name: FEED_STREAM },
      json: true,
      gaxOptions: { timeout: options.timeout },
    });
    if (present.length === SCHEMA_TABLES.length && streams.length === 1) break;
    try {
      const [operation] = await database.updateSchema(streams.length === 1 ? [...SCHEMA_DDL] : [...SCHEMA_DDL, STREAM_DDL]);
      await operation.promise();
      break;
    } catch (error) {
      // The emulator refuses a schema change while another runs (another replica's, at once);
      // Spanner itself queues them. Either way the other's change is this one: check again. So is
      // a change stream that the other created between the check and this statement.
      // (The emulator says FAILED_PRECONDITION "Duplicate name in schema: kvcrud_feed" for that.)
      const code = (error as { code?: unknown }).code;
      const message = String((error as Error).message);
      const concurrent = (code === 9 && /concurrent schema change/i.test(message)) || ((code === 9 || code === 6) && /duplicate name in schema: kvcrud_feed|already exists/i.test(message));
      if (!concurrent || Date.now() - started > options.timeout) throw error;
      await new Promise((resolve) => setTimeout(resolve, Math.min(1000, 50 * 2 ** attempt)));
    }
  }
  const version = await options.transact(() =>
    database.runTransactionAsync({ timeout: options.timeout }, async (transaction) => {
      const [rows] = await transaction.read('kvcrud_schema', { keys: [['0']], columns: ['version'], json: true, jsonOptions: { wrapNumbers: true } });
      const stored = rows[0] as { version: { value: string } } | undefined;
      if (stored !== undefined && Number(stored.version.value) < SCHEMA_VERSION) {
        transaction.update('kvcrud_schema', { id: '0', version: String(SCHEMA_VERSION) });
        await transaction.commit();
        return SCHEMA_VERSION;
      }
      if (stored !== undefined) {
        await transaction.rollback();
        return Number(stored.version.value);
      }
      transaction.insert('kvcrud_schema', { id: '0', version: String(SCHEMA_VERSION) });
      await transaction.commit();
      return SCHEMA_VERSION;
    }),
  );
  if (version > SCHEMA_VERSION) {
    throw new StoreError(
      'INTERNAL',
      `spanner database ${database.formattedName_} has kvcrud schema version ${version}; this kvcrud knows versions up to ${SCHEMA_VERSION}: run a kvcrud at least as new as the one that wrote it`,
    );
  }
}
