/**
 * `node bench/embedded.ts <what> [options]`: the embedded store measured against a baseline build
 * of the same store from another git revision (default: main), both in the same run, so that the
 * ratios hold on a shared machine. See bench/README.md, "The embedded store".
 *
 *   store      throughput of v1-shaped reads and durable writes at the store's interface, in process
 *              (32 callers in a closed loop), and the event loop's delay under a mixed load with
 *              100,000-cell writes and large reads or scans
 *   versions   µs per read of the latest version, for rows with 1, 2, 1,000 and 10,000 versions per column
 *   http       readCellData and insertData through HTTP (autocannon, 32 connections), each build's
 *              service in turn (builds the baseline into a temporary directory)
 *   retention  a rewrite load on 10,000 rows, with and without maxVersions 1 (current build only):
 *              disk, write and read figures over time
 *
 * Options: --baseline REF (main), --duration S (10), --rounds N (2: each measurement alternates
 * baseline and current N times), --connections N (32).
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync, statSync, symlinkSync } from 'node:fs';
import { cpus, loadavg, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { createHistogram, performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { StallMonitor, formatStalls } from '../test/support/loop-stalls.ts';
import { cleanEnv, runService } from '../test/support/service-process.ts';
import { insertRequest, readRequest, runHttpLoad } from './http-load.ts';
import { CpuMeter, RssSampler } from './proc-stats.ts';
import { FAMILY, PRELOADED_ROWS, TABLE, newKeys, preloadedKey } from './workload.ts';

const ROOT = new URL('../', import.meta.url).pathname;
const { values: args, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    baseline: { type: 'string', default: 'main' },
    duration: { type: 'string', default: '10' },
    rounds: { type: 'string', default: '2' },
    connections: { type: 'string', default: '32' },
  },
});
const durationMs = Number(args.duration) * 1000;
const rounds = Number(args.rounds);
const connections = Number(args.connections);
const what = positionals[0] ?? 'store';

/** What both builds of the store offer: the v1 methods. */
interface V1Store {
  createTable(ref: Ref, families: string[], options: Options): Promise<void>;
  writeRow(ref: Ref, key: Buffer, cells: CellWrite[], options: Options): Promise<void>;
  readRow(ref: Ref, key: Buffer, options: Options): Promise<unknown[] | null>;
  scanRows(ref: Ref, scan: object, options: Options): AsyncIterable<unknown>;
  close(): Promise<void>;
}
interface Ref {
  instance: string;
  table: string;
}
interface Options {
  deadline: number;
}
interface CellWrite {
  family: string;
  qualifier: Buffer;
  value: Buffer;
  timestampMicros: bigint;
}
interface Build {
  readonly name: string;
  open(dataDir: string): Promise<V1Store>;
}

const ref = { instance: 'local', table: TABLE };
const options = () => ({ deadline: Date.now() + 60_000 });
const cells = (timestampMicros = 1_000_000n): CellWrite[] => [
  { family: FAMILY, qualifier: Buffer.from('status'), value: Buffer.from('shipped'), timestampMicros },
  { family: FAMILY, qualifier: Buffer.from('note'), value: Buffer.from('x'.repeat(100)), timestampMicros },
];

process.stdout.write(
  `embedded store bench (${what}): ${cpus().length} × ${cpus()[0]?.model ?? '?'}, ${Math.round(totalmem() / 2 ** 30)} GB, ` +
    `Node ${process.version}, load average ${loadavg()[0]?.toFixed(2)}; baseline ${args.baseline} (${revision(args.baseline)}), ` +
    `current ${revision('HEAD')}${dirty() ? ' + uncommitted changes' : ''}\n`,
);
const baselineTree = extract(args.baseline);
const builds: Build[] = [await sourceBuild('baseline', join(baselineTree, 'src')), await sourceBuild('current', join(ROOT, 'src'))];

switch (what) {
  case 'store':
    await benchStore();
    break;
  case 'versions':
    await benchVersions();
    break;
  case 'http':
    await benchHttp();
    break;
  case 'retention':
    await benchRetention();
    break;
  default:
    throw new Error(`unknown measurement "${what}": store, versions, http or retention`);
}
rmSync(baselineTree, { recursive: true, force: true });

