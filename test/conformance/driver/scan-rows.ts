import { AssertionError, expect } from 'chai';
import type { KeyRange, Row, ScanRequest, TableRef } from '../../../src/store/store.ts';
import type { DriverHarnessFactory } from '../../support/driver-harness.ts';
import { randomInstanceId } from '../../support/driver-harness.ts';
import { call, expectRejection, requireCapability, scanAll, set, show, showRows, useFixture, writeRows } from './fixtures.ts';

/**
 * Keys in byte order, among them the empty-adjacent 0x00, 0xFF, bytes that are not UTF-8, bytes
 * above 0x7F (which a signed comparison would put first) and keys that are prefixes of others.
 */
const ORDERED_KEYS: readonly Buffer[] = [
  Buffer.from([0x00]),
  Buffer.from([0x00, 0x00]),
  Buffer.from([0x00, 0x01]),
  Buffer.from([0x01]),
  Buffer.from('A'),
  Buffer.from('a'),
  Buffer.from('a\u0000'),
  Buffer.from('a\u0000\u0000'),
  Buffer.from('aa'),
  Buffer.from('ab'),
  Buffer.from('b'),
  Buffer.from([0x7f]),
  Buffer.from([0x80]),
  Buffer.from([0xc3, 0x28]),
  Buffer.from([0xfe]),
  Buffer.from([0xff]),
  Buffer.from([0xff, 0x00]),
  Buffer.from([0xff, 0xff]),
];

