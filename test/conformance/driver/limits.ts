import { expect } from 'chai';
import type { DriverHarnessFactory } from '../../support/driver-harness.ts';
import type { Row } from '../../../src/store/store.ts';
import { call, plainFamily, requireCapability, scanAll, set, show, showCell, showRows, useFixture } from './fixtures.ts';

const MIB = 1024 * 1024;
/** The largest value a case writes: the store's limit, or this much where the limit is larger. */
const LARGE_VALUE_BYTES = 5 * MIB;
const INT64_MAX = 2n ** 63n - 1n;

/** Requests at exactly the published limits succeed; timestamps round-trip exactly. */
export function limitsCases(factory: DriverHarnessFactory): void {
  describe('limits and timestamps', () => {
    const fixture = useFixture(factory);

    it('writes and reads a key of exactly keyBytes and a column of exactly columnBytes', async () => {
      const { table, keepAll, store, at, scanLimit } = fixture();
      const ref = await table([keepAll('f')]);
      const { keyBytes, columnBytes } = store.limits;
      const key = Buffer.alloc(keyBytes, 0xff);
      key[keyBytes - 1] = 0x01;
      const column = Buffer.alloc(columnBytes, 0x80);
      column[0] = 0x00;
      await store.mutateRow(ref, key, [set('f', column, 'v', at(1))], call());
      const [row] = await store.readRows(ref, [key], { versions: 1 }, call());
      expect(row?.key.equals(key), 'key').to.equal(true);
      expect(row?.cells.length).to.equal(1);
      expect(row?.cells[0]?.column.equals(column), 'column').to.equal(true);
      const scanned = await scanAll(store, ref, { range: { start: key }, reverse: false, limit: scanLimit, versions: 1 });
      expect(scanned.map((view) => view.key)).to.deep.equal([show(key)]);
    });

    it(`writes and reads a value as large as valueBytes allows, up to ${LARGE_VALUE_BYTES / MIB} MiB`, async function () {
      this.timeout(60_000);
      const { table, keepAll, store, at, scanLimit } = fixture();
      const ref = await table([keepAll('f')]);
      const size = Math.min(store.limits.valueBytes, LARGE_VALUE_BYTES);
      const value = Buffer.alloc(size);
      for (let i = 0; i < size; i += 1) value[i] = (i * 7919) % 251;
      const key = Buffer.from('tall');
      await store.mutateRow(ref, key, [set('f', 'c', value, at(1)), set('f', 'd', 'small', at(1))], call());
      const sizes = (row: Row | null | undefined) => row && { key: show(row.key), cells: row.cells.map((cell) => `${showCell({ ...cell, value: Buffer.alloc(0) })}${cell.value.length} bytes`) };
      const expected = { key: 'tall', cells: [`f:c@${at(1)}=${size} bytes`, `f:d@${at(1)}=5 bytes`] };

      const [row] = await store.readRows(ref, [key], { versions: 1 }, call());
      expect(sizes(row)).to.deep.equal(expected);
      expect(row?.cells[0]?.value.equals(value)).to.equal(true);

      const scanned: Row[] = [];
      for await (const each of store.scanRows(ref, { range: {}, reverse: false, limit: scanLimit, versions: 1 }, call())) scanned.push(each);
      expect(scanned.map(sizes)).to.deep.equal([expected]);
      expect(scanned[0]?.cells[0]?.value.equals(value)).to.equal(true);
    });

    it('writes mutationsPerRow cells in one mutateRow and reads them all back', async function () {
      this.timeout(120_000);
      if (!fixture().harness.traits.fastWideWrites) this.skip();
      const { table, keepAll, store, at } = fixture();
      const ref = await table([keepAll('f')]);
      const count = store.limits.mutationsPerRow;
      const width = String(count).length;
      const column = (i: number) => `c${String(i).padStart(width, '0')}`;
      await store.mutateRow(ref, Buffer.from('wide'), Array.from({ length: count }, (_, i) => set('f', column(i), String(i), at(1))), call());
      const [row] = await store.readRows(ref, [Buffer.from('wide')], { versions: 1 }, call());
      expect(row?.cells.length).to.equal(count);
      expect(showRows([row ?? null])[0]?.cells.at(-1)).to.equal(`f:${column(count - 1)}@${at(1)}=${count - 1}`);
    });

    it('writes entriesPerBatch entries in one mutateRows and reads entriesPerBatch keys in one readRows', async function () {
      this.timeout(60_000);
      const { table, keepAll, store, at } = fixture();
      const ref = await table([keepAll('f')]);
      const count = store.limits.entriesPerBatch;
      const keys = Array.from({ length: count }, (_, i) => Buffer.from(`k${String(i).padStart(6, '0')}`));
      const results = await store.mutateRows(ref, keys.map((key, i) => ({ key, mutations: [set('f', 'c', String(i), at(1))] })), call());
      expect(results).to.deep.equal(Array(count).fill(undefined));
      const rows = showRows(await store.readRows(ref, [...keys].reverse(), { versions: 1 }, call()));
      expect(rows).to.deep.equal(keys.map((key, i) => ({ key: show(key), cells: [`f:c@${at(1)}=${i}`] })).reverse());
    });

    it('creates a table with familiesPerTable families', async () => {
      const { store, instance, keepAll } = fixture();
      const count = store.limits.familiesPerTable;
      const names = Array.from({ length: count }, (_, i) => `fam${String(i).padStart(4, '0')}`);
      const ref = { instance, table: 'many-families' };
      await store.createTable(ref, names.map(keepAll), call());
      expect((await store.describeTable(ref, call())).families.map(plainFamily)).to.deep.equal(names.map(keepAll));
    });

    it('keeps timestamps at the published granularity exactly, from 0 to the largest int64', async () => {
      const { table, keepAll, store, at, scanLimit } = fixture();
      const ref = await table([keepAll('f')]);
      const granularity = BigInt(store.limits.timestampGranularityMicros);
      const align = (micros: bigint) => (micros / granularity) * granularity;
      // 2^53 + 1 granules and int64's largest granule cannot be held by a double.
      const timestamps = [0n, at(1), align(1_700_000_000_123_456n), (2n ** 53n + 1n) * granularity, align(INT64_MAX - 123_456_789n), align(INT64_MAX)];
      const key = Buffer.from('times');
      await store.mutateRow(ref, key, timestamps.map((timestamp, i) => set('f', `c${i}`, String(timestamp), timestamp)), call());
      const expected = { key: 'times', cells: timestamps.map((timestamp, i) => `f:c${i}@${timestamp}=${timestamp}`) };
      expect(showRows(await store.readRows(ref, [key], { versions: 1 }, call()))).to.deep.equal([expected]);
      expect(await scanAll(store, ref, { range: {}, reverse: false, limit: scanLimit, versions: 1 })).to.deep.equal([expected]);
    });

    it('orders versions by timestamp as numbers, newest first, across the whole range', async function () {
      requireCapability(this, fixture(), 'multipleVersions');
      const { table, keepAll, store, at } = fixture();
      const ref = await table([keepAll('f')]);
      const granularity = BigInt(store.limits.timestampGranularityMicros);
      const timestamps = [at(9), at(10), 0n, at(100), (2n ** 53n + 1n) * granularity, (INT64_MAX / granularity) * granularity, at(2)];
      const key = Buffer.from('versions');
      await store.mutateRow(ref, key, timestamps.map((timestamp) => set('f', 'c', String(timestamp), timestamp)), call());
      const newestFirst = [...timestamps].sort((x, y) => (x > y ? -1 : x < y ? 1 : 0));
      expect(showRows(await store.readRows(ref, [key], { versions: fixture().allVersions }, call()))).to.deep.equal([
        { key: 'versions', cells: newestFirst.map((timestamp) => `f:c@${timestamp}=${timestamp}`) },
      ]);
    });
  });
}
