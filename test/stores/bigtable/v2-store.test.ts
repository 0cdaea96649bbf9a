import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { BigtableStore } from '../../../src/store/bigtable/bigtable-store.ts';
import { bigtableDriver } from '../../../src/store/bigtable/driver.ts';
import { type StoreError, isStoreError } from '../../../src/store/errors.ts';
import type { Mutation, Row, ScanRequest, TableRef } from '../../../src/store/store.ts';
import { cbt, cbtBytes } from '../../support/cbt.ts';
import { emulatorHost } from '../../support/emulator.ts';
import { TEST_PROJECT } from '../../support/test-app.ts';

/**
 * What is particular to Bigtable in the v2 store: GC rules, the filters that apply them on read,
 * the family check that keeps mutations atomic on the emulator, and what the emulator cannot do.
 * Every write is read back with Google's own cbt CLI, and what cbt writes is read by the store.
 * The behaviour every store shares is the driver conformance suite's.
 */
describe('Bigtable store (v2 contract) on the emulator', () => {
  let host: string;
  let instance: string;
  let store: BigtableStore;
  let tableCount = 0;

  const call = (ms = 10_000) => ({ deadline: Date.now() + ms });
  const open = (options: { schemaCacheTtlMs?: number } = {}) =>
    new BigtableStore({ projectId: TEST_PROJECT, instanceIds: [instance], emulatorHost: host, ...options });
  const newTable = (): TableRef => ({ instance, table: `t${++tableCount}` });
  const run = (...args: string[]) => cbt(host, instance, ...args);

  before(function () {
    host = emulatorHost(this);
    instance = `v2-${randomBytes(4).toString('hex')}`;
    store = open();
  });
  after(async () => {
    await store?.close();
  });

  describe('tables and GC rules', () => {
    it('creates each family with the GC rule of its policy, as cbt ls shows', async () => {
      const ref = newTable();
      await store.createTable(
        ref,
        [{ name: 'all' }, { name: 'newest2', maxVersions: 2 }, { name: 'hour', maxAgeSeconds: 3600 }, { name: 'both', maxVersions: 3, maxAgeSeconds: 86_400 }],
        call(),
      );
      const rules = Object.fromEntries(
        (await run('ls', ref.table))
          .split('\n')
          .slice(2)
          .filter((line) => line.trim() !== '')
          .map((line) => line.split('\t').filter((field) => field !== '').slice(0, 2)),
      );
      expect(rules).to.deep.equal({
        all: '<never>',
        newest2: 'versions() > 2',
        hour: 'age() > 1h',
        // A union: a version goes as soon as either rule says so.
        both: '(versions() > 3 || age() > 1d)',
      });
    });

    it('describes the families it created with the policies they were given, by name', async () => {
      const ref = newTable();
      await store.createTable(ref, [{ name: 'z', maxVersions: 1 }, { name: 'a', maxVersions: 5, maxAgeSeconds: 60 }, { name: 'm' }], call());
      // A fresh store, so the answer comes from the GC rules Bigtable holds, not from a cache.
      const fresh = open();
      try {
        expect(await fresh.describeTable(ref, call())).to.deep.equal({
          name: ref.table,
          families: [{ name: 'a', maxVersions: 5, maxAgeSeconds: 60 }, { name: 'm' }, { name: 'z', maxVersions: 1 }],
        });
      } finally {
        await fresh.close();
      }
    });

    it('describes rules set with cbt as the policy they amount to', async () => {
      const ref = newTable();
      await run('createtable', ref.table, 'families=plain:never');
      await run('createfamily', ref.table, 'either');
      await run('setgcpolicy', ref.table, 'either', 'maxage=2h', 'or', 'maxversions=4');
      // An intersection drops only versions both beyond 2 and older than 1 h; read as the union.
      await run('createfamily', ref.table, 'bothmust');
      await run('setgcpolicy', ref.table, 'bothmust', 'maxage=1h', 'and', 'maxversions=2');
      expect((await store.describeTable(ref, call())).families).to.deep.equal([
        { name: 'bothmust', maxVersions: 2, maxAgeSeconds: 3600 },
        { name: 'either', maxVersions: 4, maxAgeSeconds: 7200 },
        { name: 'plain' },
      ]);
    });

    it('answers ALREADY_EXISTS for an existing table and leaves its families as they were', async () => {
      const ref = newTable();
      await store.createTable(ref, [{ name: 'f', maxVersions: 1 }], call());
      const error = await failure(store.createTable(ref, [{ name: 'g' }], call()));
      expect(error.code).to.equal('ALREADY_EXISTS');
      expect(await run('ls', ref.table)).to.match(/^f\s+versions\(\) > 1/m).and.not.match(/^g\s/m);
    });

    it('lists and deletes tables as cbt sees them', async () => {
      const ref = newTable();
      await store.createTable(ref, [{ name: 'f' }], call());
      expect(await store.listTables(instance, call())).to.include(ref.table);
      await store.deleteTable(ref, call());
      expect((await run('ls')).split('\n')).to.not.include(ref.table);
      const error = await failure(store.describeTable(ref, call()));
      expect([error.code, error.resource]).to.deep.equal(['NOT_FOUND', 'table']);
    });
  });

  describe('mutations, cross-checked with cbt', () => {
    let ref: TableRef;
    before(async () => {
      ref = newTable();
      await store.createTable(ref, [{ name: 'a' }, { name: 'b' }], call());
    });

    it('cbt reads what mutateRow wrote, bytes that are not UTF-8 included', async () => {
      await store.mutateRow(ref, Buffer.from('bin-row'), [set('a', Buffer.from([0xff, 0x00]), Buffer.from([0x80, 0x7f]), 5_000n), set('b', 'text', 'hello', 6_000n)], call());
      // cbt prints a qualifier as its raw bytes, and a value quoted with escapes.
      const output = await cbtBytes(host, instance, 'read', ref.table, 'prefix=bin-row');
      expect(output.includes(Buffer.from([...Buffer.from('a:'), 0xff, 0x00]))).to.equal(true);
      const text = output.toString('latin1');
      expect(text).to.contain('"\\x80\\x7f"').and.contain('b:text').and.contain('"hello"');
      expect(text).to.contain('@ 1970/01/01-00:00:00.005000');
    });

    it('applies sets and deletes in order, in one mutation, as cbt then shows', async () => {
      const key = Buffer.from('ordered');
      await store.mutateRow(ref, key, [set('a', 'x', 'old', 1_000n), set('a', 'y', 'y', 1_000n), set('b', 'z', 'z', 1_000n)], call());
      await store.mutateRow(
        ref,
        key,
        [{ type: 'deleteColumn', family: 'a', column: Buffer.from('x') }, set('a', 'x', 'new', 2_000n), { type: 'deleteFamily', family: 'b' }, set('b', 'w', 'w', 2_000n)],
        call(),
      );
      const output = await run('read', ref.table, 'prefix=ordered');
      expect(cellsIn(output)).to.deep.equal(['a:x "new"', 'a:y "y"', 'b:w "w"']);
      await store.mutateRow(ref, key, [{ type: 'deleteRow' }], call());
      expect(await run('read', ref.table, 'prefix=ordered')).to.not.contain('ordered');
    });

    it('the store reads what cbt wrote', async () => {
      await run('set', ref.table, 'from-cbt', 'a:q=1@3000', 'a:q=2@4000', 'b:r=3@1000');
      const [row] = await store.readRows(ref, [Buffer.from('from-cbt')], { versions: 5 }, call());
      expect(describeRow(row)).to.deep.equal(['a:q=2@4000', 'a:q=1@3000', 'b:r=3@1000']);
    });

    it('cbt reads what each mutateRows entry wrote, entries for one row applied in order', async () => {
      const results = await store.mutateRows(
        ref,
        [
          { key: Buffer.from('batch-1'), mutations: [set('a', 'c', 'first', 1_000n)] },
          { key: Buffer.from('batch-2'), mutations: [set('a', 'c', 'two', 1_000n)] },
          { key: Buffer.from('batch-1'), mutations: [{ type: 'deleteRow' }] },
          { key: Buffer.from('batch-1'), mutations: [set('b', 'c', 'last', 2_000n)] },
        ],
        call(),
      );
      expect(results).to.deep.equal([undefined, undefined, undefined, undefined]);
      expect(cellsIn(await run('read', ref.table, 'prefix=batch-1'))).to.deep.equal(['b:c "last"']);
      expect(cellsIn(await run('read', ref.table, 'prefix=batch-2'))).to.deep.equal(['a:c "two"']);
    });
  });

  describe('atomicity against the emulator, which applies part of a mutation naming an unknown family', () => {
    let ref: TableRef;
    before(async () => {
      ref = newTable();
      await store.createTable(ref, [{ name: 'a' }, { name: 'doomed' }], call());
    });

    it('mutateRow naming an unknown family fails with NOT_FOUND columnFamily and writes nothing', async () => {
      const error = await failure(
        store.mutateRow(ref, Buffer.from('partial'), [set('a', 'c', 'v', 1_000n), set('nope', 'c', 'v', 1_000n), set('nope2', 'c', 'v', 1_000n)], call()),
      );
      expect([error.code, error.resource, error.resourceName]).to.deep.equal(['NOT_FOUND', 'columnFamily', 'nope']);
      expect(await run('read', ref.table, 'prefix=partial')).to.not.contain('partial');
    });

    it('a mutateRows entry naming an unknown family fails alone, by index, and writes nothing', async () => {
      const results = await store.mutateRows(
        ref,
        [
          { key: Buffer.from('ok-1'), mutations: [set('a', 'c', 'v', 1_000n)] },
          { key: Buffer.from('bad'), mutations: [set('a', 'c', 'v', 1_000n), { type: 'deleteFamily', family: 'nope' }] },
          { key: Buffer.from('ok-2'), mutations: [set('a', 'c', 'v', 1_000n)] },
        ],
        call(),
      );
      expect(results.map((result) => result && [result.code, result.resource, result.resourceName])).to.deep.equal([
        undefined,
        ['NOT_FOUND', 'columnFamily', 'nope'],
        undefined,
      ]);
      expect(await run('read', ref.table, 'prefix=bad')).to.not.contain('bad');
      expect(await run('read', ref.table, 'prefix=ok-')).to.contain('ok-1').and.contain('ok-2');
    });

    it('reports a family deleted with cbt after the schema was cached as NOT_FOUND columnFamily', async () => {
      await store.mutateRow(ref, Buffer.from('before'), [set('doomed', 'c', 'v', 1_000n)], call());
      await run('deletefamily', ref.table, 'doomed');
      const error = await failure(store.mutateRow(ref, Buffer.from('after'), [set('doomed', 'c', 'v', 1_000n)], call()));
      expect([error.code, error.resource, error.resourceName]).to.deep.equal(['NOT_FOUND', 'columnFamily', 'doomed']);
      const results = await store.mutateRows(ref, [{ key: Buffer.from('after'), mutations: [set('doomed', 'c', 'v', 1_000n)] }], call());
      expect(results[0] && [results[0].code, results[0].resourceName]).to.deep.equal(['NOT_FOUND', 'doomed']);
    });

    it('writes to a family cbt added after the schema was cached', async () => {
      await store.mutateRow(ref, Buffer.from('warm'), [set('a', 'c', 'v', 1_000n)], call());
      await run('createfamily', ref.table, 'later');
      await store.mutateRow(ref, Buffer.from('later-row'), [set('later', 'c', 'v', 1_000n)], call());
      expect(cellsIn(await run('read', ref.table, 'prefix=later-row'))).to.deep.equal(['later:c "v"']);
    });
  });

  describe('retention applied on read', () => {
    // The emulator collects garbage eagerly (on every write to a row, on every rule change, and
    // every second or so), so what it holds beyond a policy is seen only when the rule in
    // Bigtable is looser than the one the store knows: here, relaxed with cbt after the store
    // cached the schema. Production Bigtable collects garbage hours or days later, and reads
    // must not show what the policy has expired meanwhile.
    const now = () => BigInt(Date.now()) * 1000n;

    async function relaxedTable(families: string): Promise<TableRef> {
      const ref = newTable();
      await store.createTable(ref, parseFamilies(families), call());
      await store.describeTable(ref, call());
      for (const { name } of parseFamilies(families)) await run('setgcpolicy', ref.table, name, 'never');
      return ref;
    }

    it('never reads a version beyond maxVersions that Bigtable still holds', async () => {
      const ref = await relaxedTable('two:2');
      await run('set', ref.table, 'r', 'two:c=1@1000', 'two:c=2@2000', 'two:c=3@3000', 'two:d=x@1000');
      const [row] = await store.readRows(ref, [Buffer.from('r')], { versions: 10 }, call());
      expect(describeRow(row)).to.deep.equal(['two:c=3@3000', 'two:c=2@2000', 'two:d=x@1000']);
      expect(cellsIn(await run('read', ref.table))).to.have.length(4);
    });

    it('never reads a version older than maxAgeSeconds that Bigtable still holds', async () => {
      const ref = await relaxedTable('hour:h3600');
      const twoHoursAgo = now() / 1000n - 7_200_000n;
      const aMinuteAgo = now() / 1000n - 60_000n;
      await run('set', ref.table, 'r', `hour:c=old@${twoHoursAgo * 1000n}`, `hour:c=recent@${aMinuteAgo * 1000n}`);
      const [row] = await store.readRows(ref, [Buffer.from('r')], { versions: 10 }, call());
      expect(row?.cells.map((cell) => cell.value.toString())).to.deep.equal(['recent']);
      expect(cellsIn(await run('read', ref.table))).to.have.length(2);
      // A row whose every version has expired is no row at all.
      await run('set', ref.table, 'gone', `hour:c=old@${twoHoursAgo * 1000n}`);
      expect(await store.readRows(ref, [Buffer.from('gone')], { versions: 1 }, call())).to.deep.equal([null]);
    });

    it('takes the smaller of a read\'s versions and the family\'s maxVersions, with maxAge too', async () => {
      const ref = await relaxedTable('both:2h60,free');
      const ms = now() / 1000n;
      const at = (msAgo: bigint) => (ms - msAgo) * 1000n;
      await run('set', ref.table, 'r', `both:c=expired@${at(120_000n)}`, `both:c=3@${at(3000n)}`, `both:c=2@${at(2000n)}`, `both:c=1@${at(1000n)}`);
      await run('set', ref.table, 'r', `free:c=3@${at(3000n)}`, `free:c=2@${at(2000n)}`, `free:c=1@${at(1000n)}`);
      const values = async (versions: number) => {
        const [row] = await store.readRows(ref, [Buffer.from('r')], { versions }, call());
        return row?.cells.map((cell) => `${cell.family}=${cell.value.toString()}`);
      };
      expect(await values(1)).to.deep.equal(['both=1', 'free=1']);
      expect(await values(2)).to.deep.equal(['both=1', 'both=2', 'free=1', 'free=2']);
      expect(await values(10)).to.deep.equal(['both=1', 'both=2', 'free=1', 'free=2', 'free=3']);
    });

    it('applies policies to selected columns, and reads families it does not know with the version limit alone', async () => {
      // Names that share prefixes and hold regex characters, for the family filters.
      const ref = await relaxedTable('p:1,p.q:1,pq');
      await run('createfamily', ref.table, 'pzq');
      await run('set', ref.table, 'r', 'p:c=1@1000', 'p:c=2@2000', 'p.q:c=1@1000', 'p.q:c=2@2000', 'pq:c=1@1000', 'pq:c=2@2000', 'pzq:c=1@1000', 'pzq:c=2@2000');
      const [all] = await store.readRows(ref, [Buffer.from('r')], { versions: 5 }, call());
      expect(describeRow(all)).to.deep.equal(['p:c=2@2000', 'p.q:c=2@2000', 'pq:c=2@2000', 'pq:c=1@1000', 'pzq:c=2@2000', 'pzq:c=1@1000']);
      const [selected] = await store.readRows(
        ref,
        [Buffer.from('r')],
        { versions: 5, columns: [{ family: 'p.q', column: Buffer.from('c') }, { family: 'p.q' }, { family: 'pq', column: Buffer.from('c') }, { family: 'pq', column: Buffer.from('c') }] },
        call(),
      );
      // Overlapping selectors yield each cell once.
      expect(describeRow(selected)).to.deep.equal(['p.q:c=2@2000', 'pq:c=2@2000', 'pq:c=1@1000']);
    });

    it('sees a rule changed with cbt once its cached schema expires', async function () {
      this.timeout(60_000);
      const ttlMs = 8000;
      const shortLived = open({ schemaCacheTtlMs: ttlMs });
      try {
        // The cbt commands take a second or more on a busy machine: when they outlast the cache,
        // the first read cannot show the stale rule, and the case is tried again on a new table.
        for (let attempt = 1; ; attempt++) {
          const ref = newTable();
          await shortLived.createTable(ref, [{ name: 'f', maxVersions: 1 }], call());
          const cachedAt = Date.now();
          await run('setgcpolicy', ref.table, 'f', 'never');
          await run('set', ref.table, 'r', 'f:c=1@1000', 'f:c=2@2000');
          const versions = async () => (await shortLived.readRows(ref, [Buffer.from('r')], { versions: 5 }, call()))[0]?.cells.length;
          const stale = await versions();
          if (Date.now() - cachedAt >= ttlMs && attempt < 3) continue;
          expect(stale, 'within the cache lifetime').to.equal(1);
          await new Promise((resolve) => setTimeout(resolve, cachedAt + ttlMs + 50 - Date.now()));
          expect(await versions(), 'after it').to.equal(2);
          return;
        }
      } finally {
        await shortLived.close();
      }
    });

    it('applies the policy on scans as on reads', async () => {
      const ref = await relaxedTable('two:2');
      for (const key of ['k1', 'k2', 'k3']) await run('set', ref.table, key, 'two:c=1@1000', 'two:c=2@2000', 'two:c=3@3000');
      const rows = await scanAll(store, ref, { range: {}, limit: 10, reverse: false, versions: 10 });
      expect(rows.map((row) => `${row.key.toString()}:${row.cells.length}`)).to.deep.equal(['k1:2', 'k2:2', 'k3:2']);
    });
  });

  describe('scans', () => {
    let ref: TableRef;
    before(async () => {
      ref = newTable();
      await store.createTable(ref, [{ name: 'f' }, { name: 'g' }], call());
      const keys = [[0x00], [0x01], [0x61], [0x61, 0x00], [0x62], [0xff], [0xff, 0xff]].map((bytes) => Buffer.from(bytes));
      const results = await store.mutateRows(ref, keys.map((key) => ({ key, mutations: [set('f', 'c', key.toString('hex'), 1_000n)] })), call());
      expect(results.every((result) => result === undefined)).to.equal(true);
      await store.mutateRow(ref, Buffer.from([0x62]), [set('g', 'only-g', 'x', 1_000n)], call());
    });

    const keysOf = (rows: Row[]) => rows.map((row) => row.key.toString('hex'));

    it('yields rows in byte order within [start, end), at most limit', async () => {
      expect(keysOf(await scanAll(store, ref, { range: {}, limit: 100, reverse: false, versions: 1 }))).to.deep.equal(['00', '01', '61', '6100', '62', 'ff', 'ffff']);
      expect(keysOf(await scanAll(store, ref, { range: { start: Buffer.from([0x61]), end: Buffer.from([0xff]) }, limit: 100, reverse: false, versions: 1 }))).to.deep.equal([
        '61',
        '6100',
        '62',
      ]);
      expect(keysOf(await scanAll(store, ref, { range: { start: Buffer.from([0x01]) }, limit: 2, reverse: false, versions: 1 }))).to.deep.equal(['01', '61']);
    });

    it('yields nothing for an empty or inverted range, and still reports a missing table', async () => {
      expect(await scanAll(store, ref, { range: { start: Buffer.from('b'), end: Buffer.from('b') }, limit: 5, reverse: false, versions: 1 })).to.deep.equal([]);
      expect(await scanAll(store, ref, { range: { start: Buffer.from('c'), end: Buffer.from('b') }, limit: 5, reverse: false, versions: 1 })).to.deep.equal([]);
      expect(await scanAll(store, ref, { range: { end: Buffer.alloc(0) }, limit: 5, reverse: false, versions: 1 })).to.deep.equal([]);
      const error = await failure(scanAll(store, { instance, table: 'missing' }, { range: {}, limit: 5, reverse: false, versions: 1 }));
      expect([error.code, error.resource]).to.deep.equal(['NOT_FOUND', 'table']);
    });

    it('skips rows without a selected cell, and rows_limit counts only rows yielded', async () => {
      const rows = await scanAll(store, ref, { range: {}, limit: 1, reverse: false, versions: 1, columns: [{ family: 'g' }] });
      expect(keysOf(rows)).to.deep.equal(['62']);
    });

    it('publishes reverseScan: false on the emulator, which does not serve reversed reads; true on Bigtable', async () => {
      expect(store.capabilities.reverseScan).to.equal(false);
      expect(bigtableDriver.capabilities.reverseScan).to.equal(true);
      const error = await failure(scanAll(store, ref, { range: {}, limit: 5, reverse: true, versions: 1 }));
      expect([error.code, error.capability]).to.deep.equal(['UNIMPLEMENTED', 'reverseScan']);
    });
  });

  describe('wide rows, encoded and decoded a slice at a time', () => {
    it('writes a row of thousands of cells in one mutation and reads it back in contract order, by point read and by scan', async () => {
      const ref = newTable();
      // Families created out of name order, which is also the order the emulator sends them in.
      await store.createTable(ref, [{ name: 'z' }, { name: 'a' }, { name: 'm' }], call());
      const columns = Array.from({ length: 1500 }, (_, i) => `column ${i}`);
      const mutations = ['z', 'a', 'm'].flatMap((family) => columns.flatMap((column) => [set(family, column, `${family}${column}@1`, 1_000n), set(family, column, `${family}${column}@2`, 2_000n)]));
      await store.mutateRow(ref, Buffer.from('wide'), mutations, call(30_000));
      const expected = ['a', 'm', 'z'].flatMap((family) =>
        [...columns].sort().flatMap((column) => [`${family}:${column}=${family}${column}@2@2000`, `${family}:${column}=${family}${column}@1@1000`]),
      );
      const [row] = await store.readRows(ref, [Buffer.from('wide')], { versions: 2 }, call(30_000));
      expect(describeRow(row)).to.deep.equal(expected);
      const [scanned] = await scanAll(store, ref, { range: {}, limit: 1, reverse: false, versions: 2 });
      expect(describeRow(scanned)).to.deep.equal(expected);
    });
  });

  describe('keys Bigtable cannot hold', () => {
    it('reads an empty key as a missing row, and refuses to write one', async () => {
      const ref = newTable();
      await store.createTable(ref, [{ name: 'f' }], call());
      await store.mutateRow(ref, Buffer.from('x'), [set('f', 'c', 'v', 1_000n)], call());
      // An empty row set would read the whole table.
      expect(await store.readRows(ref, [Buffer.alloc(0), Buffer.from('x')], { versions: 1 }, call())).to.have.length(2).and.satisfy((rows: Array<Row | null>) => rows[0] === null && rows[1] !== null);
      const error = await failure(store.mutateRow(ref, Buffer.alloc(0), [set('f', 'c', 'v', 1_000n)], call()));
      expect(error.code).to.equal('INVALID_ARGUMENT');
      const results = await store.mutateRows(ref, [{ key: Buffer.alloc(0), mutations: [set('f', 'c', 'v', 1_000n)] }, { key: Buffer.from('y'), mutations: [set('f', 'c', 'v', 1_000n)] }], call());
      expect(results.map((result) => result?.code)).to.deep.equal(['INVALID_ARGUMENT', undefined]);
    });
  });
});

