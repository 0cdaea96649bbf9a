/**
 * `node bench/event-loop.ts [--store embedded|bigtable|redis|spanner] [--rounds N] [--writers N] [--cells N | --value-mib N]`:
 * how long the service's event loop is held by very large requests, through HTTP on one store
 * (the embedded one by default; the others on an emulator or redis-server of the run's own); then
 * the pieces of such a request that run on the main thread in one go, each timed in this process.
 * The built service (`npm run build` first) runs with no configuration but the store's; each round
 * sends N insertData requests of the largest row the store takes (100,000 cells; 10,000 on
 * Spanner) at once, then a readCellData of that row, while a /healthz probe asks every 5 ms; with
 * `--value-mib N`, a row of one text cell of N MiB instead.
 * Prints the slowest /healthz answer (idle and under the load) and the service's own
 * monitorEventLoopDelay maximum (`nodejs_eventloop_lag_max_seconds` on /metrics, reset by
 * each scrape), with the machine's load average: on a shared machine a delay may be the process
 * waiting for a core. So it also prints the service main thread's longest stretch of CPU time
 * between two ticks of a 1 ms timer (bench/loop-watch.ts, loaded into the service), which waiting
 * for a core does not lengthen: the figure to hold to the 50 ms target.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { parseInPieces } from '../src/http/json/json-pieces.ts';
import { tallTextBytes } from '../src/http/json/tall-text.ts';
import { cellBytes, cellEncoding, toCellOutput } from '../src/http/v1/cells.ts';
import { insertDataBody } from '../src/http/v1/schemas.ts';
import { validate } from '../src/http/validation/validate.ts';
import { withTimestamps } from '../src/service/mutations.ts';
import { BIGTABLE_LIMITS } from '../src/store/bigtable/limits.ts';
import { EMBEDDED_LIMITS } from '../src/store/embedded/limits.ts';
import { REDIS_LIMITS } from '../src/store/redis/limits.ts';
import { SPANNER_LIMITS } from '../src/store/spanner/limits.ts';
import { spawnEmulator } from '../test/support/emulator.ts';
import { StallMonitor, type Stalls } from '../test/support/loop-stalls.ts';
import { spawnRedis } from '../test/support/redis-server.ts';
import { cleanEnv, runService } from '../test/support/service-process.ts';
import { spawnSpannerEmulator } from '../test/support/spanner-emulator.ts';

const ROOT = new URL('../', import.meta.url).pathname;
const STORES = ['embedded', 'bigtable', 'redis', 'spanner'] as const;
type StoreName = (typeof STORES)[number];
const { values: args } = parseArgs({
  options: {
    store: { type: 'string', default: 'embedded' },
    rounds: { type: 'string', default: '3' },
    writers: { type: 'string', default: '3' },
    cells: { type: 'string' },
    'value-mib': { type: 'string' },
  },
});
if (!(STORES as readonly string[]).includes(args.store)) throw new Error(`--store is one of ${STORES.join(', ')}`);
const store = args.store as StoreName;
const LIMITS = { embedded: EMBEDDED_LIMITS, bigtable: BIGTABLE_LIMITS, redis: REDIS_LIMITS, spanner: SPANNER_LIMITS };
const rounds = Number(args.rounds);
const writers = Number(args.writers);
const valueMib = args['value-mib'] === undefined ? undefined : Number(args['value-mib']);
// The largest write the store takes, unless told.
const cellCount = valueMib === undefined ? Number(args.cells ?? Math.min(100_000, LIMITS[store].mutationsPerRow)) : 1;
const cellsText = valueMib === undefined ? `${cellCount.toLocaleString('en-US')} cells` : `one cell of ${valueMib} MiB`;
// The embedded store serves `local` with no configuration; the others are given this one.
const INSTANCE = store === 'embedded' ? 'local' : 'loop-bench';
const PROJECT = 'bench-project';

const body = JSON.stringify({
  tableName: 'wide',
  rowKeyId: 'wide',
  data:
    valueMib === undefined
      ? Array.from({ length: cellCount }, (_, i) => ({ columnFamily: 'cf', columnName: `column ${i}`, columnValue: `value ${i}` }))
      : [{ columnFamily: 'cf', columnName: 'tall', columnValue: 'v'.repeat(valueMib * 1024 * 1024) }],
});

/** The store's server, started for this run (none for the embedded store), and the service's settings for it. */
async function startBackend(directory: string): Promise<{ vars: Record<string, string>; stop: () => void }> {
  const storesFile = join(directory, 'stores.yaml');
  switch (store) {
    case 'embedded':
      return { vars: { DATA_DIR: directory }, stop: () => {} };
    case 'bigtable': {
      const emulator = await spawnEmulator();
      return {
        // The emulator takes time quadratic in a row's new columns (29 s for 100,000; docs/stores/bigtable.md):
        // past the default deadline the writes would answer 504 and the read-back never run.
        vars: { GOOGLE_CLOUD_PROJECT: PROJECT, INSTANCE_IDS: INSTANCE, BIGTABLE_EMULATOR_HOST: emulator.host, STORE_TIMEOUT_MS: '120000' },
        stop: () => emulator.process.kill('SIGTERM'),
      };
    }
    case 'redis': {
      const redis = await spawnRedis();
      writeFileSync(storesFile, `stores:\n  redis: { driver: redis, url: "${redis.url}", instances: [${INSTANCE}] }\n`);
      return { vars: { STORES_FILE: storesFile }, stop: () => redis.process.kill('SIGTERM') };
    }
    case 'spanner': {
      const emulator = await spawnSpannerEmulator();
      writeFileSync(
        storesFile,
        `stores:\n  spanner: { driver: spanner, projectId: ${PROJECT}, instance: bench, emulatorHost: "${emulator.host}", instances: [${INSTANCE}] }\n`,
      );
      return { vars: { STORES_FILE: storesFile }, stop: () => emulator.process.kill('SIGTERM') };
    }
  }
}

