/**
 * npm run soak [-- --duration 180 --interval 10 --connections 16 --redis redis://127.0.0.1:6380]
 *
 * Holds a steady mixed load (half writes of 1 KiB rows, half reads of written rows) on the real
 * service, started as its own process, for a bounded time, and prints per interval: requests/s,
 * latency p50/p99/max, non-2xx answers, connection errors, and the service's RSS. At the end it
 * compares RSS after warm-up with RSS at the end, to show whether memory grows under steady load.
 *
 * The embedded store in a temporary directory by default; with BIGTABLE_EMULATOR_HOST set, Bigtable
 * through that emulator; with --redis, the Redis store on that server (from a STORES_FILE).
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { parseArgs } from 'node:util';
import autocannon from 'autocannon';

const { values } = parseArgs({
  options: {
    duration: { type: 'string', default: '180' },
    interval: { type: 'string', default: '10' },
    connections: { type: 'string', default: '16' },
    redis: { type: 'string' },
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
const dataDir = mkdtempSync(join(tmpdir(), 'kvcrud-soak-'));
const instance = emulator === undefined && values.redis === undefined ? 'local' : `soak-${process.pid}`;
const storesFile = join(dataDir, 'stores.yaml');
if (values.redis !== undefined) writeFileSync(storesFile, `stores:\n  redis: { driver: redis, url: "${values.redis}", instances: [${instance}] }\n`);
const env = {
  PATH: process.env['PATH'] ?? '',
  PORT: '0',
  ...(values.redis !== undefined
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
if (created.status !== 201) throw new Error(`createTable answered ${created.status}`);

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
}
let current: Interval = { latencies: [], non2xx: 0, errors: 0 };
const statuses = new Map<number, number>();

const percentile = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? 0;
const table_ = (cells: Array<string | number>) => cells.map((cell) => String(cell).padStart(9)).join(' ');

process.stdout.write(
  `kvcrud soak: ${values.redis !== undefined ? `redis at ${values.redis}` : emulator === undefined ? 'embedded store' : `bigtable at ${emulator}`}, ${connections} connections, ` +
    `${durationS} s, half writes (1 KiB) and half reads, pid ${service.pid}\n`,
);
process.stdout.write(`${table_(['t (s)', 'req/s', 'p50 ms', 'p99 ms', 'max ms', 'non-2xx', 'errors', 'RSS MiB'])}\n`);

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
const report = () => {
  const interval = current;
  current = { latencies: [], non2xx: 0, errors: 0 };
  const sorted = interval.latencies.sort((a, b) => a - b);
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
    ])}\n`,
  );
};
const timer = setInterval(report, intervalS * 1000);
const result = await finished;
clearInterval(timer);

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

service.kill('SIGTERM');
await new Promise((resolve) => service.once('exit', resolve));
rmSync(dataDir, { recursive: true, force: true });
