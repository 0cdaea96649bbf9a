/**
 * `npm run bench`: the service's throughput, latency, CPU and memory, next to the ceiling and to
 * a naive proxy (bench/naive-proxy.ts) measured in the same run, and, on Redis, beside Webdis when it
 * is installed (bench/webdis.ts). See bench/README.md. Options:
 *   --duration S      measured seconds per load (default 10)
 *   --warmup S        unmeasured seconds before each load (default 2)
 *   --cases LIST      read,insert,mix (v1), v2read,v2write,v2scan,v2batchget, v2increment[-hot],
 *                     v2checkandmutate[-hot] (default all)
 *   --connections L   concurrent connections / callers (default 1,32,128)
 *   --stores LIST     bigtable,embedded,redis,spanner (default all)
 *   --out FILE        where to write the JSON results (default bench/results/latest.json)
 *   --profile         run the service with --cpu-prof and print its top functions by self time; the
 *                     naive proxy's and the floors' profiles are written beside it
 *   --node-flags=F    extra Node flags for the service, e.g. --node-flags="--max-semi-space-size=4"
 *   --bigtable-coalesce on|off
 *                     whether the Bigtable store sends single-row writes of one turn together
 *                     (BIGTABLE_COALESCE; default on)
 *   --spanner-coalesce on|off
 *                     whether the Spanner store reads single keys of one turn together
 *                     (the store's coalesce setting; default on)
 */
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, freemem, loadavg, release, tmpdir, totalmem } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { spawnEmulator } from '../test/support/emulator.ts';
import { type ServiceProcess, cleanEnv, runService } from '../test/support/service-process.ts';
import { spawnRedis } from '../test/support/redis-server.ts';
import { spawnSpannerEmulator } from '../test/support/spanner-emulator.ts';
import { dataClient, readRow, runCeiling, writeRow } from './ceiling.ts';
import { insertRequest, readRequest, runHttpLoad, v2ReadRequest, v2ScanRequest, v2WriteRequest } from './http-load.ts';
import type { ClosedLoopLoad, LoadResult } from './measure.ts';
import { type SelfTime, formatSelfTime, topSelfTime } from './profile-summary.ts';
import { CpuMeter, RssSampler } from './proc-stats.ts';
import { type RedisTableKeys, readRedisRow, redisClient, runRedisCeiling } from './redis-ceiling.ts';
import { type Webdis, spawnWebdis, webdisAvailable, webdisHGetAllRequest } from './webdis.ts';
import { readSpannerRow, runSpannerCeiling, spannerClient, spannerTableId } from './spanner-ceiling.ts';
import { CASES, CASE_LABELS, CELLS, type CaseName, FAMILY, PRELOADED_ROWS, SCAN_PAGE_ROWS, TABLE, V1_CASES, newKeys, preloadedKey, randomExistingKey } from './workload.ts';

const ROOT = new URL('../', import.meta.url).pathname;
const PROJECT = 'kvcrud-bench';
const BIGTABLE_INSTANCE = 'bench-instance';
const EMBEDDED_INSTANCE = 'local';
const REDIS_INSTANCE = 'bench';
const SPANNER_INSTANCE = 'bench';
const STORES = ['bigtable', 'embedded', 'redis', 'spanner'] as const;
type StoreName = (typeof STORES)[number];
/** The printed table's columns. */
const COLUMNS = '%-9s %-7s %5s | %8s %7s %7s %7s %5s | %8s %7s %7s %7s %5s %6s | %6s %6s';

const { values: args } = parseArgs({
  options: {
    duration: { type: 'string', default: '10' },
    warmup: { type: 'string', default: '2' },
    cases: { type: 'string', default: CASES.join(',') },
    connections: { type: 'string', default: '1,32,128' },
    stores: { type: 'string', default: 'bigtable,embedded,redis,spanner' },
    out: { type: 'string', default: 'bench/results/latest.json' },
    profile: { type: 'boolean', default: false },
    'node-flags': { type: 'string', default: '' },
    'bigtable-coalesce': { type: 'string', default: 'on' },
    'spanner-coalesce': { type: 'string', default: 'on' },
  },
});
const durationSeconds = positive(args.duration, 'duration');
const warmupSeconds = Number(args.warmup);
const cases = list(args.cases, CASES, 'cases');
const connections = args.connections.split(',').map((text) => positive(text, 'connections'));
const stores = list(args.stores, STORES, 'stores');
if (!['on', 'off'].includes(args['bigtable-coalesce'])) throw new Error(`--bigtable-coalesce takes on or off, got ${args['bigtable-coalesce']}`);
const bigtableCoalesce = args['bigtable-coalesce'] === 'on';
if (!['on', 'off'].includes(args['spanner-coalesce'])) throw new Error(`--spanner-coalesce takes on or off, got ${args['spanner-coalesce']}`);
const spannerCoalesce = args['spanner-coalesce'] === 'on';