/** scanRows: bounds, byte order, reverse, limit, selection, early stop, missing table. */
export function scanRowsCases(factory: DriverHarnessFactory): void {
  describe('scanRows', () => {
    const fixture = useFixture(factory);
    let ref: TableRef;

    before(async () => {
      const { table, keepAll, store, at } = fixture();
      ref = await table([keepAll('f')]);
      // Written out of order, in a batch and one by one.
      const shuffled = [...ORDERED_KEYS].reverse();
      await store.mutateRows(
        ref,
        shuffled.slice(0, 9).map((key) => ({ key, mutations: [set('f', 'c', key, at(1))] })),
        call(),
      );
      for (const key of shuffled.slice(9)) await store.mutateRow(ref, key, [set('f', 'c', key, at(1))], call());
    });

    const scan = (range: KeyRange, options: { reverse?: boolean; limit?: number } = {}): Promise<Array<{ key: string }>> =>
      scanAll(fixture().store, ref, { range, reverse: options.reverse ?? false, limit: options.limit ?? fixture().scanLimit, versions: 1 }).then((rows) =>
        rows.map((row) => ({ key: row.key })),
      );
    const keys = (list: readonly Buffer[]) => list.map((key) => ({ key: show(key) }));
    const between = (start: Buffer | undefined, end: Buffer | undefined) =>
      ORDERED_KEYS.filter((key) => (start === undefined || Buffer.compare(key, start) >= 0) && (end === undefined || Buffer.compare(key, end) < 0));

    it('yields every row once, in unsigned byte order of the keys, with its cells', async () => {
      const { store, at } = fixture();
      const rows = await scanAll(store, ref, { range: {}, reverse: false, limit: fixture().scanLimit, versions: 1 });
      expect(rows).to.deep.equal(ORDERED_KEYS.map((key) => ({ key: show(key), cells: [`f:c@${at(1)}=${show(key)}`] })));
    });

    it('includes the start key and excludes the end key', async () => {
      const a = Buffer.from('a');
      const b = Buffer.from('b');
      expect(await scan({ start: a, end: b })).to.deep.equal(keys([Buffer.from('a'), Buffer.from('a\u0000'), Buffer.from('a\u0000\u0000'), Buffer.from('aa'), Buffer.from('ab')]));
      const cases: Array<[Buffer, Buffer]> = [
        [Buffer.from('a\u0000'), Buffer.from([0x80])],
        [Buffer.from([0x00]), Buffer.from([0x00, 0x01])],
        [Buffer.from('a0'), Buffer.from('a1')],
        [Buffer.from([0xff]), Buffer.from([0xff, 0x00, 0x00])],
      ];
      for (const [start, end] of cases) expect(await scan({ start, end }), `${show(start)} .. ${show(end)}`).to.deep.equal(keys(between(start, end)));
    });

    it('scans to the end of the table without an end key, and from its start without a start key', async () => {
      for (const start of [Buffer.from([0x00]), Buffer.from([0x00, 0x00, 0x00]), Buffer.from('ab'), Buffer.from([0xff]), Buffer.from([0xff, 0xff, 0x00])]) {
        expect(await scan({ start }), `from ${show(start)}`).to.deep.equal(keys(between(start, undefined)));
      }
      for (const end of [Buffer.from([0x00]), Buffer.from([0x00, 0x00]), Buffer.from('a\u0000'), Buffer.from([0xff]), Buffer.from([0xff, 0xff, 0x00])]) {
        expect(await scan({ end }), `to ${show(end)}`).to.deep.equal(keys(between(undefined, end)));
      }
    });

    it('yields nothing for a range that holds no row, or whose start is its end', async () => {
      expect(await scan({ start: Buffer.from('a0'), end: Buffer.from('a1') })).to.deep.equal([]);
      expect(await scan({ start: Buffer.from('aa'), end: Buffer.from('aa') })).to.deep.equal([]);
      expect(await scan({ start: Buffer.from([0xff, 0xff, 0x00]) })).to.deep.equal([]);
    });

    it('yields at most `limit` rows, the first ones in key order', async () => {
      expect(await scan({}, { limit: 1 })).to.deep.equal(keys(ORDERED_KEYS.slice(0, 1)));
      expect(await scan({}, { limit: 5 })).to.deep.equal(keys(ORDERED_KEYS.slice(0, 5)));
      expect(await scan({ start: Buffer.from('a') }, { limit: 3 })).to.deep.equal(keys(between(Buffer.from('a'), undefined).slice(0, 3)));
      expect(await scan({}, { limit: ORDERED_KEYS.length })).to.deep.equal(keys(ORDERED_KEYS));
    });

    it('yields rows in descending key order when reverse, from the largest key below the end', async function () {
      requireCapability(this, fixture(), 'reverseScan');
      const descending = (list: readonly Buffer[]) => keys([...list].reverse());
      expect(await scan({}, { reverse: true })).to.deep.equal(descending(ORDERED_KEYS));
      expect(await scan({ start: Buffer.from('a'), end: Buffer.from('b') }, { reverse: true })).to.deep.equal(descending(between(Buffer.from('a'), Buffer.from('b'))));
      expect(await scan({ end: Buffer.from('a\u0000') }, { reverse: true })).to.deep.equal(descending(between(undefined, Buffer.from('a\u0000'))));
      expect(await scan({ start: Buffer.from([0xff]) }, { reverse: true })).to.deep.equal(descending(between(Buffer.from([0xff]), undefined)));
      expect(await scan({ end: Buffer.from([0xff]) }, { reverse: true, limit: 3 })).to.deep.equal(descending(between(undefined, Buffer.from([0xff]))).slice(0, 3));
      expect(await scan({ start: Buffer.from('aa'), end: Buffer.from('aa') }, { reverse: true })).to.deep.equal([]);
    });

    it('skips rows without a selected cell, and counts only the rows it yields against the limit', async () => {
      const { table, keepAll, store, at } = fixture();
      const sparse = await table([keepAll('a'), keepAll('b')]);
      const families = { r1: 'b', r2: 'a', r3: 'b', r4: 'a', r5: 'b', r6: 'a' } as const;
      for (const [key, family] of Object.entries(families)) await store.mutateRow(sparse, Buffer.from(key), [set(family, 'c', key, at(1))], call());
      await store.mutateRow(sparse, Buffer.from('r4'), [set('b', 'd', 'r4-b', at(1))], call());

      const selectA: Omit<ScanRequest, 'limit' | 'reverse'> = { range: {}, columns: [{ family: 'a' }], versions: 1 };
      expect(await scanAll(store, sparse, { ...selectA, reverse: false, limit: 2 })).to.deep.equal([
        { key: 'r2', cells: [`a:c@${at(1)}=r2`] },
        { key: 'r4', cells: [`a:c@${at(1)}=r4`] },
      ]);
      const selectD = { range: {}, columns: [{ family: 'b', column: Buffer.from('d') }], versions: 1 };
      expect(await scanAll(store, sparse, { ...selectD, reverse: false, limit: 10 })).to.deep.equal([{ key: 'r4', cells: [`b:d@${at(1)}=r4-b`] }]);
      if (!store.capabilities.reverseScan) return;
      expect(await scanAll(store, sparse, { ...selectA, reverse: true, limit: 2 })).to.deep.equal([
        { key: 'r6', cells: [`a:c@${at(1)}=r6`] },
        { key: 'r4', cells: [`a:c@${at(1)}=r4`] },
      ]);
    });

    it('reads the newest N versions of each selected column of each row', async function () {
      requireCapability(this, fixture(), 'multipleVersions');
      const { table, keepAll, store, at } = fixture();
      const versioned = await table([keepAll('a'), keepAll('b')]);
      for (const key of ['k1', 'k2']) {
        await store.mutateRow(versioned, Buffer.from(key), [1, 2, 3].flatMap((n) => [set('a', 'c', `${key}-${n}`, at(n)), set('b', 'c', `${key}-b`, at(n))]), call());
      }
      expect(await scanAll(store, versioned, { range: {}, columns: [{ family: 'a' }], versions: 2, reverse: false, limit: 10 })).to.deep.equal([
        { key: 'k1', cells: [`a:c@${at(3)}=k1-3`, `a:c@${at(2)}=k1-2`] },
        { key: 'k2', cells: [`a:c@${at(3)}=k2-3`, `a:c@${at(2)}=k2-2`] },
      ]);
    });

    it('yields `limit` rows of a table larger than the largest limit, each once and in order', async function () {
      this.timeout(120_000);
      const { table, keepAll, store, at, scanLimit } = fixture();
      const big = await table([keepAll('f')]);
      const count = scanLimit + 200;
      const all = Array.from({ length: count }, (_, i) => Buffer.from(`row-${String(i).padStart(6, '0')}`));
      await writeRows(store, big, all.map((key) => ({ key, mutations: [set('f', 'c', 'v', at(1))] })));
      const rows = await scanAll(store, big, { range: {}, reverse: false, limit: scanLimit, versions: 1 });
      expect(rows.map((row) => row.key)).to.deep.equal(all.slice(0, scanLimit).map(show));
      const resume = all[scanLimit] ?? Buffer.alloc(0);
      const rest = await scanAll(store, big, { range: { start: resume }, reverse: false, limit: scanLimit, versions: 1 });
      expect(rest.map((row) => row.key)).to.deep.equal(all.slice(scanLimit, 2 * scanLimit).map(show));
    });

    it('yields each row once and whole, however many bytes its cells hold', async function () {
      this.timeout(120_000);
      const { table, keepAll, store, at, scanLimit } = fixture();
      const heavy = await table([keepAll('a'), keepAll('b')]);
      const size = Math.min(store.limits.valueBytes, 1024 * 1024, Math.floor(store.limits.bytesPerRow / 5));
      const keys = ['h1', 'h2', 'h3'];
      for (const [index, key] of keys.entries()) {
        const value = (column: number) => Buffer.alloc(size, index * 16 + column);
        await store.mutateRow(heavy, Buffer.from(key), [0, 1, 2, 3].map((column) => set(column % 2 === 0 ? 'a' : 'b', `c${column}`, value(column), at(1))), call());
      }
      const summary = (row: Row) => ({ key: show(row.key), cells: row.cells.map((cell) => `${cell.family}:${show(cell.column)} ${cell.value.length}×${cell.value[0]}`) });
      const expected = keys.map((key, index) => ({ key, cells: [0, 2, 1, 3].map((column) => `${column % 2 === 0 ? 'a' : 'b'}:c${column} ${size}×${index * 16 + column}`) }));
      const scanned: Row[] = [];
      for await (const row of store.scanRows(heavy, { range: {}, reverse: false, limit: scanLimit, versions: 1 }, call())) scanned.push(row);
      expect(scanned.map(summary)).to.deep.equal(expected);
      expect((await store.readRows(heavy, keys.map((key) => Buffer.from(key)), { versions: 1 }, call())).map((row) => row && summary(row))).to.deep.equal(expected);
    });

    it('throws NOT_FOUND naming the table from the first next() for a missing table', async () => {
      const { store, instance } = fixture();
      let iterator: AsyncIterator<Row>;
      try {
        iterator = store.scanRows({ instance, table: 'never-made' }, { range: {}, reverse: false, limit: 10, versions: 1 }, call())[Symbol.asyncIterator]();
      } catch (error) {
        throw new AssertionError(`scanRows threw before the first next(): ${String(error)}`);
      }
      await expectRejection(iterator.next(), { code: 'NOT_FOUND', resource: 'table', name: 'never-made' });
    });

    it('releases what a scan holds when the caller stops early: the store keeps working and closes cleanly', async function () {
      this.timeout(120_000);
      const { harness, keepAll, at } = fixture();
      const instance = randomInstanceId();
      const store = await harness.open([instance]);
      let closing = false;
      try {
        const early = { instance, table: 'early' };
        await store.createTable(early, [keepAll('f')], call());
        const count = Math.min(300, store.limits.rowsPerPage);
        const rows = Array.from({ length: count }, (_, i) => ({ key: Buffer.from(`k${String(i).padStart(4, '0')}`), mutations: [set('f', 'c', 'v'.repeat(1000), at(1))] }));
        await writeRows(store, early, rows);
        const request: ScanRequest = { range: {}, reverse: false, limit: store.limits.rowsPerPage, versions: 1 };
        for (let i = 0; i < 100; i += 1) {
          const kind = i % 3;
          if (kind === 0) {
            for await (const row of store.scanRows(early, request, call())) {
              expect(show(row.key)).to.equal('k0000');
              break;
            }
          } else {
            const iterator = store.scanRows(early, request, call())[Symbol.asyncIterator]();
            if (kind === 1) expect((await iterator.next()).done).to.equal(false);
            await iterator.return?.();
          }
        }
        await store.mutateRow(early, Buffer.from('k0000'), [set('f', 'c', 'after', at(2))], call());
        expect(showRows(await store.readRows(early, [Buffer.from('k0000')], { versions: 1 }, call()))).to.deep.equal([
          { key: 'k0000', cells: [`f:c@${at(2)}=after`] },
        ]);
        expect((await scanAll(store, early, request)).length).to.equal(count);
        await store.deleteTable(early, call());
        closing = true;
        await harness.close(store);
      } finally {
        // The case has failed already; closing is only tidying up.
        if (!closing) await harness.close(store).catch(() => undefined);
      }
    });
  });
}
