import { expect } from 'chai';
import { pino } from 'pino';
import { isStoreError } from '../../../src/store/errors.ts';
import { RedisStore } from '../../../src/store/redis/redis-store.ts';
import type { CallOptions, Condition, ModifyRule, Mutation } from '../../../src/store/store.ts';
import { type RedisServer, requireRedis, spawnRedis } from '../../support/redis-server.ts';

const silent = pino({ level: 'silent' });
const call = (): CallOptions => ({ deadline: Date.now() + 5000 });
const b = (text: string) => Buffer.from(text);
const increment = (family: string, column: string, amount: bigint): ModifyRule => ({ type: 'increment', family, column: b(column), amount });
const set = (family: string, column: string, value: string, timestampMicros: bigint): Mutation => ({ type: 'set', family, column: b(column), value: b(value), timestampMicros });
const equals = (family: string, column: string, value: string): Condition => ({ type: 'columnEquals', family, column: b(column), value: b(value) });
const nowMicros = () => BigInt(Date.now()) * 1000n;
const HOUR_MICROS = 3600n * 1_000_000n;

/**
 * Counters and conditions as redis-cli, a client of Redis's own, sees them: the stored cell of a
 * counter is "<timestamp>:" and the counter's 8 big-endian bytes, and a cell redis-cli writes in
 * the documented layout is what a condition or an increment decides on.
 */