/** A load's figures and the CPU time each process involved spent per request (µs). */
type Measured = LoadResult & { readonly cpuMicrosPerRequest: Record<string, number> };
/** A load against a server process, with that process's peak RSS (MiB). */
type ServerMeasured = Measured & { readonly peakRssMb: number };

interface CaseResult {
  readonly store: StoreName;
  readonly case: CaseName;
  readonly operation: string;
  readonly connections: number;
  /** The low-level client in-process (Bigtable's gRPC client; node-redis for Redis; the Spanner client). */
  readonly ceiling?: Measured;
  readonly service: ServerMeasured;
  /** service / ceiling: throughput, and p99 latency (lower is better). */
  readonly ratio?: { readonly reqPerSec: number; readonly p99: number };
  /** The naive proxy on the same store (Bigtable, v1 cases). */
  readonly naive?: ServerMeasured;
  /** service / naive proxy: throughput, p99, and CPU per request of the server process (lower is better). */
  readonly vsNaive?: { readonly reqPerSec: number; readonly p99: number; readonly cpu: number; readonly peakRss: number };
  /** The floor server on the same store (Bigtable, v1 cases): node:http and the bare gRPC call. */
  readonly floor?: ServerMeasured;
  /** The same calls under Koa, @koa/router and koa-body: the floor on kvcrud's HTTP stack. */
  readonly koaFloor?: ServerMeasured;
  /** Server CPU per request over the floor's: kvcrud's, the naive proxy's and the Koa floor's. */
  readonly overFloor?: { readonly service: number; readonly naive: number; readonly koa: number };
  /** Webdis on the same redis-server, `GET /HGETALL/<row hash>` of the same rows (Redis, v2read). */
  readonly webdis?: ServerMeasured;
  /** kvcrud / Webdis: throughput, and server CPU per request (kvcrud's service over the webdis process). */
  readonly vsWebdis?: { readonly reqPerSec: number; readonly cpu: number };
  /** 1-minute load average when the case started: how busy the shared machine was. */
  readonly loadAverage: number;
}

/** The process a store's service calls (an emulator, a redis-server): every load counts its CPU too, as `name`. */
interface Backend {
  readonly name: string;
  readonly pid: number;
}

/** One load of a store's low-level client in this process, no HTTP. */
type Ceiling = (load: ClosedLoopLoad) => Promise<LoadResult>;

/** Servers measured on the same store beside the service: the naive proxy and the two floors. */
interface Baselines {
  readonly naive: ServiceProcess;
  readonly floor: ServiceProcess;
  readonly koaFloor: ServiceProcess;
}

/** A store's service under test and what its loads are measured against. */
interface StoreBench {
  readonly store: StoreName;
  readonly instance: string;
  readonly service: ServiceProcess;
  /** None when the store runs inside the service (embedded). */
  readonly backend?: Backend;
  /** For the v1 cases; none for the embedded store. */
  readonly ceiling?: Ceiling;
  /** For the v1 cases, after the ceiling (Bigtable only). */
  readonly baselines?: Baselines;
  /** The HTTP peer measured beside the v2 get (Redis, when webdis is installed), and the hash key of a row. */
  readonly peer?: { readonly webdis: Webdis; readonly hashKey: (rowKey: string) => string };
}

const machine = {
  cpus: cpus().length,
  cpuModel: cpus()[0]?.model ?? 'unknown',
  memoryGb: Math.round(totalmem() / 2 ** 30),
  freeMemoryGb: Math.round(freemem() / 2 ** 30),
  kernel: release(),
  node: process.version,
  loadAverageAtStart: round(loadavg()[0] ?? 0),
};
const results: CaseResult[] = [];
const profiles: Record<string, SelfTime[]> = {};

process.stdout.write(
  `kvcrud benchmark: ${machine.cpus} × ${machine.cpuModel}, ${machine.memoryGb} GB, Node ${machine.node}, ` +
    `load average ${machine.loadAverageAtStart}\n${durationSeconds} s per load after ${warmupSeconds} s warm-up; ` +
    `service: node ${args['node-flags']} ${args.profile ? '--cpu-prof ' : ''}dist/index.js`.replace(/  +/g, ' ') + '\n\n',
);
printHeader();

const emulator = await spawnEmulator();
const emulatorPid = emulator.process.pid ?? 0;
try {
  if (stores.includes('bigtable')) await benchBigtable(emulator.host);
  if (stores.includes('embedded')) await benchEmbedded();
  if (stores.includes('redis')) await benchRedis();
  if (stores.includes('spanner')) await benchSpanner();
} finally {
  emulator.process.kill('SIGTERM');
}