async function benchStore(): Promise<void> {
  for (let round = 1; round <= rounds; round++) {
    for (const build of builds) {
      await withStore(build, async (store) => {
        await preload(store);
        const reads = await closedLoop(connections, durationMs, () => store.readRow(ref, Buffer.from(randomKey()), options()));
        const writeKey = newKeys(build.name);
        const writes = await closedLoop(connections, durationMs, () => store.writeRow(ref, Buffer.from(writeKey()), cells(), options()));
        line(`round ${round} ${build.name.padEnd(8)} reads/s ${fmt(reads.perSecond)} (p50 ${reads.p50} ms, p99 ${reads.p99} ms, CPU ${reads.cpuMicros} µs/op)`);
        line(`round ${round} ${build.name.padEnd(8)} durable writes/s ${fmt(writes.perSecond)} (p50 ${writes.p50} ms, p99 ${writes.p99} ms, CPU ${writes.cpuMicros} µs/op)`);
        const mixed = await mixedLoad(store, build.name);
        line(
          `round ${round} ${build.name.padEnd(8)} mixed load with 100,000-cell writes: ${formatStalls(mixed.stalls)}; small reads ${fmt(mixed.smallReads)}/s (max ${mixed.smallReadMaxMs} ms), ` +
            `100,000-cell writes ${mixed.bigWrites} (slowest ${mixed.bigWriteMaxMs} ms), large reads ${mixed.bigReads} (slowest ${mixed.bigReadMaxMs} ms)`,
        );
      });
    }
  }
}

/**
 * 16 callers reading small rows, 4 writing small rows, one writing 100,000 cells at a time, one
 * reading the 100,000-cell row whole and one scanning 1,000-row pages of the table, while monitorEventLoopDelay watches the main thread.
 */
async function mixedLoad(store: V1Store, name: string) {
  const wide = Array.from({ length: 100_000 }, (_, i) => ({
    family: FAMILY,
    qualifier: Buffer.from(`c${i}`),
    value: Buffer.from(`value ${i}`),
    timestampMicros: 1_000_000n,
  }));
  await store.writeRow(ref, Buffer.from('wide'), wide, options());
  const monitor = new StallMonitor();
  const smallReads = createHistogram();
  const bigWrites = createHistogram();
  const bigReads = createHistogram();
  const until = performance.now() + durationMs;
  const timed = async (histogram: ReturnType<typeof createHistogram>, call: () => Promise<unknown>) => {
    const started = performance.now();
    await call();
    histogram.record(Math.max(1, Math.round((performance.now() - started) * 1000)));
  };
  // Each call starts from an event-loop turn of its own, as requests arriving over HTTP do; a
  // store that answers synchronously would otherwise run the whole load as one microtask chain.
  const loop = async (task: () => Promise<unknown>) => {
    while (performance.now() < until) {
      await new Promise(setImmediate);
      await task();
    }
  };
  const writeKey = newKeys(`mixed-${name}`);
  monitor.start();
  await Promise.all([
    ...Array.from({ length: 16 }, () => loop(() => timed(smallReads, () => store.readRow(ref, Buffer.from(randomKey()), options())))),
    ...Array.from({ length: 4 }, () => loop(() => store.writeRow(ref, Buffer.from(writeKey()), cells(), options()))),
    loop(() => timed(bigWrites, () => store.writeRow(ref, Buffer.from('wide'), wide, options()))),
    loop(() => timed(bigReads, () => store.readRow(ref, Buffer.from('wide'), options()))),
    loop(async () => {
      for await (const row of store.scanRows(ref, { range: {}, reverse: false, limit: 1000, versions: 1 }, options())) void row;
    }),
  ]);
  return {
    stalls: monitor.stop(),
    smallReads: Math.round(smallReads.count / (durationMs / 1000)),
    smallReadMaxMs: Math.round(smallReads.max / 100) / 10,
    bigWrites: bigWrites.count,
    bigWriteMaxMs: Math.round(bigWrites.max / 1000),
    bigReads: bigReads.count,
    bigReadMaxMs: Math.round(bigReads.max / 1000),
  };
}