const directory = mkdtempSync(join(tmpdir(), 'kvcrud-bench-event-loop-'));
const backend = await startBackend(directory);
// A cell of more than the default 10 MiB body needs a larger bound.
const bodyVars: Record<string, string> = body.length > 10 * 1024 * 1024 ? { MAX_BODY_BYTES: String(body.length + 1024 * 1024) } : {};
const service = await runService(cleanEnv({ PORT: '0', ...backend.vars, ...bodyVars }), [
  process.execPath,
  '--import',
  join(ROOT, 'bench/loop-watch.ts'),
  join(ROOT, 'dist/index.js'),
]).catch((error: unknown) => {
  backend.stop();
  throw error;
});
/** What the service's main thread saw since it was last asked (bench/loop-watch.ts). */
const loopStalls = async (): Promise<Stalls> => {
  const seen = service.output.length;
  process.kill(service.process.pid ?? 0, 'SIGUSR2');
  for (;;) {
    const line = service.output.slice(seen).find((text) => text.startsWith('loop-stalls '));
    if (line !== undefined) return JSON.parse(line.slice('loop-stalls '.length)) as Stalls;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
};
try {
  const url = service.baseUrl;
  const post = async (path: string, payload: string) => {
    const response = await fetch(`${url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: payload });
    await response.arrayBuffer();
    return response.status;
  };
  const created = await post(`/v1/${INSTANCE}/createTable`, JSON.stringify({ tableName: 'wide', columnFamily: 'cf' }));
  if (created !== 201) throw new Error(`createTable answered ${created}`);
  const lagMaxMs = async () => {
    const text = await (await fetch(`${url}/metrics`)).text();
    return Number(/^nodejs_eventloop_lag_max_seconds (\S+)/m.exec(text)?.[1]) * 1000;
  };

  // Each scrape resets the maximum: the first one drops the start-up's.
  await lagMaxMs();
  await loopStalls();
  let worst = 0;
  let probing = true;
  const probe = (async () => {
    while (probing) {
      const started = performance.now();
      await (await fetch(`${url}/healthz`)).arrayBuffer();
      worst = Math.max(worst, performance.now() - started);
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
  })();
  await new Promise((resolve) => setTimeout(resolve, 1000));
  const idleWorst = worst;
  const idleLag = await lagMaxMs();
  const idleStalls = await loopStalls();
  worst = 0;

  const statuses: string[] = [];
  const started = performance.now();
  for (let round = 0; round < rounds; round++) {
    statuses.push(...(await Promise.all(Array.from({ length: writers }, () => post(`/v1/${INSTANCE}/insertData`, body)))).map(String));
    const read = await fetch(`${url}/v1/${INSTANCE}/readCellData?tableName=wide&id=wide`);
    const answer = await read.arrayBuffer();
    statuses.push(`${read.status} (${(answer.byteLength / 1e6).toFixed(1)} MB)`);
  }
  const seconds = (performance.now() - started) / 1000;
  probing = false;
  await probe;
  const lag = await lagMaxMs();
  const stalls = await loopStalls();

  process.stdout.write(
    `event loop on the ${store} store under ${rounds} rounds of ${writers} insertData of ${cellsText} ` +
      `(${(body.length / 1e6).toFixed(1)} MB each) and a readCellData of the row: ${cpus().length} × ${cpus()[0]?.model ?? '?'}, ` +
      `${Math.round(totalmem() / 2 ** 30)} GB, Node ${process.version}, load average ${loadavg()[0]?.toFixed(2)}\n` +
      `  answers: ${statuses.join(', ')} in ${seconds.toFixed(1)} s\n` +
      `  /healthz every 5 ms: slowest ${worst.toFixed(0)} ms (idle: ${idleWorst.toFixed(0)} ms)\n` +
      `  service event-loop delay max: ${lag.toFixed(0)} ms (idle: ${idleLag.toFixed(0)} ms)\n` +
      `  service main thread, longest CPU stretch between two 1 ms ticks: ${stalls.maxCpuStretchMs} ms (idle: ${idleStalls.maxCpuStretchMs} ms); ` +
      `longest gap ${stalls.longestGapMs} ms, of which its own CPU ${stalls.longestGapCpuMs} ms\n`,
  );
} finally {
  await service.stop('SIGTERM');
  backend.stop();
  rmSync(directory, { recursive: true, force: true });
}

/**
 * The request's pieces, timed alone. Serializing is one stretch of the main thread; parsing,
 * validation and the mappings yield between slices in the service (for parsing and validation,
 * their longest stretch is given).
 */
const timed = (label: string, run: () => unknown) => {
  const started = performance.now();
  const result = run();
  process.stdout.write(`  ${label}: ${(performance.now() - started).toFixed(0)} ms\n`);
  return result;
};
/** Runs `run` under a StallMonitor, and prints how long it took in all and its longest stretch. */
const sliced = async <T>(label: string, run: () => Promise<T>): Promise<T> => {
  const monitor = new StallMonitor();
  monitor.start();
  const started = performance.now();
  const result = await run();
  const stalls = monitor.stop();
  process.stdout.write(`  ${label}: ${(performance.now() - started).toFixed(0)} ms in all, its longest stretch ${stalls.maxCpuStretchMs} ms\n`);
  return result;
};
process.stdout.write(`the pieces of one insertData and one readCellData of ${cellsText}, on the main thread:\n`);
const raw = Buffer.from(body);
const text = timed('strict UTF-8 decoding of the body', () => new TextDecoder('utf-8', { fatal: true }).decode(raw)) as string;
timed('JSON.parse of the body in one go (for comparison)', () => JSON.parse(text));
const parsed = await sliced('parsing the body in pieces, as the service does', () => parseInPieces(text, JSON.parse));
const valid = await sliced('validation', () => validate<{ data: Array<{ columnFamily: string; columnName: string; columnValue: string }> }>(insertDataBody, parsed));
const tallValues = await sliced('tall values to bytes, as the service does', () => tallTextBytes(valid.data, (cell) => cell.columnValue, cellEncoding));
const mutations = timed('cells to row mutations (in all; the service works in 5 ms slices)', () =>
  withTimestamps(
    valid.data.map((cell) => ({ type: 'set' as const, family: cell.columnFamily, ...cellBytes(cell, tallValues.get(cell)) })),
    1_764_000_000_000_000n,
  ),
) as Array<{ family: string; column: Buffer; value: Buffer; timestampMicros: bigint }>;
const answer = timed('stored cells to answer cells (in all; sliced likewise)', () => mutations.map((cell) => toCellOutput(cell))) as unknown[];
timed(valueMib === undefined ? 'JSON.stringify of the answer' : 'JSON.stringify of the answer (the service sends the value as its bytes)', () => JSON.stringify({ instanceID: 'local', tableName: 'wide', rowKeyId: 'wide', data: answer }));
