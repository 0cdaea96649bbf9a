/**
 * The Spanner ceiling: the official client in the benchmark's own process, against the same
 * emulator as the service, doing the least the same work needs in the store's layout
 * (docs/stores/spanner.md): a read is one single-use read of the row's key range, a write one
 * read-write transaction upserting them (blind: no catalog read, no retention). No HTTP, no
 * service. The emulator runs one read-write transaction at a time, so the ceiling's writers are
 * queued in this process as the store's are.
 */
import { createHash } from 'node:crypto';
import { type Database, Spanner } from '@google-cloud/spanner';
import { credentials } from '@grpc/grpc-js';
import { type ClosedLoopLoad, type LoadResult, runClosedLoop } from './measure.ts';
import { CELLS, FAMILY } from './workload.ts';

export function spannerClient(projectId: string, host: string, port: number): Spanner {
  // As the store does against an emulator (docs/stores/spanner.md): session pools, not multiplexed sessions.
  for (const name of ['GOOGLE_CLOUD_SPANNER_MULTIPLEXED_SESSIONS', 'GOOGLE_CLOUD_SPANNER_MULTIPLEXED_SESSIONS_PARTITIONED_OPS', 'GOOGLE_CLOUD_SPANNER_MULTIPLEXED_SESSIONS_FOR_RW']) {
    process.env[name] ??= 'false';
  }
  return new Spanner({ projectId, servicePath: host, port, sslCreds: credentials.createInsecure(), universeDomain: 'googleapis.com', disableBuiltInMetrics: true });
}

/** The table's ID in the store's catalog. */
export async function spannerTableId(database: Database, table: string): Promise<string> {
  const [rows] = await database.run({ sql: 'SELECT table_id FROM kvcrud_tables WHERE name = @name', params: { name: table }, json: true });
  const id = (rows[0] as { table_id?: string } | undefined)?.table_id;
  if (id === undefined) throw new Error(`no table ${table} in the catalog`);
  return id;
}

/** Reads a row's cells by key range (as the store does), in a single-use read; resolves to how many. */
export async function readSpannerRow(database: Database, tableId: string, key: string): Promise<number> {
  const prefix = [tableId, Buffer.from(key)];
  const [rows] = await database.table('kvcrud_cells').read({ ranges: [{ startClosed: prefix, endClosed: prefix }], columns: ['col', 'ts', 'value'], json: true });
  return rows.length;
}

let writing: Promise<unknown> = Promise.resolve();

export function writeSpannerRow(database: Database, tableId: string, key: string): Promise<void> {
  const ts = String(Date.now() * 1000);
  const rows = CELLS.map((cell) => ({
    table_id: tableId,
    row_key: Buffer.from(key),
    family: FAMILY,
    col_hash: createHash('sha256').update(cell.columnName).digest(),
    ts,
    col: Buffer.from(cell.columnName),
    value: Buffer.from(cell.columnValue),
  }));
  const write = writing.then(() =>
    database.runTransactionAsync(async (transaction) => {
      transaction.upsert('kvcrud_cells', rows);
      await transaction.commit();
    }),
  );
  writing = write.catch(() => undefined);
  return write.then(() => undefined);
}

export interface SpannerCeilingLoad extends ClosedLoopLoad {
  readonly database: Database;
  readonly tableId: string;
}

/** Runs `connections` callers in a closed loop (each waits for its answer) for the duration. */
export function runSpannerCeiling(load: SpannerCeilingLoad): Promise<LoadResult> {
  return runClosedLoop(load, {
    read: (key) => readSpannerRow(load.database, load.tableId, key),
    write: (key) => writeSpannerRow(load.database, load.tableId, key),
    readName: 'query',
    writeName: 'transaction',
  });
}
