/**
 * Drives the service over HTTP with autocannon: keep-alive connections, each sending its next
 * request when the answer to the previous one arrives (closed loop, like the ceiling's callers).
 */
import { performance } from 'node:perf_hooks';
import autocannon from 'autocannon';
import { LoadRecorder, type LoadResult } from './measure.ts';
import { CELLS, type CaseName, FAMILY, TABLE, nextIsRead, randomExistingKey } from './workload.ts';

export interface HttpLoad {
  readonly baseUrl: string;
  readonly instance: string;
  readonly caseName: CaseName;
  readonly connections: number;
  readonly durationSeconds: number;
  readonly newKey: () => string;
}

/** The HTTP request for one readCellData of an existing row. */
export function readRequest(instance: string, rowKey: string) {
  return {
    method: 'GET' as const,
    path: `/v1/${instance}/readCellData?tableName=${TABLE}&id=${encodeURIComponent(rowKey)}`,
  };
}

/** The HTTP request for one insertData of the benchmark's two cells. */
export function insertRequest(instance: string, rowKey: string) {
  const cells = CELLS.map((cell) => ({ columnFamily: FAMILY, ...cell }));
  return {
    method: 'POST' as const,
    path: `/v1/${instance}/insertData`,
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ tableName: TABLE, rowKeyId: rowKey, data: cells }),
  };
}

export async function runHttpLoad(load: HttpLoad): Promise<LoadResult> {
  const recorder = new LoadRecorder();
  const started = performance.now();
  let finish: (error: Error | null) => void = () => {};
  const finished = new Promise<void>((resolve, reject) => {
    finish = (error) => (error === null ? resolve() : reject(error));
  });
  const instance = autocannon({
    url: load.baseUrl,
    connections: load.connections,
    duration: load.durationSeconds,
    timeout: 10,
    requests: [
      {
        setupRequest: (request) => ({
          ...request,
          ...(nextIsRead(load.caseName) ? readRequest(load.instance, randomExistingKey()) : insertRequest(load.instance, load.newKey())),
        }),
      },
    ],
  }, (error: Error | null) => finish(error));
  // autocannon's own histogram has 1 ms resolution; record each answer's time to the microsecond.
  instance.on('response', (_client, statusCode, _bytes, responseTimeMs) => {
    if (statusCode >= 200 && statusCode < 300) recorder.success(responseTimeMs);
    else recorder.failure(`HTTP ${statusCode}`);
  });
  // Socket errors and timeouts (autocannon reports a timeout as a request error too).
  instance.on('reqError', (error: Error) => recorder.failure(`request error: ${error.message}`));
  await finished;
  return recorder.result((performance.now() - started) / 1000);
}