const out = resolve(ROOT, args.out);
mkdirSync(dirname(out), { recursive: true });
const report = {
  date: new Date().toISOString(),
  command: `npm run bench -- ${process.argv.slice(2).join(' ')}`.trim(),
  machine: { ...machine, loadAverageAtEnd: round(loadavg()[0] ?? 0) },
  settings: { durationSeconds, warmupSeconds, preloadedRows: PRELOADED_ROWS, cells: CELLS.length, serviceNodeFlags: args['node-flags'], bigtableCoalesce, spannerCoalesce },
  results,
  ...(args.profile ? { profiles } : {}),
};
writeFileSync(out, `${JSON.stringify(report, null, 2)}\n`);
printTargets();
process.stdout.write(`\nresults: ${out}\n`);

async function benchBigtable(emulatorHost: string): Promise<void> {
  const service = await startService('bigtable', {
    GOOGLE_CLOUD_PROJECT: PROJECT,
    INSTANCE_IDS: BIGTABLE_INSTANCE,
    BIGTABLE_EMULATOR_HOST: emulatorHost,
    BIGTABLE_COALESCE: String(bigtableCoalesce),
  });
  const client = dataClient(PROJECT, emulatorHost);
  const tableName = `projects/${PROJECT}/instances/${BIGTABLE_INSTANCE}/tables/${TABLE}`;
  const baselineEnv = cleanEnv({ PORT: '0', GOOGLE_CLOUD_PROJECT: PROJECT, BIGTABLE_EMULATOR_HOST: emulatorHost });
  const naive = await runService(baselineEnv, [process.execPath, ...profileFlags('naive'), 'bench/naive-proxy.ts']);
  const floor = await runService(baselineEnv, [process.execPath, ...profileFlags('floor'), 'bench/floor-server.ts']);
  const koaFloor = await runService(baselineEnv, [process.execPath, ...profileFlags('koa-floor'), 'bench/floor-server.ts', '--koa']);
  try {
    await createTable(service.baseUrl, BIGTABLE_INSTANCE);
    await inBatches(PRELOADED_ROWS, 50, (index) => writeRow(client, tableName, preloadedKey(index)));
    const cells = await readRow(client, tableName, preloadedKey(0));
    if (cells !== CELLS.length) throw new Error(`the ceiling read ${cells} cells of a preloaded row, expected ${CELLS.length}`);
    await checkService(service.baseUrl, 'bigtable', BIGTABLE_INSTANCE);

    const ceiling: Ceiling = (load) => runCeiling({ ...load, client, tableName });
    const backend = { name: 'emulator', pid: emulatorPid };
    await benchCases({ store: 'bigtable', instance: BIGTABLE_INSTANCE, service, backend, ceiling, baselines: { naive, floor, koaFloor } });
  } finally {
    await client.close();
    await stopService(service, 'bigtable');
    await naive.stop('SIGTERM');
    await floor.stop('SIGTERM');
    await koaFloor.stop('SIGTERM');
  }
}

async function benchEmbedded(): Promise<void> {
  const dataDir = mkdtempSync(join(tmpdir(), 'kvcrud-bench-'));
  const service = await startService('embedded', { DATA_STORE: 'embedded', DATA_DIR: dataDir, INSTANCE_IDS: EMBEDDED_INSTANCE });
  try {
    await createTable(service.baseUrl, EMBEDDED_INSTANCE);
    await inBatches(PRELOADED_ROWS, 50, (index) => send(service.baseUrl, insertRequest(EMBEDDED_INSTANCE, preloadedKey(index))));
    await checkService(service.baseUrl, 'embedded', EMBEDDED_INSTANCE);
    await benchCases({ store: 'embedded', instance: EMBEDDED_INSTANCE, service });
  } finally {
    await stopService(service, 'embedded');
    rmSync(dataDir, { recursive: true, force: true });
  }
}

