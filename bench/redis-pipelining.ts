/**
 * `node bench/redis-pipelining.ts`: whether node-redis sends the commands issued in one turn of
 * the event loop in one socket write, and what that is worth. Against a redis-server of its own
 * holding `--rows` hashes of 2 fields, it issues `--commands` HGETALLs two ways, `--rounds` times
 * each: all in one turn (then awaits them together), and one by one (each awaited before the
 * next). For each it reports the time per command, the client's socket writes (counted on
 * net.Socket's `_write`/`_writev`, the calls that reach the kernel after cork/uncork) and the
 * reads redis-server made on its sockets (`total_reads_processed` of INFO stats). Options:
 *   --commands N   HGETALLs per round (default 100)
 *   --rounds N     rounds per way, after one unmeasured round (default 200)
 *   --rows N       preloaded hashes (default 1000)
 */
import { Socket } from 'node:net';
import { parseArgs } from 'node:util';
import { performance } from 'node:perf_hooks';
import { RESP_TYPES, createClient } from 'redis';
import { spawnRedis } from '../test/support/redis-server.ts';

const { values: args } = parseArgs({
  options: {
    commands: { type: 'string', default: '100' },
    rounds: { type: 'string', default: '200' },
    rows: { type: 'string', default: '1000' },
  },
});
const COMMANDS = Number(args.commands);
const ROUNDS = Number(args.rounds);
const ROWS = Number(args.rows);

// Every socket write of this process, as the stream hands it to the handle: a corked batch of
// chunks is one _writev.
let socketWrites = 0;
const prototype = Socket.prototype as unknown as Record<'_write' | '_writev', (...rest: unknown[]) => unknown>;
for (const method of ['_write', '_writev'] as const) {
  const original = prototype[method];
  prototype[method] = function (this: Socket, ...rest: unknown[]) {
    socketWrites++;
    return original.apply(this, rest);
  };
}

const server = await spawnRedis();
const client = createClient({ url: server.url, RESP: 2 }).withTypeMapping({ [RESP_TYPES.BLOB_STRING]: Buffer });
await client.connect();
const key = (i: number) => `row:${String(i).padStart(8, '0')}`;
const random = () => key(Math.floor(Math.random() * ROWS));

async function serverReads(): Promise<number> {
  const stats = await client.info('stats');
  return Number(/total_reads_processed:(\d+)/.exec(stats)?.[1] ?? Number.NaN);
}

async function oneTurn(): Promise<void> {
  await Promise.all(Array.from({ length: COMMANDS }, () => client.hGetAll(random())));
}

async function oneByOne(): Promise<void> {
  for (let i = 0; i < COMMANDS; i++) await client.hGetAll(random());
}

/** Runs `round` ROUNDS times; the figures per round, less the INFO calls that measure them. */
async function measure(round: () => Promise<void>) {
  await round(); // unmeasured
  const reads0 = await serverReads();
  const writes0 = socketWrites;
  const started = performance.now();
  for (let i = 0; i < ROUNDS; i++) await round();
  const ms = performance.now() - started;
  const writes = socketWrites - writes0;
  // The INFO that reads the figure is one more write and one more read.
  const reads = (await serverReads()) - reads0 - 1;
  return { microsPerCommand: (ms * 1000) / (ROUNDS * COMMANDS), writesPerRound: writes / ROUNDS, readsPerRound: reads / ROUNDS };
}

try {
  for (let first = 0; first < ROWS; first += 500) {
    const batch = client.multi();
    for (let i = first; i < Math.min(ROWS, first + 500); i++) batch.hSet(key(i), { 'cf:a': 'x'.repeat(100), 'cf:b': 'y'.repeat(100) });
    await batch.execAsPipeline();
  }
  const version = /redis_version:(\S+)/.exec(await client.info('server'))?.[1];
  process.stdout.write(`redis-server ${version}, node-redis ${(await import('redis/package.json', { with: { type: 'json' } })).default.version}, ${ROWS} hashes of 2 fields, ${COMMANDS} HGETALLs per round, ${ROUNDS} rounds per way\n`);
  process.stdout.write('way           µs/command   client writes/round   server reads/round\n');
  for (const [name, round] of [['one turn', oneTurn], ['one by one', oneByOne]] as const) {
    const result = await measure(round);
    process.stdout.write(`${name.padEnd(12)} ${result.microsPerCommand.toFixed(2).padStart(11)}   ${result.writesPerRound.toFixed(2).padStart(19)}   ${result.readsPerRound.toFixed(2).padStart(18)}\n`);
  }
} finally {
  await client.close();
  await server.stop();
}