async function benchVersions(): Promise<void> {
  const columns = 10;
  for (let round = 1; round <= rounds; round++) {
    for (const build of builds) {
      await withStore(build, async (store) => {
        await store.createTable(ref, [FAMILY], options());
        for (const [key, versions] of [['one', 1], ['two', 2], ['thousand', 1000], ['ten thousand', 10_000]] as const) {
          for (let version = 0; version < versions; version += 100) {
            const batch: CellWrite[] = [];
            for (let v = version; v < Math.min(versions, version + 100); v++) {
              for (let c = 0; c < columns; c++) {
                batch.push({ family: FAMILY, qualifier: Buffer.from(`c${c}`), value: Buffer.from(`v${v}`), timestampMicros: BigInt(v + 1) * 1000n });
              }
            }
            await store.writeRow(ref, Buffer.from(key), batch, options());
          }
        }
        // Sequential reads: the latency of one read (wall clock), and the CPU time it costs the
        // process (every thread), which a busy machine inflates less.
        const perRead = async (key: string) => {
          for (let i = 0; i < 100; i++) await store.readRow(ref, Buffer.from(key), options());
          const cpu = process.cpuUsage();
          const started = performance.now();
          // 2,000 reads, or as many as 3 seconds allow.
          let reads = 0;
          while (reads < 2000 && performance.now() - started < 3000) {
            await store.readRow(ref, Buffer.from(key), options());
            reads++;
          }
          const used = process.cpuUsage(cpu);
          return `${Math.round(((performance.now() - started) * 1000) / reads)} µs (CPU ${Math.round((used.user + used.system) / reads)} µs)`;
        };
        const figures = [];
        for (const [key, label] of [['one', '1'], ['two', '2'], ['thousand', '1,000'], ['ten thousand', '10,000']]) {
          figures.push(`${label} ${await perRead(key as string)}`);
        }
        line(`round ${round} ${build.name.padEnd(8)} read of the latest of ${columns} columns, by versions per column: ${figures.join(', ')}`);
      });
    }
  }
}