/** The Redis store (a STORES_FILE naming one redis-server of the benchmark's own), and node-redis in-process as its ceiling. */
async function benchRedis(): Promise<void> {
  const redis = await spawnRedis();
  const directory = mkdtempSync(join(tmpdir(), 'kvcrud-bench-redis-'));
  const storesFile = join(directory, 'stores.yaml');
  writeFileSync(storesFile, `stores:\n  redis: { driver: redis, url: "${redis.url}", instances: [${REDIS_INSTANCE}] }\n`);
  const service = await startService('redis', { STORES_FILE: storesFile });
  const client = redisClient(redis.url);
  await client.connect();
  let webdis: Webdis | undefined;
  try {
    await createTable(service.baseUrl, REDIS_INSTANCE);
    await inBatches(PRELOADED_ROWS, 50, (index) => send(service.baseUrl, insertRequest(REDIS_INSTANCE, preloadedKey(index))));
    const generation = (await client.hGet(`kvcrud:{${REDIS_INSTANCE}/${TABLE}}:table`, 'generation'))?.toString() ?? '';
    const table: RedisTableKeys = { tag: `kvcrud:{${REDIS_INSTANCE}/${TABLE}}:${generation}` };
    const cells = await readRedisRow(client, table, preloadedKey(0));
    if (cells !== CELLS.length) throw new Error(`the ceiling read ${cells} cells of a preloaded row, expected ${CELLS.length}`);
    await checkService(service.baseUrl, 'redis', REDIS_INSTANCE);
    const ceiling: Ceiling = (load) => runRedisCeiling({ ...load, client, table });
    const backend = { name: 'redis', pid: redis.process.pid ?? 0 };
    const hashKey = (rowKey: string) => `${table.tag}:r:${rowKey}`;
    if (cases.includes('v2read')) webdis = await startWebdis(redis.port, hashKey);
    const peer = webdis === undefined ? undefined : { webdis, hashKey };
    await benchCases({ store: 'redis', instance: REDIS_INSTANCE, service, backend, ceiling, ...(peer === undefined ? {} : { peer }) });
  } finally {
    await webdis?.stop();
    await client.close();
    await stopService(service, 'redis');
    await redis.stop();
    rmSync(directory, { recursive: true, force: true });
  }
}

/**
 * Webdis on the bench's redis-server, checked to read a preloaded row whole; none, said so, when
 * webdis is not installed (scripts/install-webdis.sh).
 */
async function startWebdis(redisPort: number, hashKey: (rowKey: string) => string): Promise<Webdis | undefined> {
  if (!webdisAvailable()) {
    process.stdout.write('          webdis is not installed (scripts/install-webdis.sh): the Redis peer is skipped\n');
    return undefined;
  }
  const webdis = await spawnWebdis(redisPort);
  const request = webdisHGetAllRequest(hashKey(preloadedKey(0)));
  const answer = (await (await fetch(`${webdis.baseUrl}${request.path}`)).json()) as { HGETALL?: Record<string, string> };
  const fields = Object.keys(answer.HGETALL ?? {}).length;
  if (fields !== CELLS.length) {
    await webdis.stop();
    throw new Error(`webdis read ${fields} fields of a preloaded row, expected ${CELLS.length}`);
  }
  return webdis;
}

/**
 * The Spanner store on an emulator of the benchmark's own (a STORES_FILE naming it), and the
 * Spanner client in-process as its ceiling. The emulator runs one read-write transaction at a
 * time: write figures measure it, not Spanner.
 */
async function benchSpanner(): Promise<void> {
  const emulator = await spawnSpannerEmulator();
  const directory = mkdtempSync(join(tmpdir(), 'kvcrud-bench-spanner-'));
  const storesFile = join(directory, 'stores.yaml');
  writeFileSync(storesFile, `stores:\n  spanner: { driver: spanner, projectId: ${PROJECT}, instance: bench, emulatorHost: "${emulator.host}", instances: [${SPANNER_INSTANCE}], coalesce: ${spannerCoalesce} }\n`);
  const service = await startService('spanner', { STORES_FILE: storesFile });
  const client = spannerClient(PROJECT, '127.0.0.1', emulator.port);
  const database = client.instance('bench').database(SPANNER_INSTANCE);
  try {
    await createTable(service.baseUrl, SPANNER_INSTANCE);
    await inBatches(PRELOADED_ROWS, 50, (index) => send(service.baseUrl, insertRequest(SPANNER_INSTANCE, preloadedKey(index))));
    const tableId = await spannerTableId(database, TABLE);
    const cells = await readSpannerRow(database, tableId, preloadedKey(0));
    if (cells !== CELLS.length) throw new Error(`the ceiling read ${cells} cells of a preloaded row, expected ${CELLS.length}`);
    await checkService(service.baseUrl, 'spanner', SPANNER_INSTANCE);
    const ceiling: Ceiling = (load) => runSpannerCeiling({ ...load, database, tableId });
    const backend = { name: 'emulator', pid: emulator.process.pid ?? 0 };
    await benchCases({ store: 'spanner', instance: SPANNER_INSTANCE, service, backend, ceiling });
  } finally {
    await database.close();
    await client.close();
    await stopService(service, 'spanner');
    await emulator.stop();
    rmSync(directory, { recursive: true, force: true });
  }
}

/** Starts `node dist/index.js` (the production build) on a free port. */
function startService(store: string, vars: Record<string, string>): Promise<ServiceProcess> {
  const flags = args['node-flags'].split(' ').filter((flag) => flag !== '');
  return runService(cleanEnv({ PORT: '0', ...vars }), [process.execPath, ...flags, ...profileFlags(store), 'dist/index.js']);
}

/**
 * With --profile, the flags that write a process's CPU profile into bench/results/profiles/NAME
 * (emptied first): the service's under its store's name, the naive proxy's and the floors' beside
 * it, to be compared with `bench/profile-summary.ts --by-package`.
 */
