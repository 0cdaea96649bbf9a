/**
 * `npm run build && node bench/heap.ts [--case insert|read|mix] [--duration 8] [--warmup 3] [--rounds 3]
 * [--connections 32] [--setting "LABEL=FLAGS"]... [--gc-log DIR]`: what the service's heap settings
 * cost in CPU and memory under load.
 *
 * Starts one built service per setting, all on one Bigtable emulator of its own, and the naive
 * proxy beside them. Each round loads every server in turn with the same case (a warm-up, then
 * `--duration` seconds on `--connections` connections), so that all see the same machine. Per load
 * it prints the server's user and system CPU per request, its peak RSS during the load and, from
 * V8's `--trace-gc`, the scavenges and mark-compacts per 1,000 requests and the time spent in them.
 *
 * A setting is a label and the node flags its service is started with. `own` (no flags) is the
 * service as `npm start` runs it: it chooses its heap itself (src/heap-size.ts). Any flag that sizes
 * the heap or sets its growth replaces the whole choice, so give them all (`--max-old-space-size=256
 * --max-semi-space-size=16 --heap-growing-percent=100`). Every setting gets the C allocator's
 * threshold the service sets for itself (`MALLOC_MMAP_THRESHOLD_`), so that only the flags differ.
 * Default settings: `own`; the same sizes with V8's own growth of the old generation (`256/16`);
 * and V8's default heap on this machine. `--gc-log DIR` writes each server's output, its
 * `--trace-gc` lines included, to a file of its own.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { spawnEmulator } from '../test/support/emulator.ts';
import { type ServiceProcess, cleanEnv, runService } from '../test/support/service-process.ts';
import { allocatorEnvironment } from '../src/heap-size.ts';
import { runHttpLoad } from './http-load.ts';
import { RssSampler, cpuTimesMs } from './proc-stats.ts';
import { type CaseName, FAMILY, PRELOADED_ROWS, TABLE, newKeys, preloadedKey } from './workload.ts';

const { values: args } = parseArgs({
  options: {
    case: { type: 'string', default: 'insert' },
    duration: { type: 'string', default: '8' },
    warmup: { type: 'string', default: '3' },
    rounds: { type: 'string', default: '3' },
    connections: { type: 'string', default: '32' },
    'gc-log': { type: 'string' },
    setting: { type: 'string', multiple: true, default: ['own=', '256/16=--max-old-space-size=256 --max-semi-space-size=16', 'V8 default=--max-old-space-size=4096'] },
  },
});
const caseName = args.case as CaseName;
if (!['insert', 'read', 'mix'].includes(caseName)) throw new Error('--case is insert, read or mix');
const INSTANCE = 'bench-instance';
const ROOT = new URL('../', import.meta.url).pathname;

interface Server {
  readonly label: string;
  readonly process: ServiceProcess;
}

/** The collections `--trace-gc` reported in these lines: count and pause milliseconds per kind. */
function collections(lines: readonly string[]): { scavenges: number; scavengeMs: number; markCompacts: number; markCompactMs: number } {
  const totals = { scavenges: 0, scavengeMs: 0, markCompacts: 0, markCompactMs: 0 };
  for (const line of lines) {
    // [123:0x55…]    4562 ms: Scavenge 61.2 (80.4) -> 45.1 (80.9) MB, pooled: 0 MB, 1.23 / 0.00 ms  (average mu = …
    // A young collection is a Scavenge, or a Minor Mark-Sweep under --minor-ms.
    const match = /\d+ ms: (Scavenge|Mark-Compact|Minor Mark-Sweep)\b.*?MB, (?:pooled: [\d.]+ MB, )?([\d.]+) \/ [\d.]+ ms/.exec(line);
    if (match === null) continue;
    const pause = Number(match[2]);
    if (match[1] === 'Mark-Compact') {
      totals.markCompacts += 1;
      totals.markCompactMs += pause;
    } else {
      totals.scavenges += 1;
      totals.scavengeMs += pause;
    }
  }
  return totals;
}