function set(family: string, column: string | Buffer, value: string | Buffer, timestampMicros: bigint): Mutation {
  return { type: 'set', family, column: Buffer.from(column), value: Buffer.from(value), timestampMicros };
}

/** "name:N" a maxVersions, "name:hS" a maxAgeSeconds, "name:Nh S" both; comma-separated. */
function parseFamilies(spec: string) {
  return spec.split(',').map((family) => {
    const [name = '', policy = ''] = family.split(':');
    const match = /^(\d*)(?:h(\d+))?$/.exec(policy);
    return {
      name,
      ...(match?.[1] ? { maxVersions: Number(match[1]) } : {}),
      ...(match?.[2] ? { maxAgeSeconds: Number(match[2]) } : {}),
    };
  });
}

function describeRow(row: Row | null | undefined): string[] | null {
  return row ? row.cells.map((cell) => `${cell.family}:${cell.column.toString()}=${cell.value.toString()}@${cell.timestampMicros}`) : null;
}

/** The cells of `cbt read` output as "family:column value", in cbt's order. */
function cellsIn(output: string): string[] {
  const cells: string[] = [];
  const lines = output.split('\n');
  lines.forEach((line, index) => {
    const match = /^ {2}(\S+)\s+@/.exec(line);
    if (match) cells.push(`${match[1]} ${(lines[index + 1] ?? '').trim()}`);
  });
  return cells;
}

async function scanAll(store: BigtableStore, ref: TableRef, scan: ScanRequest): Promise<Row[]> {
  const rows: Row[] = [];
  for await (const row of store.scanRows(ref, scan, { deadline: Date.now() + 10_000 })) rows.push(row);
  return rows;
}

/** The StoreError a call fails with; fails the test if it succeeds or throws anything else. */
async function failure(promise: Promise<unknown>): Promise<StoreError> {
  try {
    await promise;
  } catch (error) {
    if (isStoreError(error)) return error;
    throw error;
  }
  throw new Error('expected the call to fail with a StoreError, and it succeeded');
}
