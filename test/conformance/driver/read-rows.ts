import { expect } from 'chai';
import type { ColumnSelector, TableRef } from '../../../src/store/store.ts';
import type { DriverHarnessFactory } from '../../support/driver-harness.ts';
import { call, expectRejection, requireCapability, set, showRows, useFixture } from './fixtures.ts';

/** readRows: order, missing rows, column and family selection, versions, cell order. */
export function readRowsCases(factory: DriverHarnessFactory): void {
  describe('readRows', () => {
    const fixture = useFixture(factory);
    let ref: TableRef;
    const key = (text: string) => Buffer.from(text);

    before(async () => {
      const { table, keepAll, store, at } = fixture();
      ref = await table([keepAll('a'), keepAll('b'), keepAll('c')]);
      const versions = store.capabilities.multipleVersions ? [1, 2, 3] : [3];
      await store.mutateRow(
        ref,
        key('r1'),
        [
          ...versions.map((n) => set('a', 'x', `a-x-${n}`, at(n))),
          ...versions.map((n) => set('a', 'y', `a-y-${n}`, at(n))),
          set('a', '', 'a-empty', at(1)),
          set('b', 'x', 'b-x', at(1)),
          set('c', 'z', 'c-z', at(1)),
        ],
        call(),
      );
      await store.mutateRow(ref, key('r2'), [set('b', 'x', 'r2-b-x', at(1))], call());
      await store.mutateRow(ref, key('r3'), [set('a', 'y', 'r3-a-y', at(1))], call());
    });

    const read = async (keys: string[], columns?: ColumnSelector[], versions = 1) =>
      showRows(await fixture().store.readRows(ref, keys.map(key), columns === undefined ? { versions } : { columns, versions }, call()));

    it('answers one element per key in request order, repeating repeated keys, with null for missing rows', async () => {
      const { at } = fixture();
      const r2 = { key: 'r2', cells: [`b:x@${at(1)}=r2-b-x`] };
      const r3 = { key: 'r3', cells: [`a:y@${at(1)}=r3-a-y`] };
      expect(await read(['r3', 'missing', 'r2', 'r3', 'r2'])).to.deep.equal([r3, null, r2, r3, r2]);
    });

    it('answers an empty list for no keys', async () => {
      expect(await fixture().store.readRows(ref, [], { versions: 1 }, call())).to.deep.equal([]);
    });

    it('reads every column of every family, ordered by family, then column bytes', async () => {
      const { at } = fixture();
      expect(await read(['r1'])).to.deep.equal([
        { key: 'r1', cells: [`a:@${at(1)}=a-empty`, `a:x@${at(3)}=a-x-3`, `a:y@${at(3)}=a-y-3`, `b:x@${at(1)}=b-x`, `c:z@${at(1)}=c-z`] },
      ]);
    });

    it('reads only the selected columns', async () => {
      const { at } = fixture();
      const x = Buffer.from('x');
      expect(await read(['r1'], [{ family: 'a', column: x }])).to.deep.equal([{ key: 'r1', cells: [`a:x@${at(3)}=a-x-3`] }]);
      expect(await read(['r1'], [{ family: 'c', column: Buffer.from('z') }, { family: 'b', column: x }])).to.deep.equal([
        { key: 'r1', cells: [`b:x@${at(1)}=b-x`, `c:z@${at(1)}=c-z`] },
      ]);
    });

    it('selects the column with the empty name by an empty column, not the whole family', async () => {
      const { at } = fixture();
      expect(await read(['r1'], [{ family: 'a', column: Buffer.alloc(0) }])).to.deep.equal([{ key: 'r1', cells: [`a:@${at(1)}=a-empty`] }]);
    });

    it('reads every column of a selected family', async () => {
      const { at } = fixture();
      expect(await read(['r1', 'r2'], [{ family: 'a' }])).to.deep.equal([
        { key: 'r1', cells: [`a:@${at(1)}=a-empty`, `a:x@${at(3)}=a-x-3`, `a:y@${at(3)}=a-y-3`] },
        null,
      ]);
      expect(await read(['r1'], [{ family: 'c' }, { family: 'b' }])).to.deep.equal([{ key: 'r1', cells: [`b:x@${at(1)}=b-x`, `c:z@${at(1)}=c-z`] }]);
    });

    it('returns each cell once when selectors overlap', async () => {
      const { at } = fixture();
      const selection = [{ family: 'a', column: Buffer.from('x') }, { family: 'a' }, { family: 'a', column: Buffer.from('x') }, { family: 'b' }];
      expect(await read(['r1'], selection)).to.deep.equal([
        { key: 'r1', cells: [`a:@${at(1)}=a-empty`, `a:x@${at(3)}=a-x-3`, `a:y@${at(3)}=a-y-3`, `b:x@${at(1)}=b-x`] },
      ]);
    });

    it('answers null for a row that has none of the selected cells', async () => {
      expect(await read(['r2', 'r3', 'missing'], [{ family: 'c' }])).to.deep.equal([null, null, null]);
      expect(await read(['r3'], [{ family: 'a', column: Buffer.from('x') }])).to.deep.equal([null]);
    });

    it('reads the newest N versions of each selected column', async function () {
      requireCapability(this, fixture(), 'multipleVersions');
      const { at } = fixture();
      expect(await read(['r1'], [{ family: 'a' }], 2)).to.deep.equal([
        { key: 'r1', cells: [`a:@${at(1)}=a-empty`, `a:x@${at(3)}=a-x-3`, `a:x@${at(2)}=a-x-2`, `a:y@${at(3)}=a-y-3`, `a:y@${at(2)}=a-y-2`] },
      ]);
      expect(await read(['r1'], [{ family: 'a', column: Buffer.from('y') }], fixture().allVersions)).to.deep.equal([
        { key: 'r1', cells: [`a:y@${at(3)}=a-y-3`, `a:y@${at(2)}=a-y-2`, `a:y@${at(1)}=a-y-1`] },
      ]);
    });

    it('orders cells by family name, then column as unsigned bytes, then timestamp, newest first', async () => {
      const { table, keepAll, store, at, allVersions } = fixture();
      const ordered = await table([keepAll('a'), keepAll('_'), keepAll('A')]);
      const columns = [Buffer.from([0xff]), Buffer.from([0x80]), Buffer.from('a'), Buffer.from('B'), Buffer.from([0x00]), Buffer.from([0x7f]), Buffer.from('aa')];
      const many = store.capabilities.multipleVersions;
      await store.mutateRow(
        ordered,
        key('r'),
        ['a', '_', 'A'].flatMap((family) => columns.flatMap((column) => [set(family, column, 'v', at(4)), ...(many ? [set(family, column, 'w', at(7))] : [])])),
        call(),
      );
      const columnOrder = ['\\x00', 'B', 'a', 'aa', '\\x7f', '\\x80', '\\xff'];
      const versionOrder = many ? [`@${at(7)}=w`, `@${at(4)}=v`] : [`@${at(4)}=v`];
      const [row] = showRows(await store.readRows(ordered, [key('r')], { versions: allVersions }, call()));
      expect(row?.cells).to.deep.equal(['A', '_', 'a'].flatMap((family) => columnOrder.flatMap((column) => versionOrder.map((version) => `${family}:${column}${version}`))));
    });

    it('fails with NOT_FOUND naming the table for a missing table', async () => {
      const { store, instance } = fixture();
      await expectRejection(store.readRows({ instance, table: 'never-made' }, [key('r1')], { versions: 1 }, call()), {
        code: 'NOT_FOUND',
        resource: 'table',
        name: 'never-made',
      });
    });
  });
}
