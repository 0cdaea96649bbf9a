/**
 * `npm run build && node bench/instructions.ts [--case insert|read|v2read|v2write] [--requests 2000]
 * [--warmup 1500] [--connections 8] [--root DIR] [--server kvcrud|naive|floor|koa-floor]
 * [--node-flags=F]`: the machine instructions the service (or with `--server`, the naive proxy or a
 * floor server of `npm run bench`) executes per request, counted by valgrind's callgrind, on a
 * Bigtable emulator of its own.
 *
 * On a shared VM the CPU time of the same request moves by 30 % or more from one minute to the
 * next, so two builds whose costs differ by a few per cent cannot be told apart by `npm run bench`.
 * The instructions a process executes do not depend on what else the machine runs: this script
 * counts those of the service (`node dist/index.js` under `valgrind --tool=callgrind`) while it
 * answers `--requests` requests of one case on `--connections` keep-alive connections, after
 * `--warmup` requests that let V8 compile the hot code. Counting starts and stops with
 * `callgrind_control` around the measured requests, so start-up is left out. It prints the count on
 * all threads and on the main thread, each split into V8's collector, its optimizing compilers and
 * the rest (by the function names `callgrind_annotate` gives).
 *
 * The service runs with V8's own threads (`--node-flags=F` adds flags; a heap flag among them
 * replaces the service's own heap choice). Count all threads: the collector's marking and much of
 * its scavenging run beside the main thread. V8's `--predictable` keeps all that on the main thread,
 * but it also changes how much the collector does: with it, the service's 60 % growth of the old
 * generation counted 1.71 million instructions per read against 1.44 million with V8's own growth;
 * without it, on all threads, 1.37-1.38 million against 1.76 million, as CPU time had found.
 * Two runs of one build count within a few per cent of each other, more when a major collection
 * falls inside one run's window and not the other's: run each build more than once.
 *
 * Instructions are not time: a cache miss costs no more instructions than a hit. Compare builds by
 * this figure where they differ in the work they do, not in how they lay out memory. `--root`
 * measures another checkout's build (its `dist/`), e.g. a `git worktree` of the previous commit.
 * Under valgrind the service runs about 50 times slower: a run takes a few minutes.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { parseArgs } from 'node:util';
import { spawnEmulator } from '../test/support/emulator.ts';
import { cleanEnv } from '../test/support/service-process.ts';
import { dataClient, writeRow } from './ceiling.ts';
import { runHttpLoad } from './http-load.ts';
import { FAMILY, PRELOADED_ROWS, TABLE, newKeys, preloadedKey } from './workload.ts';

const PROJECT = 'kvcrud-bench';
const INSTANCE = 'bench-instance';
const STORE = 'bigtable';
const CASES = ['insert', 'read', 'v2read', 'v2write'] as const;
type Case = (typeof CASES)[number];

const { values: args } = parseArgs({
  options: {
    case: { type: 'string', default: 'insert' },
    requests: { type: 'string', default: '2000' },
    warmup: { type: 'string', default: '1500' },
    connections: { type: 'string', default: '8' },
    root: { type: 'string', default: new URL('../', import.meta.url).pathname },
    'node-flags': { type: 'string', default: '' },
    server: { type: 'string', default: 'kvcrud' },
  },
});
const caseName = args.case as Case;
if (!CASES.includes(caseName)) throw new Error(`--case must be one of ${CASES.join(', ')}`);
const requests = Number(args.requests);
const warmup = Number(args.warmup);
const connections = Number(args.connections);
const root = resolve(args.root);
const nodeFlags = args['node-flags'].split(' ').filter((flag) => flag !== '');
/** What runs under valgrind: the service, or one of the baselines `npm run bench` compares it with (v1 cases only). */
const SERVERS: Record<string, readonly string[]> = {
  kvcrud: ['dist/index.js'],
  naive: ['bench/naive-proxy.ts'],
  floor: ['bench/floor-server.ts'],
  'koa-floor': ['bench/floor-server.ts', '--koa'],
};
const server = args.server;
const serverArgs: readonly string[] = SERVERS[server] ?? [];
if (serverArgs.length === 0) throw new Error(`--server must be one of ${Object.keys(SERVERS).join(', ')}`);
if (server !== 'kvcrud' && caseName !== 'insert' && caseName !== 'read') throw new Error(`the ${server} server answers only the insert and read cases`);
if (!existsSync(join(root, 'dist/index.js'))) throw new Error(`${root}/dist/index.js is missing: npm run build there first`);

/** Sends `amount` requests of the case; throws unless every one is answered 2xx. */
async function load(baseUrl: string, amount: number): Promise<void> {
  // Under valgrind a request takes about 50 times as long as it does natively.
  const result = await runHttpLoad({ baseUrl, store: STORE, instance: INSTANCE, caseName, connections, requests: amount, timeoutSeconds: 120, newKey: newKeys('instructions') });
  if (result.errors > 0) throw new Error(`${result.errors} of ${amount} requests failed, the first: ${result.firstError ?? 'unknown'}`);
}

