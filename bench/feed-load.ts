/**
 * `npm run build && node bench/feed-load.ts`: what one change feed delivers, and what open feeds
 * cost writers. For each store, on the service as built (dist/), one after the other:
 *   1. writes alone: v2 rows.write of new 2-cell rows at --connections, for --duration seconds;
 *   2. the same writes with one SSE feed following the table: the changes it delivered per second,
 *      and its lag (receipt minus the change's commit time) at p50 and p99;
 *   3. the same writes with --feeds feeds open on the table.
 * It prints writes/s for each, with the ratio to writes alone measured in the same run. Options:
 *   --stores LIST      embedded,redis (default both)
 *   --duration S       seconds per load (default 10)
 *   --connections N    writers (default 32)
 *   --feeds N          feeds open in step 3 (default 100)
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { type ServiceProcess, cleanEnv, runService } from '../test/support/service-process.ts';
import { spawnRedis } from '../test/support/redis-server.ts';
import { runHttpLoad } from './http-load.ts';
import { newKeys } from './workload.ts';

const { values: args } = parseArgs({
  options: {
    stores: { type: 'string', default: 'embedded,redis' },
    duration: { type: 'string', default: '10' },
    connections: { type: 'string', default: '32' },
    feeds: { type: 'string', default: '100' },
  },
});
const DURATION = Number(args.duration);
const CONNECTIONS = Number(args.connections);
const FEEDS = Number(args.feeds);
const INSTANCE = 'feedbench';
const TABLE = 'bench';

/** One SSE reader: counts change events and records each one's lag behind its commit. */
class FeedReader {
  changes = 0;
  readonly lagsMs: number[] = [];
  readonly #abort = new AbortController();
  #done: Promise<void> | undefined;

  async open(url: string): Promise<void> {
    const response = await fetch(url, { headers: { accept: 'text/event-stream' }, signal: this.#abort.signal });
    if (response.status !== 200 || response.body === null) throw new Error(`the feed answered ${response.status}: ${await response.text()}`);
    const body = response.body;
    this.#done = (async () => {
      const decoder = new TextDecoder();
      let buffer = '';
      try {
        for await (const chunk of body as AsyncIterable<Uint8Array>) {
          buffer += decoder.decode(chunk, { stream: true });
          let end: number;
          while ((end = buffer.indexOf('\n\n')) !== -1) {
            const block = buffer.slice(0, end);
            buffer = buffer.slice(end + 2);
            const data = /^data: (.*)$/m.exec(block)?.[1];
            if (data === undefined || !block.includes('event: change')) continue;
            this.changes += 1;
            const committed = Date.parse((JSON.parse(data) as { timestamp: string }).timestamp);
            this.lagsMs.push(Date.now() - committed);
          }
        }
      } catch {
        // Closed by close().
      }
    })();
  }

  async close(): Promise<void> {
    this.#abort.abort();
    await this.#done;
  }
}

async function createTable(baseUrl: string): Promise<void> {
  const response = await fetch(`${baseUrl}/v2/stores/${storeOf(baseUrl)}/instances/${INSTANCE}/tables`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ name: TABLE, families: [{ name: 'cf', maxVersions: 1 }] }),
  });
  if (response.status !== 201) throw new Error(`createTable answered ${response.status}: ${await response.text()}`);
}

const stores = new Map<string, string>();
function storeOf(baseUrl: string): string {
  return stores.get(baseUrl) ?? 'embedded';
}

function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((x, y) => x - y);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? Number.NaN;
}

async function writes(service: ServiceProcess, store: string, tag: string): Promise<number> {
  const result = await runHttpLoad({ baseUrl: service.baseUrl, store, instance: INSTANCE, caseName: 'v2write', connections: CONNECTIONS, newKey: newKeys(tag), durationSeconds: DURATION });
  if (result.errors > 0) process.stderr.write(`${store} ${tag}: ${result.errors} failed writes (${result.firstError ?? ''})\n`);
  return result.reqPerSec;
}

