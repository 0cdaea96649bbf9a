/**
 * npm run soak [-- --duration 180 --interval 10 --connections 16 --window 300 --redis redis://127.0.0.1:6380 | --spanner 127.0.0.1:9010]
 *                [--instance NAME]
 *
 * Holds a steady mixed load (half writes of 1 KiB rows, half reads of written rows) on the real
 * service, started as its own process, for a bounded time, and prints per interval: requests/s,
 * latency p50/p99/max, non-2xx answers, connection errors, and the service's RSS. At the end it
 * compares RSS after warm-up with RSS at the end, to show whether memory grows under steady load.
 *
 * The embedded store in a temporary directory by default; with BIGTABLE_EMULATOR_HOST set, Bigtable
 * through that emulator; with --redis, the Redis store on that server, and with --spanner, the
 * Spanner store on that emulator (each from a STORES_FILE).
 *
 * --instance names the instance (Bigtable, Redis, Spanner) and lets the soak carry on with a table
 * an earlier soak left there. A second, short soak on the first one's data, with a new service
 * process, tells whether a slowdown lives in the service or in the store: the service starts
 * afresh, the stored rows do not.
 *
 * Each interval also prints how long a fixed reference work took in this process (the median of
 * samples every 5 s, bench/machine-speed.ts): when it rises with the service's CPU per request, the
 * machine slowed, not the service.
 *
 * When the run is long enough, it ends with the steady-state checks of docs/performance.md: the
 * last 5 minutes against the first 5 after warm-up (the first two intervals) for throughput and
 * p99, and RSS growth after warm-up.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { parseArgs } from 'node:util';
import { referenceWorkMs } from '../bench/machine-speed.ts';
import { cpuTimeMs } from '../bench/proc-stats.ts';
import autocannon from 'autocannon';

const { values } = parseArgs({
  options: {
    duration: { type: 'string', default: '180' },
    interval: { type: 'string', default: '10' },
    connections: { type: 'string', default: '16' },
    redis: { type: 'string' },
    spanner: { type: 'string' },
    // The length of the first and last windows the steady-state checks compare.
    window: { type: 'string', default: '300' },
    instance: { type: 'string' },
  },
});
const durationS = Number(values.duration);
const intervalS = Number(values.interval);
const connections = Number(values.connections);
if (!(durationS > 0 && intervalS > 0 && connections > 0)) {
  process.stderr.write('usage: npm run soak -- [--duration seconds] [--interval seconds] [--connections n]\n');
  process.exit(2);
}

const ROOT = new URL('../', import.meta.url).pathname;
const emulator = process.env['BIGTABLE_EMULATOR_HOST'];
const fromStoresFile = values.redis !== undefined || values.spanner !== undefined;
if (values.instance !== undefined && emulator === undefined && !fromStoresFile) {
  // The embedded store serves one instance, in a data directory the soak removes when it ends.
  process.stderr.write('--instance needs BIGTABLE_EMULATOR_HOST, --redis or --spanner: the embedded store has only the instance "local"\n');
  process.exit(2);
}
const dataDir = mkdtempSync(join(tmpdir(), 'kvcrud-soak-'));
const instance = values.instance ?? (emulator === undefined && !fromStoresFile ? 'local' : `soak-${process.pid}`);
const storesFile = join(dataDir, 'stores.yaml');
if (values.redis !== undefined) writeFileSync(storesFile, `stores:\n  redis: { driver: redis, url: "${values.redis}", instances: [${instance}] }\n`);
if (values.spanner !== undefined) {
  const spanner = `{ driver: spanner, projectId: kvcrud-soak, instance: soak, emulatorHost: "${values.spanner}", instances: [${instance}] }`;
  writeFileSync(storesFile, `stores:\n  spanner: ${spanner}\n`);
}
const storeName = values.redis !== undefined ? `redis at ${values.redis}` : values.spanner !== undefined ? `spanner at ${values.spanner}` : emulator === undefined ? 'embedded store' : `bigtable at ${emulator}`;
const env = {
  PATH: process.env['PATH'] ?? '',
  PORT: '0',
  ...(fromStoresFile
    ? { STORES_FILE: storesFile }
    : emulator === undefined
      ? { DATA_DIR: dataDir }
      : { BIGTABLE_EMULATOR_HOST: emulator, GOOGLE_CLOUD_PROJECT: 'kvcrud-soak', INSTANCE_IDS: instance }),
};

// The service, as in production: its own process, its own log on stdout.
const service = spawn(process.execPath, ['src/index.ts'], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'inherit'] });
const port = await new Promise<number>((resolve, reject) => {
  createInterface({ input: service.stdout }).on('line', (line) => {
    const match = /"port":(\d+)/.exec(line);
    if (match?.[1] !== undefined && line.includes('listening')) resolve(Number(match[1]));
  });
  service.once('exit', (code) => reject(new Error(`the service exited (${code}) before listening`)));
});
const baseUrl = `http://127.0.0.1:${port}`;
const rssMiB = () => {
  const status = readFileSync(`/proc/${service.pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0) / 1024;
};

const table = 'soak';
const created = await fetch(`${baseUrl}/v1/${instance}/createTable`, {
  method: 'POST',
  headers: { 'content-type': 'application/json' },
  body: JSON.stringify({ tableName: table, columnFamily: 'cf' }),
});
// A named instance may hold an earlier soak's table: carry on with its rows.
const reused = values.instance !== undefined && created.status === 409;
if (created.status !== 201 && !reused) throw new Error(`createTable answered ${created.status}`);

// 10,000 rows, rewritten over and over: the table grows by versions, as a busy real table would.
const ROWS = 10_000;
const value = 'v'.repeat(1024);
let sequence = 0;
const writeBody = (row: number) =>
  JSON.stringify({ tableName: table, rowKeyId: `row-${row}`, data: [{ columnFamily: 'cf', columnName: 'c', columnValue: value }] });

interface Interval {
  latencies: number[];
  non2xx: number;
  errors: number;
  /** The reference work's time, sampled every 5 s. */
  reference: number[];
}
const newInterval = (): Interval => ({ latencies: [], non2xx: 0, errors: 0, reference: [] });
let current = newInterval();
const statuses = new Map<number, number>();

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? 0;
const percentile = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? 0;
const table_ = (cells: Array<string | number>) => cells.map((cell) => String(cell).padStart(9)).join(' ');

