/**
 * The ceiling: what the Bigtable client itself achieves against the same emulator, in this
 * process, at the same concurrency, with no HTTP at all. It makes the calls the Bigtable store
 * makes (low-level v2.BigtableClient readRows / mutateRow with the same request shapes and call
 * options), so service/ceiling is the cost of the HTTP hop and the service's own work.
 */
import { Bigtable, type protos, v2 } from '@google-cloud/bigtable';
import { type ClosedLoopLoad, type LoadResult, runClosedLoop } from './measure.ts';
import { CELLS, FAMILY } from './workload.ts';

type ReadRowsResponse = protos.google.bigtable.v2.IReadRowsResponse;

/** A data client configured as BigtableStore configures its own, for the emulator at `emulatorHost`. */
export function dataClient(projectId: string, emulatorHost: string): v2.BigtableClient {
  const settings = new Bigtable({ projectId, apiEndpoint: emulatorHost, universeDomain: 'googleapis.com', metricsEnabled: false }).options;
  return new v2.BigtableClient(settings.BigtableClient);
}

/** The per-call options the store passes: a deadline and no retry layers of the client's own. */
function callOptions() {
  return { timeout: 5000, retry: null, retryRequestOptions: { retries: 0, noResponseRetries: 0 } };
}

/** Reads one row the way BigtableStore.readRows does; resolves with the number of cells. */
export function readRow(client: v2.BigtableClient, tableName: string, rowKey: string): Promise<number> {
  return new Promise((resolve, reject) => {
    let cells = 0;
    const stream = client.readRows(
      { tableName, rows: { rowKeys: [Buffer.from(rowKey)] }, rowsLimit: 1, filter: { cellsPerColumnLimitFilter: 1 } },
      callOptions(),
    );
    stream.on('data', (response: ReadRowsResponse) => {
      for (const chunk of response.chunks ?? []) if (!chunk.valueSize) cells++;
    });
    stream.on('error', reject);
    stream.on('end', () => resolve(cells));
  });
}

/** Writes the benchmark's two cells to a row the way BigtableStore.mutateRow does. */
export async function writeRow(client: v2.BigtableClient, tableName: string, rowKey: string): Promise<void> {
  const timestampMicros = (BigInt(Date.now()) * 1000n).toString();
  const mutations = CELLS.map((cell) => ({
    setCell: {
      familyName: FAMILY,
      columnQualifier: Buffer.from(cell.columnName),
      timestampMicros,
      value: Buffer.from(cell.columnValue),
    },
  }));
  await client.mutateRow({ tableName, rowKey: Buffer.from(rowKey), mutations }, callOptions());
}

export interface CeilingLoad extends ClosedLoopLoad {
  readonly client: v2.BigtableClient;
  readonly tableName: string;
}

/** Runs `connections` callers in a closed loop (each waits for its answer) for the duration. */
export function runCeiling(load: CeilingLoad): Promise<LoadResult> {
  return runClosedLoop(load, {
    read: (key) => readRow(load.client, load.tableName, key),
    write: (key) => writeRow(load.client, load.tableName, key),
    readName: 'readRows',
    writeName: 'mutateRow',
  });
}