function profileFlags(name: string): string[] {
  if (!args.profile) return [];
  rmSync(profileDir(name), { recursive: true, force: true });
  return ['--cpu-prof', `--cpu-prof-dir=${profileDir(name)}`];
}

async function stopService(service: ServiceProcess, store: string): Promise<void> {
  const code = await service.stop('SIGTERM');
  if (code !== 0) process.stderr.write(`the ${store} service exited with ${code}:\n${service.output.slice(-20).join('\n')}\n`);
  if (!args.profile) return;
  const file = readdirSync(profileDir(store)).find((name) => name.endsWith('.cpuprofile'));
  if (file === undefined) return;
  profiles[store] = topSelfTime(join(profileDir(store), file), 20);
  process.stdout.write(`\n${store} service, top self time (${join(profileDir(store), file)}):\n${formatSelfTime(profiles[store])}\n\n`);
}

function profileDir(store: string): string {
  return join(ROOT, 'bench/results/profiles', store);
}

function serverCpu(load: Measured): number {
  return load.cpuMicrosPerRequest['service'] ?? 0;
}

/**
 * Measures and records every case at every connection count on one store. v2 has no ceiling of its
 * own: its reads and writes are the same store calls as v1's; the baselines answer v1 only.
 */
async function benchCases(bench: StoreBench): Promise<void> {
  for (const caseName of cases) {
    for (const count of connections) {
      const loadAverage = round(loadavg()[0] ?? 0);
      const labels = { store: bench.store, case: caseName, operation: CASE_LABELS[caseName], connections: count };
      if (bench.ceiling === undefined || !V1_CASES.includes(caseName)) {
        const service = await measureServer(bench, bench.service, caseName, count);
        const peer = bench.peer !== undefined && caseName === 'v2read' ? await measureWebdis(bench, bench.peer, count, service) : {};
        record({ ...labels, service, ...peer, loadAverage });
        continue;
      }
      const ceiling = await measureCeiling(bench.ceiling, bench.backend, caseName, count);
      const service = await measureServer(bench, bench.service, caseName, count);
      const ratio = { reqPerSec: round(service.reqPerSec / ceiling.reqPerSec), p99: round(service.latencyMs.p99 / ceiling.latencyMs.p99) };
      const baselines = bench.baselines === undefined ? {} : await measureBaselines(bench, bench.baselines, caseName, count, service);
      record({ ...labels, ceiling, service, ratio, ...baselines, loadAverage });
    }
  }
}

/** The backend's entry for a CpuMeter, if the store has one. */
function backendPid(backend: Backend | undefined): Record<string, number> {
  return backend === undefined ? {} : { [backend.name]: backend.pid };
}

/** The ceiling's load after an unmeasured warm-up, with the CPU of this process (its client) and the backend. */
async function measureCeiling(ceiling: Ceiling, backend: Backend | undefined, caseName: CaseName, count: number): Promise<Measured> {
  if (warmupSeconds > 0) await ceiling({ caseName, connections: count, durationMs: warmupSeconds * 1000, newKey: newKeys('warm') });
  const cpu = new CpuMeter({ client: process.pid, ...backendPid(backend) });
  cpu.start();
  const load = await ceiling({ caseName, connections: count, durationMs: durationSeconds * 1000, newKey: newKeys('ceiling') });
  return { ...load, cpuMicrosPerRequest: cpu.perOperation(load.ok + load.errors) };
}

/** The HTTP load on one of the store's servers (the service or a baseline) after an unmeasured warm-up. */
async function measureServer(bench: StoreBench, server: ServiceProcess, caseName: CaseName, count: number): Promise<ServerMeasured> {
  const { store, instance } = bench;
  const baseUrl = server.baseUrl;
  if (warmupSeconds > 0) {
    await runHttpLoad({ baseUrl, store, instance, caseName, connections: count, durationSeconds: warmupSeconds, newKey: newKeys('warm') });
  }
  const pid = server.process.pid ?? 0;
  serverAlive(server, pid, caseName);
  const sampler = new RssSampler(pid);
  const cpu = new CpuMeter({ loadGenerator: process.pid, service: pid, ...backendPid(bench.backend) });
  sampler.start();
  cpu.start();
  const result = await runHttpLoad({ baseUrl, store, instance, caseName, connections: count, durationSeconds, newKey: newKeys('http') });
  const peakRssMb = sampler.stop();
  serverAlive(server, pid, caseName);
  return { ...result, cpuMicrosPerRequest: cpu.perOperation(result.ok + result.errors), peakRssMb };
}

/**
 * Webdis under the same load generator and connections as the service's v2 get, reading the same
 * rows' hashes, with its CPU and redis-server's per request; and kvcrud over it.
 */