process.stdout.write(
  `kvcrud soak: ${storeName}, ${connections} connections, ` +
    `${durationS} s, half writes (1 KiB) and half reads, pid ${service.pid}` +
    `${reused ? `, on the rows already in table ${table} of ${instance}` : ''}\n`,
);
// CPU per request of the service: flat while throughput falls means the backend slowed, not kvcrud.
process.stdout.write(`${table_(['t (s)', 'req/s', 'p50 ms', 'p99 ms', 'max ms', 'non-2xx', 'errors', 'RSS MiB', 'CPU µs/req', 'ref ms'])}\n`);

let finish: (result: autocannon.Result) => void = () => {};
const finished = new Promise<autocannon.Result>((resolve) => (finish = resolve));
const run = autocannon({
  url: baseUrl,
  connections,
  duration: durationS,
  requests: [
    {
      method: 'POST',
      path: `/v1/${instance}/insertData`,
      headers: { 'content-type': 'application/json' },
      setupRequest: (request) => ({ ...request, body: writeBody(sequence++ % ROWS) }),
    },
    {
      method: 'GET',
      setupRequest: (request) => ({ ...request, path: `/v1/${instance}/readCellData?tableName=${table}&id=row-${(sequence * 7919) % Math.min(sequence, ROWS)}` }),
    },
  ],
}, (error, result) => {
  if (error) throw error;
  finish(result);
});
run.on('response', (_client, statusCode, _bytes, responseTime) => {
  current.latencies.push(responseTime);
  statuses.set(statusCode, (statuses.get(statusCode) ?? 0) + 1);
  // A read can race the first write of its row: a 404 ROW_NOT_FOUND there is not a failure.
  if (statusCode >= 300 && statusCode !== 404) current.non2xx += 1;
});
run.on('reqError', () => {
  current.errors += 1;
});

