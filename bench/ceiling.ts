/**
 * The ceiling: what the Bigtable client itself achieves against the same emulator, in this
 * process, at the same concurrency, with no HTTP at all. It makes the calls the Bigtable store
 * makes (low-level v2.BigtableClient readRows / mutateRow with the same request shapes and call
 * options), so service/ceiling is the cost of the HTTP hop and the service's own work.
 */
import { performance } from 'node:perf_hooks';
import { Bigtable, type protos, v2 } from '@google-cloud/bigtable';
import { LoadRecorder, type LoadResult } from './measure.ts';
import { CELLS, type CaseName, FAMILY, nextIsRead, randomExistingKey } from './workload.ts';

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

export interface CeilingLoad {
  readonly client: v2.BigtableClient;
  readonly tableName: string;
  readonly caseName: CaseName;
  readonly connections: number;
  readonly durationMs: number;
  readonly newKey: () => string;
}

/** Runs `connections` callers in a closed loop (each waits for its answer) for the duration. */
export async function runCeiling(load: CeilingLoad): Promise<LoadResult> {
  const recorder = new LoadRecorder();
  const started = performance.now();
  const end = started + load.durationMs;

  async function caller(): Promise<void> {
    while (performance.now() < end) {
      const read = nextIsRead(load.caseName);
      const callStarted = performance.now();
      try {
        if (read) {
          const cells = await readRow(load.client, load.tableName, randomExistingKey());
          if (cells !== CELLS.length) throw new Error(`read ${cells} cells, expected ${CELLS.length}`);
        } else {
          await writeRow(load.client, load.tableName, load.newKey());
        }
        recorder.success(performance.now() - callStarted);
      } catch (error) {
        recorder.failure(`${read ? 'readRows' : 'mutateRow'}: ${(error as Error).message}`);
      }
    }
  }

  await Promise.all(Array.from({ length: load.connections }, caller));
  return recorder.result((performance.now() - started) / 1000);
}