const emulator = await spawnEmulator();
const servers: Server[] = [];
try {
  const env = cleanEnv({ PORT: '0', GOOGLE_CLOUD_PROJECT: 'kvcrud-bench', INSTANCE_IDS: INSTANCE, BIGTABLE_EMULATOR_HOST: emulator.host });
  for (const setting of args.setting) {
    const [label = '', flags = ''] = setting.split(/=(.*)/s);
    const nodeFlags = flags.split(' ').filter((flag) => flag !== '');
    const service = await runService({ ...env, ...allocatorEnvironment({}) }, [process.execPath, '--trace-gc', ...nodeFlags, join(ROOT, 'dist/index.js')]);
    servers.push({ label, process: service });
  }
  servers.push({ label: 'naive proxy', process: await runService(env, [process.execPath, '--trace-gc', join(ROOT, 'bench/naive-proxy.ts')]) });

  const [first] = servers;
  if (first === undefined) throw new Error('no setting to measure');
  const created = await fetch(`${first.process.baseUrl}/v1/${INSTANCE}/createTable`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ tableName: TABLE, columnFamily: FAMILY }),
  });
  if (created.status !== 201) throw new Error(`createTable: ${created.status}`);
  let preloaded = 0;
  await runHttpLoad({ baseUrl: first.process.baseUrl, store: 'bigtable', instance: INSTANCE, caseName: 'insert', connections: 8, requests: PRELOADED_ROWS, newKey: () => preloadedKey(preloaded++) });

  const connections = Number(args.connections);
  process.stdout.write(`${caseName}, ${connections} connections, ${args.duration} s per load; per request: user/system CPU µs; per 1,000 requests: GCs (ms in them)\n`);
  for (let round = 1; round <= Number(args.rounds); round += 1) {
    for (const server of servers) {
      const pid = server.process.process.pid ?? 0;
      const load = { baseUrl: server.process.baseUrl, store: 'bigtable', instance: INSTANCE, caseName, connections, newKey: newKeys(`heap-${round}`) };
      await runHttpLoad({ ...load, durationSeconds: Number(args.warmup) });
      const linesBefore = server.process.output.length;
      const cpuBefore = cpuTimesMs(pid);
      const rss = new RssSampler(pid);
      rss.start();
      const result = await runHttpLoad({ ...load, durationSeconds: Number(args.duration) });
      const peakMb = rss.stop();
      const cpuAfter = cpuTimesMs(pid);
      const gc = collections(server.process.output.slice(linesBefore));
      const requests = result.ok + result.errors;
      const per = (ms: number) => Math.round((ms * 1000) / requests);
      const perThousand = (n: number) => ((n * 1000) / requests).toFixed(2);
      process.stdout.write(
        `round ${round}  ${server.label.padEnd(14)} ${String(Math.round(result.reqPerSec)).padStart(5)} req/s  ` +
          `p99 ${result.latencyMs.p99.toFixed(1).padStart(6)} ms  CPU ${String(per(cpuAfter.user - cpuBefore.user)).padStart(5)} / ${String(per(cpuAfter.system - cpuBefore.system)).padStart(3)} µs  ` +
          `peak RSS ${String(peakMb).padStart(4)} MB  scavenges ${perThousand(gc.scavenges)} (${perThousand(gc.scavengeMs)} ms)  ` +
          `mark-compacts ${perThousand(gc.markCompacts)} (${perThousand(gc.markCompactMs)} ms)` +
          `${result.errors > 0 ? `  ${result.errors} errors` : ''}\n`,
      );
    }
  }
} finally {
  for (const server of servers) await server.process.stop('SIGTERM');
  if (args['gc-log'] !== undefined) {
    mkdirSync(args['gc-log'], { recursive: true });
    for (const server of servers) writeFileSync(join(args['gc-log'], `${server.label.replaceAll(/\W+/g, '-')}.log`), `${server.process.output.join('\n')}\n`);
  }
  emulator.process.kill('SIGTERM');
}