async function measureWebdis(bench: StoreBench, peer: NonNullable<StoreBench['peer']>, count: number, service: ServerMeasured) {
  const { store, instance } = bench;
  const load = { baseUrl: peer.webdis.baseUrl, store, instance, caseName: 'v2read' as const, connections: count, request: () => webdisHGetAllRequest(peer.hashKey(randomExistingKey())) };
  if (warmupSeconds > 0) await runHttpLoad({ ...load, durationSeconds: warmupSeconds, newKey: newKeys('warm') });
  const pid = peer.webdis.process.pid ?? 0;
  const sampler = new RssSampler(pid);
  const cpu = new CpuMeter({ loadGenerator: process.pid, webdis: pid, ...backendPid(bench.backend) });
  sampler.start();
  cpu.start();
  const result = await runHttpLoad({ ...load, durationSeconds, newKey: newKeys('webdis') });
  const peakRssMb = sampler.stop();
  if (peer.webdis.process.exitCode !== null || peer.webdis.process.signalCode !== null) throw new Error(`webdis ended during the v2read load at ${count} connections`);
  const webdis: ServerMeasured = { ...result, cpuMicrosPerRequest: cpu.perOperation(result.ok + result.errors), peakRssMb };
  const vsWebdis = { reqPerSec: round(service.reqPerSec / webdis.reqPerSec), cpu: round(serverCpu(service) / (webdis.cpuMicrosPerRequest['webdis'] ?? 1)) };
  return { webdis, vsWebdis };
}

/** The naive proxy and the two floors under the same load as the service, and the service over them. */
async function measureBaselines(bench: StoreBench, baselines: Baselines, caseName: CaseName, count: number, service: ServerMeasured) {
  const naive = await measureServer(bench, baselines.naive, caseName, count);
  const vsNaive = {
    reqPerSec: round(service.reqPerSec / naive.reqPerSec),
    p99: round(service.latencyMs.p99 / naive.latencyMs.p99),
    cpu: round((service.cpuMicrosPerRequest['service'] ?? 0) / (naive.cpuMicrosPerRequest['service'] ?? 1)),
    peakRss: round(service.peakRssMb / naive.peakRssMb),
  };
  const floor = await measureServer(bench, baselines.floor, caseName, count);
  const koaFloor = await measureServer(bench, baselines.koaFloor, caseName, count);
  const overFloor = {
    service: round(serverCpu(service) / serverCpu(floor)),
    naive: round(serverCpu(naive) / serverCpu(floor)),
    koa: round(serverCpu(koaFloor) / serverCpu(floor)),
  };
  return { naive, vsNaive, floor, koaFloor, overFloor };
}

/** Fails the run, with the process's last lines, if a server process has ended. */
function serverAlive(service: ServiceProcess, pid: number, caseName: CaseName): void {
  const { exitCode, signalCode } = service.process;
  if (exitCode === null && signalCode === null) return;
  throw new Error(`the server process ${pid} ended (${exitCode ?? signalCode}) during ${caseName}:\n${service.output.slice(-20).join('\n')}`);
}

async function createTable(baseUrl: string, instance: string): Promise<void> {
  const response = await fetch(`${baseUrl}/v1/${instance}/createTable`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ tableName: TABLE, columnFamily: FAMILY }),
  });
  if (response.status !== 201) throw new Error(`createTable answered ${response.status}: ${await response.text()}`);
}

/** One request as the load generator sends it; throws unless the service answers 2xx. */
async function send(baseUrl: string, request: { method: string; path: string; headers?: Record<string, string>; body?: string }) {
  const response = await fetch(`${baseUrl}${request.path}`, request);
  const body = await response.text();
  if (!response.ok) throw new Error(`${request.method} ${request.path} answered ${response.status}: ${body}`);
  return JSON.parse(body) as { data?: unknown[]; cells?: unknown[]; rows?: unknown[] };
}

/** Before measuring anything: the service reads a preloaded row whole, and writes a new one, through v1 and v2; a scan page is full. */
async function checkService(baseUrl: string, store: string, instance: string): Promise<void> {
  const row = await send(baseUrl, readRequest(instance, preloadedKey(0)));
  if (row.data?.length !== CELLS.length) throw new Error(`readCellData returned ${row.data?.length} cells, expected ${CELLS.length}`);
  await send(baseUrl, insertRequest(instance, newKeys('check')()));
  const v2 = await send(baseUrl, v2ReadRequest(store, instance, preloadedKey(0)));
  if (v2.cells?.length !== CELLS.length) throw new Error(`v2 rows.get returned ${v2.cells?.length} cells, expected ${CELLS.length}`);
  await send(baseUrl, v2WriteRequest(store, instance, newKeys('check')()));
  const page = await send(baseUrl, v2ScanRequest(store, instance, preloadedKey(0)));
  if (page.rows?.length !== SCAN_PAGE_ROWS) throw new Error(`v2 rows.scan returned ${page.rows?.length} rows, expected ${SCAN_PAGE_ROWS}`);
}