/** Starts the service under callgrind, counting nothing until asked (instrumentation off); resolves once it listens. */
async function startService(emulatorHost: string, outDir: string): Promise<{ child: ChildProcess; baseUrl: string }> {
  // Under valgrind a request takes about 50 times as long: the default 5 s store deadline would cut some short.
  const env = cleanEnv({ PORT: '0', GOOGLE_CLOUD_PROJECT: PROJECT, INSTANCE_IDS: INSTANCE, BIGTABLE_EMULATOR_HOST: emulatorHost, STORE_TIMEOUT_MS: '120000' });
  // --trace-children: the service replaces itself (execve) with the heap flags it chooses.
  const child = spawn(
    'valgrind',
    ['--tool=callgrind', '--trace-children=yes', '--instr-atstart=no', '--separate-threads=yes', `--callgrind-out-file=${outDir}/callgrind.out.%p`, process.execPath, ...nodeFlags, ...serverArgs],
    { cwd: root, env, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  const port = await new Promise<number>((done, fail) => {
    const timer = setTimeout(() => fail(new Error('the service did not listen within 10 minutes under valgrind')), 600_000);
    for (const stream of [child.stdout, child.stderr]) {
      createInterface({ input: stream }).on('line', (line) => {
        const match = /"port":(\d+)/.exec(line);
        if (match?.[1] !== undefined && line.includes('listening')) {
          clearTimeout(timer);
          done(Number(match[1]));
        }
      });
    }
    child.once('exit', (code) => fail(new Error(`the service exited (${code}) before listening`)));
  });
  return { child, baseUrl: `http://127.0.0.1:${port}` };
}

/** Who executes an instruction, by the function callgrind names: V8's collector, its optimizing compilers, or the rest. */
type Part = 'collector' | 'compiler' | 'rest';
const COLLECTOR = /Scaveng|Marking|MarkCompact|Sweep|Evacuat|heap::base::|v8::internal::Heap::|RememberedSet|SlotSet|cppgc::/;
const COMPILER = /v8::internal::(?:compiler|maglev)::|[Tt]urboshaft/;

interface ThreadCounts {
  readonly all: number;
  readonly parts: Record<Part, number>;
}

/**
 * The instructions callgrind counted in the dumps it wrote into `outDir`, on the main thread (its
 * files end in -01) and on the others (V8's collector helpers and compilers, libuv's pool), each
 * split by `callgrind_annotate` into the collector, the optimizing compilers and the rest
 * (JavaScript, V8's builtins and runtime, Node, the C library).
 */
function countedInstructions(outDir: string): { readonly main: ThreadCounts; readonly others: ThreadCounts } {
  const empty = (): { all: number; parts: Record<Part, number> } => ({ all: 0, parts: { collector: 0, compiler: 0, rest: 0 } });
  const main = empty();
  const others = empty();
  for (const file of readdirSync(outDir)) {
    const path = join(outDir, file);
    const totals = /^totals: (\d+)/m.exec(readFileSync(path, 'utf8'));
    if (totals?.[1] === undefined) continue;
    const counts = file.endsWith('-01') ? main : others;
    counts.all += Number(totals[1]);
    const annotated = execFileSync('callgrind_annotate', ['--threshold=100', path], { encoding: 'utf8', maxBuffer: 256 * 1024 * 1024 });
    for (const line of annotated.split('\n')) {
      const match = /^\s*([\d,]+) \(\s*[\d.]+%\)\s+(.*)$/.exec(line);
      if (match?.[1] === undefined || match[2] === undefined || match[2].includes('PROGRAM TOTALS')) continue;
      const part: Part = COLLECTOR.test(match[2]) ? 'collector' : COMPILER.test(match[2]) ? 'compiler' : 'rest';
      counts.parts[part] += Number(match[1].replaceAll(',', ''));
    }
  }
  return { main, others };
}

/** Stops the service; callgrind writes its last counts as it exits. */
async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, 'exit');
  child.kill('SIGTERM');
  await exited;
}

const outDir = mkdtempSync(join(tmpdir(), 'kvcrud-instructions-'));
const emulator = await spawnEmulator();
const service = await startService(emulator.host, outDir);
try {
  const client = dataClient(PROJECT, emulator.host);
  // With cbt, not the service: the baselines have no createTable. A v1 family keeps one version.
  const cbt = (...words: string[]) =>
    execFileSync('cbt', ['-project', PROJECT, '-instance', INSTANCE, ...words], { env: { ...process.env, BIGTABLE_EMULATOR_HOST: emulator.host }, stdio: 'ignore' });
  cbt('createtable', TABLE);
  cbt('createfamily', TABLE, FAMILY);
  cbt('setgcpolicy', TABLE, FAMILY, 'maxversions=1');
  if (caseName === 'read' || caseName === 'v2read') {
    const tableName = `projects/${PROJECT}/instances/${INSTANCE}/tables/${TABLE}`;
    for (let start = 0; start < PRELOADED_ROWS; start += 100) {
      await Promise.all(Array.from({ length: Math.min(100, PRELOADED_ROWS - start) }, (_, offset) => writeRow(client, tableName, preloadedKey(start + offset))));
    }
  }
  await client.close();
  await load(service.baseUrl, warmup);
  const pid = String(service.child.pid);
  execFileSync('callgrind_control', ['--instr=on', pid], { stdio: 'ignore' });
  await load(service.baseUrl, requests);
  execFileSync('callgrind_control', ['--instr=off', pid], { stdio: 'ignore' });
  // callgrind writes what it counted as the service exits.
  await stop(service.child);
  const { main, others } = countedInstructions(outDir);
  const perRequest = (count: number) => Math.round(count / requests).toLocaleString('en');
  const split = ({ parts }: ThreadCounts) => `collector ${perRequest(parts.collector)}, optimizing compilers ${perRequest(parts.compiler)}, the rest ${perRequest(parts.rest)}`;
  process.stdout.write(
    `${caseName} on ${STORE}, ${server === 'kvcrud' ? `kvcrud (${root})` : server}: ${perRequest(main.all + others.all)} instructions per request on all threads, ${perRequest(main.all)} on the main thread ` +
      `(${requests} requests on ${connections} connections, after ${warmup} to warm up)\n` +
      `  main thread: ${split(main)}\n  other threads: ${perRequest(others.all)}: ${split(others)}\n`,
  );
} finally {
  await stop(service.child);
  emulator.process.kill();
  rmSync(outDir, { recursive: true, force: true });
}