async function benchStore(store: string, service: ServiceProcess): Promise<void> {
  stores.set(service.baseUrl, store);
  await createTable(service.baseUrl);
  const feedUrl = `${service.baseUrl}/v2/stores/${store}/instances/${INSTANCE}/tables/${TABLE}/changes`;
  // Warm up, unmeasured.
  await runHttpLoad({ baseUrl: service.baseUrl, store, instance: INSTANCE, caseName: 'v2write', connections: CONNECTIONS, newKey: newKeys('warm'), durationSeconds: 2 });

  const alone = await writes(service, store, 'alone');

  const one = new FeedReader();
  await one.open(feedUrl);
  const started = Date.now();
  const withOne = await writes(service, store, 'one');
  // What was committed is delivered: wait a moment for the tail.
  await new Promise((resolve) => setTimeout(resolve, 2000));
  const seconds = (Date.now() - started) / 1000;
  await one.close();

  const many = Array.from({ length: FEEDS }, () => new FeedReader());
  await Promise.all(many.map((reader) => reader.open(feedUrl)));
  const withMany = await writes(service, store, 'many');
  await new Promise((resolve) => setTimeout(resolve, 2000));
  await Promise.all(many.map((reader) => reader.close()));
  const delivered = many.reduce((sum, reader) => sum + reader.changes, 0);

  const row = [
    store,
    alone.toFixed(0),
    withOne.toFixed(0),
    (withOne / alone).toFixed(2),
    (one.changes / seconds).toFixed(0),
    percentile(one.lagsMs, 50).toFixed(1),
    percentile(one.lagsMs, 99).toFixed(1),
    withMany.toFixed(0),
    (withMany / alone).toFixed(2),
    String(delivered),
  ];
  process.stdout.write(`${row.map((cell) => cell.padStart(10)).join(' ')}\n`);
}

async function main(): Promise<void> {
  process.stdout.write(`load average ${loadavg()[0]?.toFixed(2)}; ${CONNECTIONS} writers, ${DURATION} s per load, ${FEEDS} feeds in the last\n`);
  const header = ['store', 'writes/s', '+1 feed', 'ratio', 'changes/s', 'lag p50', 'lag p99', `+${FEEDS} feeds`, 'ratio', 'delivered'];
  process.stdout.write(`${header.map((cell) => cell.padStart(10)).join(' ')}\n`);
  for (const store of args.stores.split(',')) {
    if (store === 'embedded') {
      const dataDir = mkdtempSync(join(tmpdir(), 'kvcrud-feed-bench-'));
      const service = await runService(cleanEnv({ PORT: '0', DATA_STORE: 'embedded', DATA_DIR: dataDir, INSTANCE_IDS: INSTANCE, FEEDS_MAX_PER_CALLER: String(FEEDS + 1) }), [process.execPath, 'dist/index.js']);
      try {
        await benchStore(store, service);
      } finally {
        await service.stop('SIGTERM');
        rmSync(dataDir, { recursive: true, force: true });
      }
    } else if (store === 'redis') {
      const redis = await spawnRedis();
      const directory = mkdtempSync(join(tmpdir(), 'kvcrud-feed-bench-redis-'));
      const storesFile = join(directory, 'stores.yaml');
      writeFileSync(storesFile, `stores:\n  redis: { driver: redis, url: "${redis.url}", instances: [${INSTANCE}] }\n`);
      const service = await runService(cleanEnv({ PORT: '0', STORES_FILE: storesFile, FEEDS_MAX_PER_CALLER: String(FEEDS + 1) }), [process.execPath, 'dist/index.js']);
      try {
        await benchStore(store, service);
      } finally {
        await service.stop('SIGTERM');
        await redis.stop();
        rmSync(directory, { recursive: true, force: true });
      }
    } else {
      throw new Error(`--stores: ${store} is not one of embedded, redis`);
    }
  }
}

await main();
