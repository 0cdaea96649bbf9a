/**
 * The Redis ceiling: node-redis in the benchmark's own process, against the same redis-server as
 * the service, doing the least the same work needs in the store's layout (docs/stores/redis.md):
 * a read is one HGETALL of the row's hash, a write one MULTI of HSET (the row's cells) and ZADD
 * (its index entry). No HTTP, no service.
 */
import { type RedisArgument, RESP_TYPES, createClient } from 'redis';
import { type ClosedLoopLoad, type LoadResult, runClosedLoop } from './measure.ts';
import { CELLS, FAMILY } from './workload.ts';

export type RedisCeilingClient = ReturnType<typeof redisClient>;

export function redisClient(url: string) {
  return createClient({ url, RESP: 2 }).withTypeMapping({ [RESP_TYPES.BLOB_STRING]: Buffer });
}

/** The row keys of one table generation, as the store names them. */
export interface RedisTableKeys {
  /** `kvcrud:{instance/table}:generation`: what the generation's keys (`…:rows`, `…:r:<key>`) start with. */
  readonly tag: string;
}

function rowKey(table: RedisTableKeys, key: string): RedisArgument {
  return `${table.tag}:r:${key}`;
}

/** Reads a row's hash; resolves to its number of cells. */
export async function readRedisRow(client: RedisCeilingClient, table: RedisTableKeys, key: string): Promise<number> {
  const fields = await client.hGetAll(rowKey(table, key));
  return Object.keys(fields).length;
}

export async function writeRedisRow(client: RedisCeilingClient, table: RedisTableKeys, key: string): Promise<void> {
  const timestamp = Date.now() * 1000;
  const cells = Object.fromEntries(CELLS.map((cell) => [`${FAMILY}:${cell.columnName}`, `${timestamp}:${cell.columnValue}`]));
  await client.multi().hSet(rowKey(table, key), cells).zAdd(`${table.tag}:rows`, { score: 0, value: key }).exec();
}

export interface RedisCeilingLoad extends ClosedLoopLoad {
  readonly client: RedisCeilingClient;
  readonly table: RedisTableKeys;
}

/** Runs `connections` callers in a closed loop (each waits for its answer) for the duration. */
export function runRedisCeiling(load: RedisCeilingLoad): Promise<LoadResult> {
  return runClosedLoop(load, {
    read: (key) => readRedisRow(load.client, load.table, key),
    write: (key) => writeRedisRow(load.client, load.table, key),
    readName: 'HGETALL',
    writeName: 'MULTI HSET ZADD',
  });
}