async function inBatches(total: number, batch: number, task: (index: number) => Promise<unknown>): Promise<void> {
  for (let start = 0; start < total; start += batch) {
    await Promise.all(Array.from({ length: Math.min(batch, total - start) }, (_, offset) => task(start + offset)));
  }
}

function record(result: CaseResult): void {
  results.push(result);
  printRow(result);
}

function printHeader(): void {
  process.stdout.write(
    `${format(COLUMNS, '', '', '', 'ceiling', '', '', '', '', 'service', '', '', '', '', '', 'ratio', '')}\n` +
      `${format(COLUMNS, 'store', 'case', 'conns', 'req/s', 'p50 ms', 'p99 ms', 'max ms', 'err', 'req/s', 'p50 ms', 'p99 ms', 'max ms', 'err', 'RSS MB', 'req/s', 'p99')}\n`,
  );
}

function printRow(result: CaseResult): void {
  const figures = (load: LoadResult | undefined) =>
    load === undefined
      ? ['-', '-', '-', '-', '-']
      : [String(load.reqPerSec), fixed(load.latencyMs.p50), fixed(load.latencyMs.p99), fixed(load.latencyMs.max), String(load.errors)];
  const service = result.service;
  process.stdout.write(
    `${format(
      COLUMNS,
      result.store,
      result.case,
      String(result.connections),
      ...figures(result.ceiling),
      ...figures(service),
      String(service.peakRssMb),
      result.ratio === undefined ? '-' : fixed(result.ratio.reqPerSec),
      result.ratio === undefined ? '-' : fixed(result.ratio.p99),
    )}\n`,
  );
  const cpu = (load: Measured | undefined) => {
    if (load === undefined) return '';
    const parts = Object.entries(load.cpuMicrosPerRequest);
    const total = parts.reduce((sum, [, micros]) => sum + micros, 0);
    return `${parts.map(([name, micros]) => `${name} ${micros}`).join(' + ')} = ${total}`;
  };
  process.stdout.write(
    `          CPU µs/request: ${result.ceiling === undefined ? '' : `ceiling ${cpu(result.ceiling)}; `}service ${cpu(service)}\n`,
  );
  const { naive, vsNaive } = result;
  if (naive !== undefined && vsNaive !== undefined) {
    process.stdout.write(
      `          naive proxy: ${naive.reqPerSec} req/s, p50 ${fixed(naive.latencyMs.p50)} ms, p99 ${fixed(naive.latencyMs.p99)} ms, ` +
        `RSS ${naive.peakRssMb} MB, CPU µs/request ${cpu(naive)}\n` +
        `          kvcrud / naive proxy: req/s ${fixed(vsNaive.reqPerSec)}, p99 ${fixed(vsNaive.p99)}, server CPU per request ${fixed(vsNaive.cpu)}, peak RSS ${fixed(vsNaive.peakRss)}\n`,
    );
  }
  const { webdis, vsWebdis } = result;
  if (webdis !== undefined && vsWebdis !== undefined) {
    process.stdout.write(
      `          webdis (GET /HGETALL/<row hash>): ${webdis.reqPerSec} req/s, p50 ${fixed(webdis.latencyMs.p50)} ms, p99 ${fixed(webdis.latencyMs.p99)} ms, ` +
        `max ${fixed(webdis.latencyMs.max)} ms, err ${webdis.errors}, RSS ${webdis.peakRssMb} MB, CPU µs/request ${cpu(webdis)}\n` +
        `          kvcrud / webdis: req/s ${fixed(vsWebdis.reqPerSec)}, server CPU per request ${fixed(vsWebdis.cpu)}\n`,
    );
  }
  const { floor, koaFloor, overFloor } = result;
  if (floor !== undefined && koaFloor !== undefined && overFloor !== undefined) {
    const line = (name: string, load: ServerMeasured) =>
      `          ${name}: ${load.reqPerSec} req/s, p99 ${fixed(load.latencyMs.p99)} ms, RSS ${load.peakRssMb} MB, CPU µs/request ${cpu(load)}\n`;
    process.stdout.write(
      line('floor (node:http)', floor) +
        line('floor on Koa', koaFloor) +
        `          server CPU per request / floor's: kvcrud ${fixed(overFloor.service)}, naive proxy ${fixed(overFloor.naive)}, floor on Koa ${fixed(overFloor.koa)}\n`,
    );
  }
  for (const load of [result.ceiling, service, result.naive, result.floor, result.koaFloor, result.webdis]) {
    if (load?.firstError !== undefined) process.stdout.write(`          first error: ${load.firstError}\n`);
  }
}