async function benchHttp(): Promise<void> {
  const dists = [
    { name: 'baseline', dist: build(baselineTree) },
    { name: 'current', dist: build(ROOT) },
  ];
  for (let round = 1; round <= rounds; round++) {
    for (const { name, dist } of dists) {
      const dataDir = mkdtempSync(join(tmpdir(), 'kvcrud-bench-http-'));
      const service = await runService(cleanEnv({ PORT: '0', DATA_DIR: dataDir }), [process.execPath, join(dist, 'index.js')]);
      try {
        const post = (request: { path: string; body?: string }) =>
          fetch(`${service.baseUrl}${request.path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, ...(request.body === undefined ? {} : { body: request.body }) });
        await post({ path: '/v1/local/createTable', body: JSON.stringify({ tableName: TABLE, columnFamily: FAMILY }) });
        for (let i = 0; i < PRELOADED_ROWS; i += 50) {
          await Promise.all(Array.from({ length: 50 }, (_, j) => post(insertRequest('local', preloadedKey(i + j)))));
        }
        const check = await fetch(`${service.baseUrl}${readRequest('local', preloadedKey(7)).path}`);
        if (check.status !== 200) throw new Error(`${name}: readCellData answered ${check.status}`);
        for (const caseName of ['read', 'insert'] as const) {
          const load = { baseUrl: service.baseUrl, store: 'embedded', instance: 'local', caseName, connections, newKey: newKeys(`${name}-${caseName}`) };
          await runHttpLoad({ ...load, durationSeconds: 2 });
          const pid = service.process.pid ?? 0;
          const cpu = new CpuMeter({ service: pid, loadGenerator: process.pid });
          const rss = new RssSampler(pid);
          const mainThreadBefore = mainThreadCpuMs(pid);
          cpu.start();
          rss.start();
          const result = await runHttpLoad({ ...load, durationSeconds: durationMs / 1000 });
          const requests = result.ok + result.errors;
          const perRequest = cpu.perOperation(requests);
          const mainThread = Math.round(((mainThreadCpuMs(pid) - mainThreadBefore) * 1000) / requests);
          line(
            `round ${round} ${name.padEnd(8)} ${caseName === 'read' ? 'readCellData' : 'insertData  '} ${fmt(result.reqPerSec)} req/s, ` +
              `p50 ${result.latencyMs.p50} ms, p99 ${result.latencyMs.p99} ms, errors ${result.errors}, ` +
              `service CPU ${perRequest['service']} µs/req (main thread ${mainThread}), peak RSS ${rss.stop()} MB`,
          );
        }
      } finally {
        await service.stop('SIGTERM');
        rmSync(dataDir, { recursive: true, force: true });
      }
    }
  }
}

/**
 * The soak's load at the store: 10,000 rows of two cells rewritten over and over by 16 callers
 * (with a read of a random row after each write), on a family that keeps every version and on one
 * with maxVersions 1. Both stores are open at once and take turns, an interval each, so that both
 * see the same machine. Prints, per interval, writes/s, the read p99, the CPU time of the process
 * per write + read, versions per cell written so far and the size on disk.
 */
async function benchRetention(): Promise<void> {
  const { EmbeddedStore } = await import('../src/store/embedded/embedded-store.ts');
  const rows = 10_000;
  const intervals = 6;
  const setups = [
    { label: 'keep all', policy: {} },
    { label: 'maxVersions 1', policy: { maxVersions: 1 } },
  ];
  const stores = await Promise.all(
    setups.map(async (setup) => {
      const dataDir = mkdtempSync(join(tmpdir(), 'kvcrud-bench-retention-'));
      return { ...setup, dataDir, store: await EmbeddedStore.open({ dataDir }), writes: 0 };
    }),
  );
  let clock = 1_000_000n;
  try {
    for (const { store, policy } of stores) {
      await store.createTable(ref, [{ name: FAMILY, ...policy }], options());
      for (let i = 0; i < rows; i += 500) {
        await store.mutateRows(
          ref,
          Array.from({ length: 500 }, (_, j) => ({ key: Buffer.from(preloadedKey(i + j)), mutations: cells(clock).map(toSet) })),
          options(),
        );
      }
    }
    for (let interval = 1; interval <= intervals; interval++) {
      for (const setup of stores) {
        const { store } = setup;
        const reads = createHistogram();
        let writes = 0;
        const cpu = process.cpuUsage();
        const until = performance.now() + durationMs;
        await Promise.all(
          Array.from({ length: 16 }, async () => {
            while (performance.now() < until) {
              clock += 1000n;
              await store.mutateRow(ref, Buffer.from(preloadedKey(Math.floor(Math.random() * rows))), cells(clock).map(toSet), options());
              writes++;
              const started = performance.now();
              await store.readRows(ref, [Buffer.from(preloadedKey(Math.floor(Math.random() * rows)))], { versions: 1 }, options());
              reads.record(Math.max(1, Math.round((performance.now() - started) * 1000)));
            }
          }),
        );
        const used = process.cpuUsage(cpu);
        setup.writes += writes;
        line(
          `${setup.label.padEnd(14)} interval ${interval}: ${fmt(writes / (durationMs / 1000))} writes/s (each followed by a read), ` +
            `read p99 ${(reads.percentile(99) / 1000).toFixed(2)} ms, CPU ${Math.round((used.user + used.system) / writes)} µs per write + read, ` +
            `${(1 + setup.writes / rows).toFixed(1)} versions per cell written so far, disk ${diskMb(setup.dataDir)} MB`,
        );
      }
    }
  } finally {
    for (const { store, dataDir } of stores) {
      await store.close();
      rmSync(dataDir, { recursive: true, force: true });
    }
  }
}

function toSet(cell: CellWrite) {
  return { type: 'set' as const, family: cell.family, column: cell.qualifier, value: cell.value, timestampMicros: cell.timestampMicros };
}

async function withStore(build: Build, run: (store: V1Store) => Promise<void>): Promise<void> {
  const dataDir = mkdtempSync(join(tmpdir(), `kvcrud-bench-${build.name}-`));
  const store = await build.open(dataDir);
  try {
    await run(store);
  } finally {
    await store.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

async function preload(store: V1Store): Promise<void> {
  await store.createTable(ref, [FAMILY], options());
  for (let i = 0; i < PRELOADED_ROWS; i += 50) {
    await Promise.all(Array.from({ length: 50 }, (_, j) => store.writeRow(ref, Buffer.from(preloadedKey(i + j)), cells(), options())));
  }
}

function randomKey(): string {
  return preloadedKey(Math.floor(Math.random() * PRELOADED_ROWS));
}

/** `callers` callers each calling `task` again as soon as it resolves, for `ms`. */
async function closedLoop(callers: number, ms: number, task: () => Promise<unknown>) {
  const warmUntil = performance.now() + Math.min(2000, ms / 5);
  await Promise.all(Array.from({ length: callers }, async () => {
    while (performance.now() < warmUntil) await task();
  }));
  const latencies = createHistogram();
  const cpuBefore = process.cpuUsage();
  const started = performance.now();
  const until = started + ms;
  await Promise.all(
    Array.from({ length: callers }, async () => {
      while (performance.now() < until) {
        const begun = performance.now();
        await task();
        latencies.record(Math.max(1, Math.round((performance.now() - begun) * 1000)));
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  const cpu = process.cpuUsage(cpuBefore);
  return {
    perSecond: Math.round(latencies.count / seconds),
    p50: (latencies.percentile(50) / 1000).toFixed(2),
    p99: (latencies.percentile(99) / 1000).toFixed(2),
    // The whole process: the callers, the store's main-thread work and its SQLite threads.
    cpuMicros: Math.round((cpu.user + cpu.system) / latencies.count),
  };
}

/** The part of the store contract (src/store/store.ts) these measurements call. */
interface ContractStore {
  createTable(ref: Ref, families: Array<{ name: string }>, options: Options): Promise<void>;
  mutateRow(ref: Ref, key: Buffer, mutations: Array<ReturnType<typeof toSet>>, options: Options): Promise<void>;
  readRows(ref: Ref, keys: Buffer[], read: { versions: number }, options: Options): Promise<Array<{ cells: unknown[] }>>;
  scanRows(ref: Ref, scan: object, options: Options): AsyncIterable<unknown>;
  close(): Promise<void>;
}

/**
 * A build whose store is imported from its TypeScript sources (Node strips the types), seen
 * through the v1 calls: a v1 write is one row mutation of sets, a v1 read the latest version of
 * each column.
 */
async function sourceBuild(name: string, src: string): Promise<Build> {
  const module = (await import(join(src, 'store/embedded/embedded-store.ts'))) as {
    EmbeddedStore: { open(options: { dataDir: string }): Promise<ContractStore> };
  };
  return {
    name,
    open: async (dataDir) => {
      const store = await module.EmbeddedStore.open({ dataDir });
      return {
        createTable: (ref, families, options) => store.createTable(ref, families.map((family) => ({ name: family })), options),
        writeRow: (ref, key, cells, options) => store.mutateRow(ref, key, cells.map(toSet), options),
        readRow: async (ref, key, options) => (await store.readRows(ref, [key], { versions: 1 }, options))[0]?.cells ?? null,
        scanRows: (ref, scan, options) => store.scanRows(ref, scan, options),
        close: () => store.close(),
      };
    },
  };
}

/** The sources of `ref` in a temporary directory, with this checkout's node_modules. */
function extract(ref: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'kvcrud-baseline-'));
  execFileSync('sh', ['-c', `git archive ${ref} | tar -x -C ${dir}`], { cwd: ROOT });
  symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'));
  return dir;
}

/** Compiles a tree's service into its dist/ (the production build `npm start` runs). */
function build(tree: string): string {
  execFileSync(join(ROOT, 'node_modules/.bin/tsc'), ['-p', 'tsconfig.build.json'], { cwd: tree, stdio: 'inherit' });
  return join(tree, 'dist');
}

/**
 * The CPU time of a process's main thread (the one running the event loop), in ms: it bounds the
 * requests per second one process can serve, whatever its other threads do.
 */
function mainThreadCpuMs(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/task/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100;
}

function revision(ref: string): string {
  return execFileSync('git', ['rev-parse', '--short', ref], { cwd: ROOT, encoding: 'utf8' }).trim();
}

function dirty(): boolean {
  return execFileSync('git', ['status', '--porcelain', 'src'], { cwd: ROOT, encoding: 'utf8' }).trim() !== '';
}

function diskMb(dir: string): string {
  let bytes = 0;
  for (const name of readdirSync(dir)) bytes += statSync(join(dir, name)).size;
  return (bytes / 2 ** 20).toFixed(1);
}

function fmt(value: number): string {
  return Math.round(value).toLocaleString('en-US');
}

function line(text: string): void {
  process.stdout.write(`${text}\n`);
}
