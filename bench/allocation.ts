/**
 * `npm run build && node bench/allocation.ts [--store bigtable|embedded] [--case read|insert|v2read|v2write]
 * [--requests 8000] [--by package|function] [--top 30] [--who FUNCTION] [--promoted]`: the bytes the service allocates
 * per request, and where.
 *
 * Starts the built service (on a Bigtable emulator of its own, or the embedded store) with its
 * inspector on, warms it up, then samples its allocations with V8's sampling heap profiler, objects
 * already collected included, while `--requests` requests of the case run on 16 keep-alive
 * connections. Prints the total per request and the largest shares, by package (or module of the
 * service) or by function; `--who F` prints the call chains that allocate in functions named F;
 * `--promoted` counts only what outlived a scavenge.
 *
 * Unlike CPU time, the bytes allocated per request hardly move with what else the machine is doing,
 * so this is the figure to compare builds by on a shared machine. Each byte costs garbage collection
 * later: see "Allocation" in bench/README.md.
 */
import http from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { spawnEmulator } from '../test/support/emulator.ts';
import { cleanEnv, runService } from '../test/support/service-process.ts';
import { insertRequest, readRequest, v2ReadRequest, v2WriteRequest } from './http-load.ts';
import { FAMILY, PRELOADED_ROWS, TABLE, newKeys, preloadedKey, randomExistingKey } from './workload.ts';

const CASES = ['read', 'insert', 'v2read', 'v2write'] as const;
const { values: args } = parseArgs({
  options: {
    store: { type: 'string', default: 'bigtable' },
    case: { type: 'string', default: 'read' },
    requests: { type: 'string', default: '8000' },
    by: { type: 'string', default: 'package' },
    top: { type: 'string', default: '30' },
    who: { type: 'string' },
    promoted: { type: 'boolean', default: false },
  },
});
const caseName = args.case as (typeof CASES)[number];
if (!CASES.includes(caseName)) throw new Error(`--case is one of ${CASES.join(', ')}`);
if (args.store !== 'bigtable' && args.store !== 'embedded') throw new Error('--store is bigtable or embedded');
const requests = Number(args.requests);
const CONNECTIONS = 16;
const WARMUP_REQUESTS = 5000;
/** One sample per this many bytes allocated, on average: V8's default is 32 KiB, too coarse for a request of 100 KB. */
const SAMPLING_INTERVAL_BYTES = 4096;
const INSTANCE = 'bench-instance';
const ROOT = new URL('../', import.meta.url).pathname;

interface Request {
  readonly method: string;
  readonly path: string;
  readonly headers?: Record<string, string>;
  readonly body?: string;
}

const agent = new http.Agent({ keepAlive: true, maxSockets: CONNECTIONS });
function send(baseUrl: string, { method, path, headers, body }: Request): Promise<number> {
  return new Promise((resolve, reject) => {
    const request = http.request(`${baseUrl}${path}`, { method, agent, headers: { ...headers, ...(body === undefined ? {} : { 'content-length': String(Buffer.byteLength(body)) }) } }, (response) => {
      response.resume();
      response.on('end', () => resolve(response.statusCode ?? 0));
    });
    request.on('error', reject);
    request.end(body);
  });
}

const newKey = newKeys('allocation');
function nextRequest(): Request {
  switch (caseName) {
    case 'read':
      return readRequest(INSTANCE, randomExistingKey());
    case 'insert':
      return insertRequest(INSTANCE, newKey());
    case 'v2read':
      return v2ReadRequest(args.store, INSTANCE, randomExistingKey());
    case 'v2write':
      return v2WriteRequest(args.store, INSTANCE, newKey());
  }
}

/** Runs `count` requests of the case, CONNECTIONS at a time; any answer but a 2xx stops the run. */
async function load(baseUrl: string, count: number, next: () => Request = nextRequest): Promise<void> {
  let started = 0;
  const connection = async () => {
    while (started < count) {
      started += 1;
      const request = next();
      const status = await send(baseUrl, request);
      if (status < 200 || status > 299) throw new Error(`${request.method} ${request.path}: ${status}`);
    }
  };
  await Promise.all(Array.from({ length: CONNECTIONS }, connection));
}

/** A Chrome DevTools Protocol session on the service's inspector. */
async function inspector(url: string) {
  const socket = new WebSocket(url);
  await new Promise((resolve, reject) => {
    socket.addEventListener('open', resolve, { once: true });
    socket.addEventListener('error', reject, { once: true });
  });
  let lastId = 0;
  const waiting = new Map<number, (result: unknown) => void>();
  socket.addEventListener('message', (event) => {
    const message = JSON.parse(String(event.data)) as { id?: number; result?: unknown };
    if (message.id !== undefined) waiting.get(message.id)?.(message.result);
  });
  return {
    call(method: string, params: object = {}): Promise<unknown> {
      lastId += 1;
      const id = lastId;
      return new Promise((resolve) => {
        waiting.set(id, resolve);
        socket.send(JSON.stringify({ id, method, params }));
      });
    },
    close: () => socket.close(),
  };
}