/** The targets, checked against this run's figures at 32 connections. */
function printTargets(): void {
  const at32 = (store: string, caseName: CaseName) => results.find((r) => r.store === store && r.case === caseName && r.connections === 32);
  const lines: string[] = [];
  const check = (label: string, value: number | undefined, ok: (value: number) => boolean, unit = '') => {
    if (value === undefined) return;
    lines.push(`  ${ok(value) ? 'met    ' : 'MISSED '} ${label}: ${value}${unit}`);
  };
  for (const [caseName, what] of [['read', 'reads'], ['insert', 'writes']] as const) {
    const result = at32('bigtable', caseName);
    check(`bigtable ${CASE_LABELS[caseName]} ≥ 0.7 × the ceiling's ${what}/s at 32`, result?.ratio?.reqPerSec, (v) => v >= 0.7);
    check(`bigtable ${CASE_LABELS[caseName]} p99 ≤ 3 × the ceiling's p99 at 32`, result?.ratio?.p99, (v) => v <= 3);
    check(`bigtable ${CASE_LABELS[caseName]} peak RSS ≤ 300 MB at 32`, result?.service.peakRssMb, (v) => v <= 300, ' MB');
  }
  check('embedded readCellData ≥ 5,000 req/s at 32', at32('embedded', 'read')?.service.reqPerSec, (v) => v >= 5000);
  check(`redis ${CASE_LABELS.read} ≥ 0.7 × node-redis in-process at 32`, at32('redis', 'read')?.ratio?.reqPerSec, (v) => v >= 0.7);
  check('redis v2 get: server CPU per request ≤ 2.5 × Webdis\'s at 32', at32('redis', 'v2read')?.vsWebdis?.cpu, (v) => v <= 2.5, '×');
  check('embedded insertData ≥ 2,000 durable writes/s at 32', at32('embedded', 'insert')?.service.reqPerSec, (v) => v >= 2000);
  // Coalescing's targets: writes at most 0.6 × the naive proxy's CPU, reads 0.5 ×, and both below
  // the bare floor, the least a gateway making one call per request costs.
  for (const [caseName, throughput, cpu] of [['read', 1.25, 0.5], ['insert', 1.5, 0.6]] as const) {
    const vsNaive = at32('bigtable', caseName)?.vsNaive;
    const label = `bigtable ${CASE_LABELS[caseName]} vs the naive proxy at 32:`;
    check(`${label} server CPU per request ≤ ${cpu}×`, vsNaive?.cpu, (v) => v <= cpu, '×');
    check(`bigtable ${CASE_LABELS[caseName]} server CPU per request ≤ 1.0 × the bare floor's at 32`, at32('bigtable', caseName)?.overFloor?.service, (v) => v <= 1, '×');
    const overFloor = at32('bigtable', caseName)?.overFloor;
    if (overFloor !== undefined) {
      // No gateway goes below the floor, nor one on Koa below the floor on Koa.
      const half = 0.5 * overFloor.naive;
      const verdict = half < 1 ? 'below the floor: no gateway reaches it' : half < overFloor.koa ? 'below the floor on Koa: no gateway on Koa reaches it' : 'above both floors';
      lines.push(`          0.5 × the naive proxy's CPU is ${fixed(half)} × the floor's (the floor on Koa: ${fixed(overFloor.koa)}×): ${verdict}`);
    }
    check(`${label} throughput ≥ ${throughput}×`, vsNaive?.reqPerSec, (v) => v >= throughput, '×');
    check(`${label} p99 ≤ 1×`, vsNaive?.p99, (v) => v <= 1, '×');
  }
  const peak = Math.max(0, ...results.map((r) => r.service.peakRssMb));
  if (lines.length > 0) process.stdout.write(`\ntargets, this run:\n${lines.join('\n')}\n  peak service RSS over all loads: ${peak} MB\n`);
}

function format(template: string, ...values: string[]): string {
  let index = 0;
  return template.replace(/%(-?)(\d+)s/g, (_, left: string, width: string) => {
    const value = values[index++] ?? '';
    return left === '-' ? value.padEnd(Number(width)) : value.padStart(Number(width));
  });
}

function fixed(value: number): string {
  return value.toFixed(2);
}

function round(value: number): number {
  return Math.round(value * 100) / 100;
}

function positive(text: string, name: string): number {
  const value = Number(text);
  if (!(value > 0)) throw new Error(`--${name} must be a positive number, got "${text}"`);
  return value;
}

function list<T extends string>(text: string, allowed: readonly T[], name: string): T[] {
  const items = text.split(',').map((item) => item.trim());
  const unknown = items.filter((item) => !(allowed as readonly string[]).includes(item));
  if (unknown.length > 0) throw new Error(`--${name}: unknown ${unknown.join(', ')}; choose from ${allowed.join(', ')}`);
  return items as T[];
}
