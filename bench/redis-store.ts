/**
 * `node bench/redis-store.ts`: the Redis store's reads, writes and scans in-process, next to a
 * bare node-redis client doing the least the same work needs, against one redis-server of its
 * own, in one run. Each pair runs in turns (bare, store, bare, store…) so both see the same
 * machine. Options:
 *   --duration S      measured seconds per turn (default 3)
 *   --turns N         turns per side (default 3)
 *   --callers N       concurrent callers in a closed loop (default 32)
 *   --rows N          preloaded rows (default 10000)
 *   --cases LIST      read,write,scan (default all)
 */
import { parseArgs } from 'node:util';
import { pino } from 'pino';
import { type RedisArgument, RESP_TYPES, createClient } from 'redis';
import { RedisStore } from '../src/store/redis/redis-store.ts';
import type { Mutation } from '../src/store/store.ts';
import { spawnRedis } from '../test/support/redis-server.ts';
import { LoadRecorder, type LoadResult } from './measure.ts';

const { values: args } = parseArgs({
  options: {
    duration: { type: 'string', default: '3' },
    turns: { type: 'string', default: '3' },
    callers: { type: 'string', default: '32' },
    rows: { type: 'string', default: '10000' },
    cases: { type: 'string', default: 'read,write,scan' },
  },
});
const seconds = Number(args.duration);
const turns = Number(args.turns);
const callers = Number(args.callers);
const ROWS = Number(args.rows);
const cases = args.cases.split(',');

const instance = 'bench';
const ref = { instance, table: 't' };
const key = (i: number) => Buffer.from(`row-${String(i).padStart(8, '0')}`);
const value = Buffer.alloc(100, 'v');
const deadline = () => ({ deadline: Date.now() + 10_000 });
const set = (column: string, timestampMicros: bigint): Mutation => ({ type: 'set', family: 'cf', column: Buffer.from(column), value, timestampMicros });

/** Runs `operation` from `callers` closed loops for `seconds`. */
async function load(operation: (n: number) => Promise<unknown>): Promise<LoadResult> {
  const recorder = new LoadRecorder();
  const started = performance.now();
  const end = started + seconds * 1000;
  let n = 0;
  await Promise.all(
    Array.from({ length: callers }, async () => {
      while (performance.now() < end) {
        const t0 = performance.now();
        try {
          await operation(n++);
          recorder.success(performance.now() - t0);
        } catch (error) {
          recorder.failure((error as Error).message);
        }
      }
    }),
  );
  return recorder.result((performance.now() - started) / 1000);
}

const server = await spawnRedis();
const store = RedisStore.open({ url: server.url, instances: [instance], logger: pino({ level: 'warn' }) });
const bare = createClient({ url: server.url, RESP: 2 }).withTypeMapping({ [RESP_TYPES.BLOB_STRING]: Buffer });
await bare.connect();
try {
  await store.createTable(ref, [{ name: 'cf' }], deadline());
  for (let first = 0; first < ROWS; first += 1000) {
    const entries = Array.from({ length: Math.min(1000, ROWS - first) }, (_, i) => ({ key: key(first + i), mutations: [set('a', 1n), set('b', 1n)] }));
    await store.mutateRows(ref, entries, deadline());
  }
  const generation = (await server.cli('--raw', 'HGET', `kvcrud:{${instance}/t}:table`, 'generation')).trim();
  const tag = `kvcrud:{${instance}/t}:${generation}`;
  const rowKey = (i: number): RedisArgument => Buffer.concat([Buffer.from(`${tag}:r:`), key(i)]);
  const random = () => Math.floor(Math.random() * ROWS);
  let ts = BigInt(Date.now()) * 1000n;

  type Pair = { name: string; bare: (n: number) => Promise<unknown>; store: (n: number) => Promise<unknown> };
  const pairs: Pair[] = [
    {
      name: 'read',
      bare: () => bare.hGetAll(rowKey(random())),
      store: () => store.readRows(ref, [key(random())], { versions: 1 }, deadline()),
    },
    {
      name: 'write',
      // The least a row write needs: the row's fields and its index entry, in one round trip.
      bare: () => {
        const i = random();
        return bare.multi().hSet(rowKey(i), { 'cf:a': `${ts++}:${value.toString()}` }).zAdd(`${tag}:rows`, { score: 0, value: key(i) }).exec();
      },
      store: () => store.mutateRow(ref, key(random()), [set('a', ts++)], deadline()),
    },
    {
      name: 'scan',
      // A page of 100 rows: the index range, then the rows, two round trips.
      bare: async () => {
        const start = random();
        const keys = await bare.zRange(`${tag}:rows`, Buffer.concat([Buffer.from('['), key(start)]), '+', { BY: 'LEX', LIMIT: { offset: 0, count: 100 } });
        const pipeline = bare.multi();
        for (const k of keys) pipeline.hGetAll(Buffer.concat([Buffer.from(`${tag}:r:`), k]));
        return pipeline.execAsPipeline();
      },
      store: async () => {
        let rows = 0;
        for await (const row of store.scanRows(ref, { range: { start: key(random()) }, reverse: false, limit: 100, versions: 1 }, deadline())) rows += row.cells.length > 0 ? 1 : 0;
        return rows;
      },
    },
  ];

  process.stdout.write(`redis-server ${(await server.cli('--raw', 'INFO', 'server')).match(/redis_version:(\S+)/)?.[1]}, ${ROWS} rows of 2 cells (100-byte values), ${callers} callers, ${turns} × ${seconds} s per side\n`);
  process.stdout.write('case   side   ops/s      p50 ms   p99 ms   errors\n');
  const summary: Record<string, { bare: number; store: number }> = {};
  for (const pair of pairs.filter((candidate) => cases.includes(candidate.name))) {
    await load(pair.bare); // warm-up, unmeasured
    await load(pair.store);
    const totals = { bare: 0, store: 0 };
    for (let turn = 0; turn < turns; turn++) {
      for (const side of ['bare', 'store'] as const) {
        const result = await load(pair[side]);
        totals[side] += result.reqPerSec;
        process.stdout.write(
          `${pair.name.padEnd(6)} ${side.padEnd(6)} ${String(result.reqPerSec).padStart(7)}  ${result.latencyMs.p50.toFixed(3).padStart(7)}  ${result.latencyMs.p99.toFixed(3).padStart(7)}   ${result.errors}${result.firstError === undefined ? '' : ` (${result.firstError})`}\n`,
        );
      }
    }
    summary[pair.name] = { bare: Math.round(totals.bare / turns), store: Math.round(totals.store / turns) };
  }
  process.stdout.write('\nmean ops/s: store / bare node-redis\n');
  for (const [name, { bare: b, store: s }] of Object.entries(summary)) {
    process.stdout.write(`${name.padEnd(6)} ${String(s).padStart(7)} / ${String(b).padStart(7)} = ${(s / b).toFixed(2)}\n`);
  }
  process.stdout.write(`memory: ${(await server.cli('--raw', 'MEMORY', 'USAGE', rowKey(0).toString())).trim()} bytes for one row hash of 2 cells (MEMORY USAGE)\n`);
} finally {
  await bare.close();
  await store.close();
  await server.stop();
}