interface ProfileNode {
  readonly callFrame: { readonly functionName: string; readonly url: string; readonly lineNumber: number };
  readonly selfSize: number;
  readonly children: readonly ProfileNode[];
}

/** `dist/http/validate.js`, `joi`, `@grpc/grpc-js`, `node:buffer`, or `(native)`. */
function packageOf(url: string): string {
  const path = url.replace(/^file:\/\//, '');
  const modules = path.lastIndexOf('/node_modules/');
  if (modules >= 0) {
    const parts = path.slice(modules + '/node_modules/'.length).split('/');
    return parts.slice(0, parts[0]?.startsWith('@') === true ? 2 : 1).join('/');
  }
  if (path.startsWith(ROOT)) return path.slice(ROOT.length);
  return path === '' ? '(native)' : path;
}

function frameOf(node: ProfileNode): string {
  const { functionName, url, lineNumber } = node.callFrame;
  return `${functionName === '' ? '(anonymous)' : functionName} ${url === '' ? '' : `${packageOf(url)}:${lineNumber + 1}`}`.trim();
}

const dataDir = args.store === 'embedded' ? mkdtempSync(join(tmpdir(), 'kvcrud-allocation-')) : undefined;
const emulator = args.store === 'bigtable' ? await spawnEmulator() : undefined;
const vars: Record<string, string> =
  emulator === undefined
    ? { DATA_STORE: 'embedded', DATA_DIR: dataDir ?? '', INSTANCE_IDS: INSTANCE }
    : { GOOGLE_CLOUD_PROJECT: 'kvcrud-bench', INSTANCE_IDS: INSTANCE, BIGTABLE_EMULATOR_HOST: emulator.host };
const service = await runService(cleanEnv({ PORT: '0', ...vars }), [process.execPath, '--inspect=127.0.0.1:0', join(ROOT, 'dist/index.js')]);
try {
  // The service starts again with its heap flags: the inspector it listens with is the last one named.
  const url = service.output.flatMap((line) => /ws:\/\/\S+/.exec(line) ?? []).at(-1);
  if (url === undefined) throw new Error(`the service named no inspector:\n${service.output.join('\n')}`);
  const created = await send(service.baseUrl, {
    method: 'POST',
    path: `/v1/${INSTANCE}/createTable`,
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ tableName: TABLE, columnFamily: FAMILY }),
  });
  if (created !== 201) throw new Error(`createTable: ${created}`);
  let preloaded = 0;
  await load(service.baseUrl, PRELOADED_ROWS, () => insertRequest(INSTANCE, preloadedKey(preloaded++)));
  await load(service.baseUrl, WARMUP_REQUESTS);

  const session = await inspector(url);
  await session.call('HeapProfiler.enable');
  await session.call('HeapProfiler.startSampling', {
    samplingInterval: SAMPLING_INTERVAL_BYTES,
    includeObjectsCollectedByMajorGC: true,
    // With --promoted, objects a scavenge collected drop out: what is left lived long enough to be moved to the old generation.
    includeObjectsCollectedByMinorGC: !args.promoted,
  });
  await load(service.baseUrl, requests);
  const { profile } = (await session.call('HeapProfiler.stopSampling')) as { profile: { head: ProfileNode } };
  session.close();

  const shares = new Map<string, number>();
  const chains = new Map<string, number>();
  let total = 0;
  const visit = (node: ProfileNode, callers: readonly string[]): void => {
    const frame = frameOf(node);
    const key = args.by === 'function' ? frame : packageOf(node.callFrame.url);
    shares.set(key, (shares.get(key) ?? 0) + node.selfSize);
    total += node.selfSize;
    if (args.who !== undefined && node.callFrame.functionName === args.who && node.selfSize > 0) {
      const chain = [frame, ...callers.slice(0, 6)].join('\n    <- ');
      chains.set(chain, (chains.get(chain) ?? 0) + node.selfSize);
    }
    for (const child of node.children) visit(child, [frame, ...callers]);
  };
  visit(profile.head, []);

  const perRequest = (bytes: number) => `${(bytes / requests).toFixed(0).padStart(7)} B`;
  process.stdout.write(`${args.store}, ${caseName}: ${(total / requests / 1024).toFixed(1)} KiB allocated per request (${requests} requests, ${CONNECTIONS} connections)\n`);
  for (const [key, bytes] of [...shares].sort((a, b) => b[1] - a[1]).slice(0, Number(args.top))) process.stdout.write(`${perRequest(bytes)}  ${key}\n`);
  for (const [chain, bytes] of [...chains].sort((a, b) => b[1] - a[1]).slice(0, 5)) process.stdout.write(`\n${perRequest(bytes)}  ${chain}\n`);
} finally {
  await service.stop('SIGTERM');
  emulator?.process.kill('SIGTERM');
  if (dataDir !== undefined) rmSync(dataDir, { recursive: true, force: true });
  agent.destroy();
}