describe('redis store: conditions and counters as redis-cli sees them', () => {
  let server: RedisServer;
  let store: RedisStore;
  const t = { instance: 'inst', table: 't' };
  let row: string;
  let rows: string;

  before(async function () {
    requireRedis(this);
    server = await spawnRedis();
    store = RedisStore.open({ url: server.url, instances: ['inst'], logger: silent });
  });
  after(async () => {
    await store?.close();
    await server?.stop();
  });
  beforeEach(async () => {
    await server.cli('FLUSHALL');
    await store.createTable(t, [{ name: 'cf' }, { name: 'hour', maxAgeSeconds: 3600 }], call());
    const generation = (await server.cli('--raw', 'HGET', 'kvcrud:{inst/t}:table', 'generation')).trim();
    rows = `kvcrud:{inst/t}:${generation}:rows`;
    row = `kvcrud:{inst/t}:${generation}:r:k`;
  });

  /** The stored cell as redis-cli --raw prints it, byte for byte: timestamp, then value. */
  async function storedCell(field: string): Promise<{ timestamp: string; value: Buffer }> {
    const raw = Buffer.from(await server.cli('--raw', 'HGET', row, field), 'latin1');
    const cell = raw.subarray(0, raw.length - 1); // redis-cli ends its output with a newline
    const colon = cell.indexOf(':');
    return { timestamp: cell.toString('latin1', 0, colon), value: cell.subarray(colon + 1) };
  }

  /** Writes a row in the documented layout with redis-cli: the cell, and the key in the index. */
  async function cliWrite(field: string, timestamp: bigint, value: string): Promise<void> {
    await server.cli('HSET', row, field, `${timestamp}:${value}`);
    await server.cli('ZADD', rows, '0', 'k');
  }

  it('stores a counter incremented through the store as 8 big-endian bytes, which redis-cli reads back', async () => {
    const [first] = (await store.readModifyWriteRow(t, b('k'), [increment('cf', 'n', 0x0102030405060708n)], call())).cells;
    // redis-cli quotes bytes 7 and 8 as C does: \a and \b.
    expect(await server.cli('HGET', row, 'cf:n')).to.equal(`"${first?.timestampMicros}:\\x01\\x02\\x03\\x04\\x05\\x06\\a\\b"\n`);
    // Down through zero, wrapping to all ones: -1.
    await store.readModifyWriteRow(t, b('k'), [increment('cf', 'n', -0x0102030405060709n)], call());
    const cell = await storedCell('cf:n');
    expect(cell.value).to.deep.equal(Buffer.alloc(8, 0xff));
    expect(cell.value.readBigInt64BE()).to.equal(-1n);
    // And up past int64's top, wrapping to its bottom, as Bigtable does.
    await store.readModifyWriteRow(t, b('k'), [increment('cf', 'n', 2n ** 63n - 1n), increment('cf', 'n', 2n)], call());
    expect((await storedCell('cf:n')).value.readBigInt64BE()).to.equal(-(2n ** 63n));
    expect(await server.cli('ZRANGE', rows, '-', '+', 'BYLEX')).to.equal('1) "k"\n');
  });

  it('increments a counter redis-cli wrote as 8 bytes, and refuses one of 7 bytes, leaving it as it was', async () => {
    const ts = nowMicros();
    // "00000041" is the 8 bytes 0x3030303030303431: the store adds 1 to its last byte.
    await cliWrite('cf:n', ts, '00000041');
    await cliWrite('cf:text', ts, 'seven-b');
    const [counted] = (await store.readModifyWriteRow(t, b('k'), [increment('cf', 'n', 1n)], call())).cells;
    expect(counted?.value.toString()).to.equal('00000042');
    expect(await server.cli('HGET', row, 'cf:n')).to.equal(`"${counted?.timestampMicros}:00000042"\n`);

    const refused = await store.readModifyWriteRow(t, b('k'), [increment('cf', 'n', 1n), increment('cf', 'text', 1n)], call()).catch((error: unknown) => error);
    expect(isStoreError(refused) && refused.code === 'FAILED_PRECONDITION' && refused.reason === 'NOT_A_COUNTER', String(refused)).to.equal(true);
    expect(await server.cli('HGETALL', row)).to.equal(`1) "cf:n"\n2) "${counted?.timestampMicros}:00000042"\n3) "cf:text"\n4) "${ts}:seven-b"\n`);
  });

  it('decides a condition on a cell redis-cli wrote, and applies the branch where redis-cli sees it', async () => {
    const ts = nowMicros();
    await cliWrite('cf:state', ts, 'draft');
    expect(await store.checkAndMutateRow(t, b('k'), { conditions: [equals('cf', 'state', 'draft')], mutations: [set('cf', 'state', 'published', ts + 1n)], otherwise: [] }, call())).to.equal(true);
    expect(await server.cli('HGET', row, 'cf:state')).to.equal(`"${ts + 1n}:published"\n`);
    const again = { conditions: [equals('cf', 'state', 'draft')], mutations: [set('cf', 'state', 'published again', ts + 2n)], otherwise: [set('cf', 'conflicts', '1', ts + 2n)] };
    expect(await store.checkAndMutateRow(t, b('k'), again, call())).to.equal(false);
    expect(await server.cli('HGETALL', row)).to.equal(`1) "cf:state"\n2) "${ts + 1n}:published"\n3) "cf:conflicts"\n4) "${ts + 2n}:1"\n`);
  });

  it('takes a cell redis-cli wrote past its family maxAge as absent, and the write removes it', async () => {
    await cliWrite('hour:lock', nowMicros() - 2n * HOUR_MICROS, 'stale-owner');
    const claim = { conditions: [{ type: 'columnExists', family: 'hour', column: b('lock'), exists: false } as const], mutations: [set('cf', 'owner', 'me', nowMicros())], otherwise: [] };
    expect(await store.checkAndMutateRow(t, b('k'), claim, call())).to.equal(true);
    expect(await server.cli('HEXISTS', row, 'hour:lock')).to.equal('(integer) 0\n');
    expect(await server.cli('HKEYS', row)).to.equal('1) "cf:owner"\n');
  });

  it('counts from 0 and appends to nothing where redis-cli wrote a cell past its family maxAge, replacing it', async () => {
    const stale = nowMicros() - 2n * HOUR_MICROS;
    // Counted as they are, the first would be 00000042 and the second refused as 7 bytes.
    await cliWrite('hour:n', stale, '00000041');
    await cliWrite('hour:text', stale, 'seven-b');
    await cliWrite('hour:log', stale, 'stale');
    await cliWrite('hour:live', nowMicros(), '00000041');
    const before = nowMicros();
    const { cells } = await store.readModifyWriteRow(
      t,
      b('k'),
      [increment('hour', 'n', 1n), increment('hour', 'text', 5n), { type: 'append', family: 'hour', column: b('log'), value: b('.') }, increment('hour', 'live', 1n)],
      call(),
    );
    const answered = Object.fromEntries(cells.map((cell) => [cell.column.toString(), cell.value]));
    expect(answered['n']?.readBigInt64BE()).to.equal(1n);
    expect(answered['text']?.readBigInt64BE()).to.equal(5n);
    expect(answered['log']?.toString()).to.equal('.');
    expect(answered['live']?.toString()).to.equal('00000042');
    for (const cell of cells) expect(cell.timestampMicros >= before, cell.column.toString()).to.equal(true);
    // redis-cli sees the new cells in place of the expired ones.
    for (const [field, value] of [['hour:n', '\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x01'], ['hour:text', '\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x05'], ['hour:log', '.']] as const) {
      const column = field.slice('hour:'.length);
      expect(await server.cli('HGET', row, field), field).to.equal(`"${cells.find((cell) => cell.column.toString() === column)?.timestampMicros}:${value}"\n`);
    }
  });
});