const started = Date.now();
const rssSamples: number[] = [];
/** Per interval: requests answered and their latencies, for the steady-state checks. */
const intervals: number[][] = [];
/** Per interval: the median time of the reference work. */
const references: number[] = [];
const sampler = setInterval(() => current.reference.push(referenceWorkMs()), 5000);
let lastCpuMs = cpuTimeMs(service.pid ?? 0);
const report = () => {
  const interval = current;
  current = newInterval();
  const sorted = interval.latencies.sort((a, b) => a - b);
  intervals.push(sorted);
  const reference = median(interval.reference);
  references.push(reference);
  const cpuMs = cpuTimeMs(service.pid ?? 0);
  const cpuPerRequest = sorted.length === 0 ? 0 : ((cpuMs - lastCpuMs) * 1000) / sorted.length;
  lastCpuMs = cpuMs;
  const rss = rssMiB();
  rssSamples.push(rss);
  process.stdout.write(
    `${table_([
      Math.round((Date.now() - started) / 1000),
      Math.round(sorted.length / intervalS),
      percentile(sorted, 50).toFixed(1),
      percentile(sorted, 99).toFixed(1),
      (sorted.at(-1) ?? 0).toFixed(1),
      interval.non2xx,
      interval.errors,
      rss.toFixed(1),
      Math.round(cpuPerRequest),
      reference.toFixed(2),
    ])}\n`,
  );
};
const timer = setInterval(report, intervalS * 1000);
const result = await finished;
clearInterval(timer);
clearInterval(sampler);

const afterWarmUp = rssSamples[Math.min(1, rssSamples.length - 1)] ?? 0;
const last = rssSamples.at(-1) ?? 0;
process.stdout.write(
  `\ntotal: ${result.requests.total} requests, ${Math.round(result.requests.average)} req/s average, ` +
    `latency p50 ${result.latency.p50} ms, p99 ${result.latency.p99} ms, max ${result.latency.max} ms\n` +
    `answers by status: ${JSON.stringify(Object.fromEntries([...statuses].sort(([a], [b]) => a - b)))}; ` +
    `connection errors ${result.errors}, timeouts ${result.timeouts}\n` +
    `RSS: ${afterWarmUp.toFixed(1)} MiB after the first two intervals, ${last.toFixed(1)} MiB at the end ` +
    `(${(last - afterWarmUp >= 0 ? '+' : '') + (last - afterWarmUp).toFixed(1)} MiB), peak ${Math.max(...rssSamples).toFixed(1)} MiB\n`,
);

// Steady state: the first 5 minutes (--window) after warm-up against the last 5.
const window = Math.max(1, Math.round(Number(values.window) / intervalS));
if (intervals.length >= 2 + 2 * window) {
  const summary = (part: number[][]) => {
    const all = part.flat().sort((a, b) => a - b);
    return { reqPerSec: all.length / (part.length * intervalS), p99: percentile(all, 99) };
  };
  const first = summary(intervals.slice(2, 2 + window));
  const lastFive = summary(intervals.slice(-window));
  const firstReference = median(references.slice(2, 2 + window));
  const lastReference = median(references.slice(-window));
  const throughput = lastFive.reqPerSec / first.reqPerSec;
  const growth = last - afterWarmUp;
  const verdict = (ok: boolean) => (ok ? 'met   ' : 'MISSED');
  process.stdout.write(
    `steady state, first ${window * intervalS} s after warm-up → last ${window * intervalS} s:\n` +
      `  ${verdict(throughput >= 0.9)} throughput ${Math.round(first.reqPerSec)} → ${Math.round(lastFive.reqPerSec)} req/s (${throughput.toFixed(2)}×, target ≥ 0.9×)\n` +
      `  ${verdict(lastFive.p99 <= first.p99 * 1.25)} p99 ${first.p99.toFixed(1)} → ${lastFive.p99.toFixed(1)} ms (flat: at most 1.25×)\n` +
      `  ${verdict(growth < 20)} RSS growth after warm-up ${growth.toFixed(1)} MiB (target < 20 MiB)\n` +
      `  the machine: the reference work took ${firstReference.toFixed(2)} → ${lastReference.toFixed(2)} ms (${(lastReference / firstReference).toFixed(2)}×)\n`,
  );
}

service.kill('SIGTERM');
await new Promise((resolve) => service.once('exit', resolve));
rmSync(dataDir, { recursive: true, force: true });
