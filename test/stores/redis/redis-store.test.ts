import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { pino } from 'pino';
import { isStoreError } from '../../../src/store/errors.ts';
import { RedisStore } from '../../../src/store/redis/redis-store.ts';
import type { CallOptions, Mutation, Row } from '../../../src/store/store.ts';
import { type RedisServer, requireRedis, spawnRedis } from '../../support/redis-server.ts';

const silent = pino({ level: 'silent' });
const call = (): CallOptions => ({ deadline: Date.now() + 5000 });
const b = (text: string) => Buffer.from(text);
const set = (family: string, column: string, value: string | Buffer, timestampMicros: bigint): Mutation => ({
  type: 'set',
  family,
  column: b(column),
  value: typeof value === 'string' ? b(value) : value,
  timestampMicros,
});
const nowMicros = () => BigInt(Date.now()) * 1000n;

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  expect.fail('expected a rejection');
}

async function collect(rows: AsyncIterable<Row>): Promise<string[]> {
  const keys: string[] = [];
  for await (const row of rows) keys.push(row.key.toString());
  return keys;
}

describe('redis store', () => {
  let server: RedisServer;
  let store: RedisStore;
  const t = { instance: 'inst', table: 't' };

  before(async function () {
    requireRedis(this);
    server = await spawnRedis();
    store = RedisStore.open({ url: server.url, instances: ['inst', 'other'], logger: silent });
  });
  after(async () => {
    await store?.close();
    await server?.stop();
  });
  beforeEach(async () => {
    await server.cli('FLUSHALL');
  });

  describe('tables', () => {
    it('creates, describes, lists and deletes a table; every family is described as keeping one version', async () => {
      await store.createTable(t, [{ name: 'b' }, { name: 'a', maxAgeSeconds: 60, maxVersions: 3 }], call());
      expect(await store.describeTable(t, call())).to.deep.equal({
        name: 't',
        families: [
          { name: 'a', maxVersions: 1, maxAgeSeconds: 60 },
          { name: 'b', maxVersions: 1 },
        ],
      });
      expect(await store.listTables('inst', call())).to.deep.equal(['t']);
      expect(await store.listTables('other', call())).to.deep.equal([]);
      await store.deleteTable(t, call());
      expect(await store.listTables('inst', call())).to.deep.equal([]);
      const error = await rejection(store.describeTable(t, call()));
      expect(isStoreError(error, 'NOT_FOUND') && error.resource === 'table').to.equal(true);
    });

    it('refuses to create a table twice with ALREADY_EXISTS and leaves the first one unchanged', async () => {
      await store.createTable(t, [{ name: 'cf' }], call());
      await store.mutateRow(t, b('k'), [set('cf', 'c', 'v', 1n)], call());
      const error = await rejection(store.createTable(t, [{ name: 'other' }], call()));
      expect(isStoreError(error, 'ALREADY_EXISTS') && error.resource === 'table').to.equal(true);
      expect((await store.describeTable(t, call())).families.map((family) => family.name)).to.deep.equal(['cf']);
      expect((await store.readRows(t, [b('k')], { versions: 1 }, call()))[0]?.cells[0]?.value.toString()).to.equal('v');
    });

    it('answers NOT_FOUND table for every call on a missing table', async () => {
      const notFound = (error: unknown) => isStoreError(error, 'NOT_FOUND') && error.resource === 'table' && error.resourceName === 't';
      expect(notFound(await rejection(store.deleteTable(t, call())))).to.equal(true);
      expect(notFound(await rejection(store.mutateRow(t, b('k'), [set('cf', 'c', 'v', 1n)], call())))).to.equal(true);
      expect(notFound(await rejection(store.mutateRows(t, [{ key: b('k'), mutations: [{ type: 'deleteRow' }] }], call())))).to.equal(true);
      expect(notFound(await rejection(store.readRows(t, [b('k')], { versions: 1 }, call())))).to.equal(true);
      expect(notFound(await rejection(collect(store.scanRows(t, { range: {}, reverse: false, limit: 10, versions: 1 }, call()))))).to.equal(true);
    });

    it('keeps instances apart: the same table name in two instances holds different rows', async () => {
      const other = { instance: 'other', table: 't' };
      await store.createTable(t, [{ name: 'cf' }], call());
      await store.createTable(other, [{ name: 'cf' }], call());
      await store.mutateRow(t, b('k'), [set('cf', 'c', 'inst', 1n)], call());
      await store.mutateRow(other, b('k'), [set('cf', 'c', 'other', 1n)], call());
      const [mine] = await store.readRows(t, [b('k')], { versions: 1 }, call());
      const [theirs] = await store.readRows(other, [b('k')], { versions: 1 }, call());
      expect(mine?.cells[0]?.value.toString()).to.equal('inst');
      expect(theirs?.cells[0]?.value.toString()).to.equal('other');
    });
  });

  describe('row writes', () => {
    beforeEach(async () => {
      await store.createTable(t, [{ name: 'cf' }, { name: 'meta' }], call());
    });

    it('writes and reads bytes exactly, cells ordered by family then column bytes', async () => {
      const binary = Buffer.from([0x00, 0xff, 0x3a, 0x80, 0x0a]);
      await store.mutateRow(
        t,
        binary,
        [set('meta', 'z', 'last', 5n), set('cf', '\u00e9', binary, 7n), set('cf', 'a:b', 'colon', 8n), { type: 'set', family: 'cf', column: binary, value: b(''), timestampMicros: -3n }],
        call(),
      );
      const [row] = await store.readRows(t, [binary], { versions: 1 }, call());
      expect(row?.key.equals(binary)).to.equal(true);
      expect(row?.cells.map((cell) => [cell.family, cell.column.toString('hex'), cell.value.toString('hex'), cell.timestampMicros])).to.deep.equal([
        ['cf', binary.toString('hex'), '', -3n],
        ['cf', b('a:b').toString('hex'), b('colon').toString('hex'), 8n],
        ['cf', b('\u00e9').toString('hex'), binary.toString('hex'), 7n],
        ['meta', b('z').toString('hex'), b('last').toString('hex'), 5n],
      ]);
    });

    it('never lets an older timestamp replace a newer value; an equal one replaces it', async () => {
      const key = b('row');
      await store.mutateRow(t, key, [set('cf', 'c', 'new', 2_000_000_000_000_000n)], call());
      await store.mutateRow(t, key, [set('cf', 'c', 'old', 1_000_000_000_000_000n)], call());
      let [row] = await store.readRows(t, [key], { versions: 1 }, call());
      expect(row?.cells[0]?.value.toString()).to.equal('new');
      await store.mutateRow(t, key, [set('cf', 'c', 'same', 2_000_000_000_000_000n)], call());
      [row] = await store.readRows(t, [key], { versions: 1 }, call());
      expect(row?.cells[0]?.value.toString()).to.equal('same');
      // int64 timestamps beyond a double's exact range, and negative ones, compare exactly.
      await store.mutateRow(t, key, [set('cf', 'big', 'a', 9_223_372_036_854_775_806n)], call());
      await store.mutateRow(t, key, [set('cf', 'big', 'b', 9_223_372_036_854_775_805n)], call());
      await store.mutateRow(t, key, [set('cf', 'neg', 'a', -5n)], call());
      await store.mutateRow(t, key, [set('cf', 'neg', 'b', -10n)], call());
      [row] = await store.readRows(t, [key], { versions: 1, columns: [{ family: 'cf', column: b('big') }, { family: 'cf', column: b('neg') }] }, call());
      expect(row?.cells.map((cell) => cell.value.toString())).to.deep.equal(['a', 'a']);
    });

    it('writes nothing when a mutation names a missing family, and names the first such family', async () => {
      await store.mutateRow(t, b('k'), [set('cf', 'c', 'before', 1n)], call());
      const error = await rejection(
        store.mutateRow(t, b('k'), [set('cf', 'c', 'after', 2n), { type: 'deleteFamily', family: 'nope' }, set('zzz', 'c', 'x', 2n)], call()),
      );
      expect(isStoreError(error, 'NOT_FOUND') && error.resource === 'columnFamily' && error.resourceName === 'nope').to.equal(true);
      const [row] = await store.readRows(t, [b('k')], { versions: 1 }, call());
      expect(row?.cells.map((cell) => cell.value.toString())).to.deep.equal(['before']);
    });

    it('applies deleteColumn, deleteFamily and deleteRow in order, and an emptied row leaves the index', async () => {
      const key = b('k');
      await store.mutateRow(t, key, [set('cf', 'a', '1', 1n), set('cf', 'b', '2', 1n), set('meta', 'm', '3', 1n)], call());
      await store.mutateRow(t, key, [{ type: 'deleteColumn', family: 'cf', column: b('a') }], call());
      let [row] = await store.readRows(t, [key], { versions: 1 }, call());
      expect(row?.cells.map((cell) => cell.column.toString())).to.deep.equal(['b', 'm']);
      await store.mutateRow(t, key, [{ type: 'deleteFamily', family: 'cf' }], call());
      [row] = await store.readRows(t, [key], { versions: 1 }, call());
      expect(row?.cells.map((cell) => cell.column.toString())).to.deep.equal(['m']);
      await store.mutateRow(t, key, [{ type: 'deleteRow' }, set('cf', 'after', 'x', 1n)], call());
      [row] = await store.readRows(t, [key], { versions: 1 }, call());
      expect(row?.cells.map((cell) => cell.column.toString())).to.deep.equal(['after']);
      await store.mutateRow(t, key, [{ type: 'deleteRow' }], call());
      expect(await store.readRows(t, [key], { versions: 1 }, call())).to.deep.equal([null]);
      expect(await collect(store.scanRows(t, { range: {}, reverse: false, limit: 10, versions: 1 }, call()))).to.deep.equal([]);
      // Deleting what is not there is not an error.
      await store.mutateRow(t, b('never'), [{ type: 'deleteRow' }, { type: 'deleteColumn', family: 'cf', column: b('x') }], call());
    });

    it('mutateRows applies each entry on its own and reports a bad entry by its index', async () => {
      const results = await store.mutateRows(
        t,
        [
          { key: b('a'), mutations: [set('cf', 'c', '1', 1n)] },
          { key: b('b'), mutations: [set('nope', 'c', '2', 1n)] },
          { key: b('a'), mutations: [set('cf', 'd', '3', 1n)] },
        ],
        call(),
      );
      expect(results[0]).to.equal(undefined);
      expect(isStoreError(results[1], 'NOT_FOUND') && results[1].resource === 'columnFamily' && results[1].resourceName === 'nope').to.equal(true);
      expect(results[2]).to.equal(undefined);
      const rows = await store.readRows(t, [b('a'), b('b'), b('a')], { versions: 1 }, call());
      expect(rows.map((row) => row?.cells.map((cell) => cell.value.toString()) ?? null)).to.deep.equal([['1', '3'], null, ['1', '3']]);
    });

    it('reads a row of 20,000 cells back whole, ordered by family then column bytes, by readRows and by a scan', async () => {
      const cells = new Map<string, Mutation & { type: 'set' }>();
      for (let i = 0; cells.size < 20_000; i++) {
        const family = i % 3 === 0 ? 'meta' : 'cf';
        // Raw bytes of 0-4 (and some of 6) bytes: empty columns, 0x00, 0xff, invalid UTF-8.
        const column = randomBytes(i % 5 === 0 ? 6 : i % 5);
        const mutation = { type: 'set' as const, family, column, value: randomBytes(i % 7), timestampMicros: BigInt(i % 11) * 1_000_003n - 5n };
        cells.set(`${family}:${column.toString('hex')}`, mutation);
      }
      await store.mutateRow(t, b('wide'), [...cells.values()], call());
      const expected = [...cells.values()]
        .sort((x, y) => (x.family !== y.family ? (x.family < y.family ? -1 : 1) : Buffer.compare(x.column, y.column)))
        .map((cell) => [cell.family, cell.column.toString('hex'), cell.value.toString('hex'), cell.timestampMicros]);
      const shown = (row: Row | null | undefined) => row?.cells.map((cell) => [cell.family, cell.column.toString('hex'), cell.value.toString('hex'), cell.timestampMicros]);
      const [row] = await store.readRows(t, [b('wide')], { versions: 1 }, call());
      expect(shown(row)).to.deep.equal(expected);
      const scanned: Row[] = [];
      for await (const each of store.scanRows(t, { range: {}, limit: 1, reverse: false, versions: 1 }, call())) scanned.push(each);
      expect(shown(scanned[0])).to.deep.equal(expected);
    });

    it('reads the columns and families a selection names, and null for a row with none of them', async () => {
      await store.mutateRow(t, b('k'), [set('cf', 'a', '1', 1n), set('cf', 'b', '2', 1n), set('meta', 'm', '3', 1n)], call());
      const read = async (columns: Array<{ family: string; column?: Buffer }>) =>
        (await store.readRows(t, [b('k')], { versions: 1, columns }, call()))[0]?.cells.map((cell) => `${cell.family}:${cell.column.toString()}`) ?? null;
      expect(await read([{ family: 'meta' }])).to.deep.equal(['meta:m']);
      expect(await read([{ family: 'cf', column: b('b') }, { family: 'meta' }])).to.deep.equal(['cf:b', 'meta:m']);
      expect(await read([{ family: 'cf', column: b('zz') }])).to.equal(null);
    });
  });

  describe('maxAge', () => {
    it('never reads a cell past its family maxAge, does not write one, and prunes expired cells on the next write', async () => {
      await store.createTable(t, [{ name: 'short', maxAgeSeconds: 1 }, { name: 'keep' }], call());
      const key = b('k');
      const now = nowMicros();
      await store.mutateRow(t, key, [set('short', 'old', 'gone', now - 10_000_000n), set('short', 'fresh', 'here', now), set('keep', 'k', 'forever', 1n)], call());
      let [row] = await store.readRows(t, [key], { versions: 1 }, call());
      expect(row?.cells.map((cell) => cell.column.toString())).to.deep.equal(['k', 'fresh']);
      // The expired write was not stored at all.
      expect(await server.cli('HLEN', `kvcrud:{inst/t}:${await generation()}:r:k`)).to.equal('(integer) 2\n');
      await new Promise((resolve) => setTimeout(resolve, 1300));
      [row] = await store.readRows(t, [key], { versions: 1 }, call());
      expect(row?.cells.map((cell) => cell.column.toString())).to.deep.equal(['k']);
      expect(await collect(store.scanRows(t, { range: {}, reverse: false, limit: 10, versions: 1, columns: [{ family: 'short' }] }, call()))).to.deep.equal([]);
      await store.mutateRow(t, key, [set('keep', 'k2', 'x', 1n)], call());
      expect(await server.cli('HLEN', `kvcrud:{inst/t}:${await generation()}:r:k`)).to.equal('(integer) 2\n');
    });
  });

  describe('scans', () => {
    const keys = ['a', 'ab', 'b', 'b\u0000', 'ba', 'c', '\u00ff'];
    beforeEach(async () => {
      await store.createTable(t, [{ name: 'cf' }, { name: 'other' }], call());
      for (const key of keys) await store.mutateRow(t, b(key), [set(key === 'ba' ? 'other' : 'cf', 'c', key, 1n)], call());
    });
    const scan = (range: { start?: string; end?: string }, options: { reverse?: boolean; limit?: number; columns?: Array<{ family: string }> } = {}) =>
      collect(
        store.scanRows(
          t,
          {
            range: { ...(range.start === undefined ? {} : { start: b(range.start) }), ...(range.end === undefined ? {} : { end: b(range.end) }) },
            reverse: options.reverse ?? false,
            limit: options.limit ?? 100,
            versions: 1,
            ...(options.columns === undefined ? {} : { columns: options.columns }),
          },
          call(),
        ),
      );

    it('yields rows in key byte order between an inclusive start and an exclusive end', async () => {
      const sorted = [...keys].sort((x, y) => Buffer.compare(b(x), b(y)));
      expect(await scan({})).to.deep.equal(sorted);
      expect(await scan({ start: 'ab', end: 'ba' })).to.deep.equal(['ab', 'b', 'b\u0000']);
      expect(await scan({ start: 'b' }, { limit: 2 })).to.deep.equal(['b', 'b\u0000']);
    });

    it('yields rows in descending order when reverse, from the largest key below end', async () => {
      const sorted = [...keys].sort((x, y) => Buffer.compare(b(y), b(x)));
      expect(await scan({}, { reverse: true })).to.deep.equal(sorted);
      expect(await scan({ start: 'ab', end: 'ba' }, { reverse: true })).to.deep.equal(['b\u0000', 'b', 'ab']);
      expect(await scan({ end: 'b' }, { reverse: true, limit: 1 })).to.deep.equal(['ab']);
    });

    it('skips rows with none of the selected cells, and still yields `limit` rows across batches', async () => {
      expect(await scan({}, { columns: [{ family: 'other' }] })).to.deep.equal(['ba']);
      const many = Array.from({ length: 1500 }, (_, i) => `m${String(i).padStart(5, '0')}`);
      const results = await store.mutateRows(
        t,
        many.map((key, i) => ({ key: b(key), mutations: [set(i % 3 === 0 ? 'other' : 'cf', 'c', key, 1n)] })),
        call(),
      );
      expect(results.every((result) => result === undefined)).to.equal(true);
      const selected = await scan({ start: 'm' }, { columns: [{ family: 'other' }], limit: 400 });
      expect(selected).to.deep.equal(many.filter((_, i) => i % 3 === 0).slice(0, 400));
      const all = await scan({ start: 'm', end: 'n' }, { limit: 1001, reverse: true });
      expect(all).to.deep.equal([...many].reverse().slice(0, 1001));
    });

    it('stops when the caller breaks off', async () => {
      const seen: string[] = [];
      for await (const row of store.scanRows(t, { range: {}, reverse: false, limit: 100, versions: 1 }, call())) {
        seen.push(row.key.toString());
        if (seen.length === 2) break;
      }
      expect(seen).to.deep.equal(['a', 'ab']);
    });
  });

  describe('several processes on one Redis', () => {
    it('never serves a table another process deleted or recreated from its cache', async () => {
      const second = RedisStore.open({ url: server.url, instances: ['inst'], logger: silent });
      try {
        await store.createTable(t, [{ name: 'cf' }], call());
        await store.mutateRow(t, b('k'), [set('cf', 'c', 'first', 1n)], call());
        expect((await second.readRows(t, [b('k')], { versions: 1 }, call()))[0]?.cells[0]?.value.toString()).to.equal('first');
        await store.deleteTable(t, call());
        const error = await rejection(second.readRows(t, [b('k')], { versions: 1 }, call()));
        expect(isStoreError(error, 'NOT_FOUND') && error.resource === 'table').to.equal(true);
        expect((await second.readRows(t, [b('k')], { versions: 1 }, call()).catch(() => 'missing'))).to.equal('missing');
        await store.createTable(t, [{ name: 'new' }], call());
        // second's cached generation is gone: it finds the new table, and its new family.
        expect(await second.readRows(t, [b('k')], { versions: 1 }, call())).to.deep.equal([null]);
        await second.mutateRow(t, b('k'), [set('new', 'c', 'second', 1n)], call());
        expect((await store.readRows(t, [b('k')], { versions: 1 }, call()))[0]?.cells[0]?.value.toString()).to.equal('second');
      } finally {
        await second.close();
      }
    });
  });

  describe('layout', () => {
    it('redis-cli shows the documented keys for a row written through the store', async () => {
      await store.createTable(t, [{ name: 'cf', maxAgeSeconds: 3600 }, { name: 'other' }], call());
      const ts = nowMicros();
      await store.mutateRow(t, b('user#1'), [set('cf', 'name', 'Ada', ts), set('other', 'n', Buffer.from([0, 1]), 42n)], call());
      expect(await store.listTables('inst', call())).to.deep.equal(['t']);
      const gen = await generation();
      expect(gen).to.match(/^[0-9a-f]{12}$/);
      expect(await server.cli('HGETALL', 'kvcrud:{inst/t}:table')).to.equal(
        `1) "generation"\n2) "${gen}"\n3) "families"\n4) "[{\\"name\\":\\"cf\\",\\"maxAgeSeconds\\":3600},{\\"name\\":\\"other\\"}]"\n`,
      );
      expect(await server.cli('ZRANGE', `kvcrud:{inst/t}:${gen}:rows`, '-', '+', 'BYLEX')).to.equal('1) "user#1"\n');
      expect(await server.cli('HGETALL', `kvcrud:{inst/t}:${gen}:r:user#1`)).to.equal(
        `1) "cf:name"\n2) "${ts}:Ada"\n3) "other:n"\n4) "42:\\x00\\x01"\n`,
      );
      expect(await server.cli('TYPE', `kvcrud:{inst/t}:${gen}:r:user#1`)).to.equal('hash\n');
      // The list of tables: each name with the time (ms) it was registered; and the list is whole.
      const registered = Number((await server.cli('--raw', 'HGET', 'kvcrud:{inst}:tables', 't')).trim());
      expect(Math.abs(registered - Date.now())).to.be.below(10_000);
      expect(await server.cli('--raw', 'GET', 'kvcrud:{inst}:catalog-state')).to.match(/^complete [0-9a-f]{12}\n$/);
      const keys = (await server.cli('--raw', '--scan')).trim().split('\n').sort();
      expect(keys).to.deep.equal(
        [
          'kvcrud:{inst}:tables',
          'kvcrud:{inst}:catalog-state',
          'kvcrud:{inst/t}:table',
          `kvcrud:{inst/t}:${gen}:r:user#1`,
          `kvcrud:{inst/t}:${gen}:rows`,
          `kvcrud:{inst/t}:${gen}:changes`,
        ].sort(),
      );
    });
  });

  async function generation(): Promise<string> {
    return (await server.cli('--raw', 'HGET', 'kvcrud:{inst/t}:table', 'generation')).trim();
  }
});
