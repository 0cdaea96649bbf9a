/**
 * Drives the service over HTTP with autocannon: keep-alive connections, each sending its next
 * request when the answer to the previous one arrives (closed loop, like the ceiling's callers).
 */
import { performance } from 'node:perf_hooks';
import autocannon from 'autocannon';
import { LoadRecorder, type LoadResult } from './measure.ts';
import { BATCH_GET_KEYS, CELLS, type CaseName, FAMILY, HOT_KEY, SCAN_PAGE_ROWS, TABLE, nextIsRead, randomExistingKey, randomScanStart } from './workload.ts';

/** A load that runs for `durationSeconds`, or until it has sent `requests` requests. */
export type HttpLoad = {
  readonly baseUrl: string;
  /** The store the service serves (its driver's name), for the v2 paths. */
  readonly store: string;
  readonly instance: string;
  readonly caseName: CaseName;
  readonly connections: number;
  readonly newKey: () => string;
  /** How long a request may take before it counts as failed (default 10 s). */
  readonly timeoutSeconds?: number;
  /** Each next request, in place of the case's kvcrud request: for a peer with an API of its own (Webdis). */
  readonly request?: () => { method: 'GET' | 'POST' | 'PUT'; path: string; headers?: Record<string, string>; body?: string };
} & ({ readonly durationSeconds: number } | { readonly requests: number });

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

/** The v2 path of the benchmark's table on `store` and `instance`. */
function v2Rows(store: string, instance: string): string {
  return `/v2/stores/${store}/instances/${instance}/tables/${TABLE}/rows`;
}

/** The HTTP request for one v2 read of an existing row. */
export function v2ReadRequest(store: string, instance: string, rowKey: string) {
  return { method: 'GET' as const, path: `${v2Rows(store, instance)}/${encodeURIComponent(rowKey)}` };
}

/** The HTTP request for one v2 write of the benchmark's two cells to a row. */
export function v2WriteRequest(store: string, instance: string, rowKey: string) {
  const cells = CELLS.map((cell) => ({ family: FAMILY, column: cell.columnName, value: cell.columnValue }));
  return {
    method: 'PUT' as const,
    path: `${v2Rows(store, instance)}/${encodeURIComponent(rowKey)}`,
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ cells }),
  };
}

/** The HTTP request for one v2 scan page of SCAN_PAGE_ROWS rows from `start`. */
export function v2ScanRequest(store: string, instance: string, start: string) {
  return { method: 'GET' as const, path: `${v2Rows(store, instance)}?start=${encodeURIComponent(start)}&pageSize=${SCAN_PAGE_ROWS}` };
}

/** The HTTP request for one v2 batchGet of BATCH_GET_KEYS preloaded rows, chosen uniformly. */
export function v2BatchGetRequest(store: string, instance: string) {
  const keys = Array.from({ length: BATCH_GET_KEYS }, randomExistingKey);
  return { method: 'POST' as const, path: `${v2Rows(store, instance)}:batchGet`, headers: { 'content-type': 'application/json' }, body: JSON.stringify({ keys }) };
}

/** The HTTP request for one v2 increment of the counter `hits` of a row. */
export function v2IncrementRequest(store: string, instance: string, rowKey: string) {
  const body = { rules: [{ family: FAMILY, column: 'hits', increment: 1 }] };
  return { method: 'POST' as const, path: `${v2Rows(store, instance)}/${encodeURIComponent(rowKey)}:readModifyWrite`, headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) };
}

/** The HTTP request for one v2 checkAndMutate of a preloaded row: set `state` if `status` exists (it does). */
export function v2CheckAndMutateRequest(store: string, instance: string, rowKey: string) {
  const body = {
    conditions: [{ family: FAMILY, column: CELLS[0].columnName, exists: true }],
    mutations: [{ set: { family: FAMILY, column: 'state', value: 'seen' } }],
  };
  return { method: 'POST' as const, path: `${v2Rows(store, instance)}/${encodeURIComponent(rowKey)}:checkAndMutate`, headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) };
}

/** The next request of a load. */
function nextRequest(load: HttpLoad) {
  const read = nextIsRead(load.caseName);
  switch (load.caseName) {
    case 'v2read':
      return v2ReadRequest(load.store, load.instance, randomExistingKey());
    case 'v2write':
      return v2WriteRequest(load.store, load.instance, load.newKey());
    case 'v2scan':
      return v2ScanRequest(load.store, load.instance, randomScanStart());
    case 'v2batchget':
      return v2BatchGetRequest(load.store, load.instance);
    case 'v2increment':
      return v2IncrementRequest(load.store, load.instance, randomExistingKey());
    case 'v2increment-hot':
      return v2IncrementRequest(load.store, load.instance, HOT_KEY);
    case 'v2checkandmutate':
      return v2CheckAndMutateRequest(load.store, load.instance, randomExistingKey());
    case 'v2checkandmutate-hot':
      return v2CheckAndMutateRequest(load.store, load.instance, HOT_KEY);
    default:
      return read ? readRequest(load.instance, randomExistingKey()) : insertRequest(load.instance, load.newKey());
  }
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
    ...('requests' in load ? { amount: load.requests } : { duration: load.durationSeconds }),
    timeout: load.timeoutSeconds ?? 10,
    requests: [
      {
        setupRequest: (request) => ({ ...request, ...(load.request?.() ?? nextRequest(load)) }),
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
