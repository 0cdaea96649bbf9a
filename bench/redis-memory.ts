/**
 * `node bench/redis-memory.ts`: what the Redis store's layout costs in Redis's memory, by
 * MEMORY USAGE on a redis-server of its own: one row hash for several cell counts and value
 * sizes, and the index entry each row adds. Prints a Markdown table for docs/stores/redis.md.
 */
import { pino } from 'pino';
import { RedisStore } from '../src/store/redis/redis-store.ts';
import type { Mutation } from '../src/store/store.ts';
import { spawnRedis } from '../test/support/redis-server.ts';

const ROWS_FOR_INDEX = 10_000;
const instance = 'mem';
const deadline = () => ({ deadline: Date.now() + 30_000 });
const server = await spawnRedis();
const store = RedisStore.open({ url: server.url, instances: [instance], logger: pino({ level: 'warn' }) });
const usage = async (key: string) => Number((await server.cli('--raw', 'MEMORY', 'USAGE', key, 'SAMPLES', '0')).trim());
const generation = async (table: string) => (await server.cli('--raw', 'HGET', `kvcrud:{${instance}/${table}}:table`, 'generation')).trim();

try {
  process.stdout.write(`redis-server ${(await server.cli('--raw', 'INFO', 'server')).match(/redis_version:(\S+)/)?.[1]}, default encodings (hash-max-listpack-entries 128, hash-max-listpack-value 64)\n\n`);
  process.stdout.write('| cells per row | value bytes | row hash (MEMORY USAGE) | per cell |\n|---|---|---|---|\n');
  let n = 0;
  for (const cells of [1, 10, 100, 1000]) {
    for (const valueBytes of [8, 100, 1000]) {
      const table = `t${n++}`;
      const ref = { instance, table };
      await store.createTable(ref, [{ name: 'cf' }], deadline());
      const mutations: Mutation[] = Array.from({ length: cells }, (_, c) => ({
        type: 'set',
        family: 'cf',
        column: Buffer.from(`col${c}`),
        value: Buffer.alloc(valueBytes, 'v'),
        timestampMicros: BigInt(Date.now()) * 1000n,
      }));
      await store.mutateRow(ref, Buffer.from('row-00000001'), mutations, deadline());
      const bytes = await usage(`kvcrud:{${instance}/${table}}:${await generation(table)}:r:row-00000001`);
      process.stdout.write(`| ${cells} | ${valueBytes} | ${bytes} B | ${Math.round(bytes / cells)} B |\n`);
    }
  }

  // The index: one sorted-set member per row.
  const ref = { instance, table: 'index' };
  await store.createTable(ref, [{ name: 'cf' }], deadline());
  for (let first = 0; first < ROWS_FOR_INDEX; first += 1000) {
    const entries = Array.from({ length: 1000 }, (_, i) => ({
      key: Buffer.from(`row-${String(first + i).padStart(8, '0')}`),
      mutations: [{ type: 'set' as const, family: 'cf', column: Buffer.from('c'), value: Buffer.from('v'), timestampMicros: 1n }],
    }));
    await store.mutateRows(ref, entries, deadline());
  }
  const index = await usage(`kvcrud:{${instance}/index}:${await generation('index')}:rows`);
  process.stdout.write(`\nindex: ${index} B for ${ROWS_FOR_INDEX} rows of 12-byte keys = ${Math.round(index / ROWS_FOR_INDEX)} B per row\n`);
} finally {
  await store.close();
  await server.stop();
}
