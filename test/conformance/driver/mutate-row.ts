import { expect } from 'chai';
import type { Mutation, TableRef } from '../../../src/store/store.ts';
import type { DriverHarnessFactory } from '../../support/driver-harness.ts';
import { call, deleteColumn, deleteFamily, deleteRow, expectRejection, requireCapability, set, showRows, useFixture } from './fixtures.ts';

/** mutateRow: sets, versions, deletes, order within a call, atomicity. */
export function mutateRowCases(factory: DriverHarnessFactory): void {
  describe('mutateRow', () => {
    const fixture = useFixture(factory);
    const key = Buffer.from('row');
    let ref: TableRef;

    beforeEach(async () => {
      const { table, keepAll } = fixture();
      ref = await table([keepAll('a'), keepAll('b'), { name: 'one', maxVersions: 1 }]);
    });

    const mutate = (...mutations: Mutation[]) => fixture().store.mutateRow(ref, key, mutations, call());
    const read = async (versions = fixture().allVersions) => showRows(await fixture().store.readRows(ref, [key], { versions }, call()))[0];

    it('writes cells of several families and columns in one call, read back by family, column, then newest first', async () => {
      const { at } = fixture();
      await mutate(set('b', 'y', 'b-y', at(5)), set('a', 'z', 'a-z', at(7)), set('b', 'x', 'b-x', at(6)), set('a', 'x', 'a-x', at(9)));
      expect(await read()).to.deep.equal({
        key: 'row',
        cells: [`a:x@${at(9)}=a-x`, `a:z@${at(7)}=a-z`, `b:x@${at(6)}=b-x`, `b:y@${at(5)}=b-y`],
      });
    });

    it('keeps every version of a column, newest first, and reads the latest alone with versions 1', async function () {
      requireCapability(this, fixture(), 'multipleVersions');
      const { at } = fixture();
      await mutate(set('a', 'c', 'v2', at(2)), set('a', 'c', 'v9', at(9)));
      await mutate(set('a', 'c', 'v5', at(5)));
      await mutate(set('a', 'c', 'v1', at(1)));
      expect((await read())?.cells).to.deep.equal([`a:c@${at(9)}=v9`, `a:c@${at(5)}=v5`, `a:c@${at(2)}=v2`, `a:c@${at(1)}=v1`]);
      expect((await read(1))?.cells).to.deep.equal([`a:c@${at(9)}=v9`]);
      expect((await read(3))?.cells).to.deep.equal([`a:c@${at(9)}=v9`, `a:c@${at(5)}=v5`, `a:c@${at(2)}=v2`]);
    });

    it('replaces the value of a version written again with the same timestamp, keeping the others', async () => {
      const { at, store } = fixture();
      await mutate(set('a', 'c', 'old', at(3)));
      await mutate(set('a', 'c', 'new', at(3)));
      expect((await read())?.cells).to.deep.equal([`a:c@${at(3)}=new`]);
      if (store.capabilities.multipleVersions) {
        await mutate(set('a', 'c', 'older', at(2)), set('a', 'c', 'newest', at(4)));
        await mutate(set('a', 'c', 'again', at(3)));
        expect((await read())?.cells).to.deep.equal([`a:c@${at(4)}=newest`, `a:c@${at(3)}=again`, `a:c@${at(2)}=older`]);
      }
    });

    it('never lets a write with an older timestamp replace a newer value in a family keeping one version', async () => {
      const { at } = fixture();
      await mutate(set('one', 'c', 'newer', at(20)));
      await mutate(set('one', 'c', 'older', at(10)));
      expect(await read(1)).to.deep.equal({ key: 'row', cells: [`one:c@${at(20)}=newer`] });
      await mutate(set('one', 'c', 'newest', at(30)));
      expect(await read(1)).to.deep.equal({ key: 'row', cells: [`one:c@${at(30)}=newest`] });
    });

    it('deleteColumn removes every version of that column and nothing else', async () => {
      const { at } = fixture();
      await mutate(set('a', 'c', 'v1', at(1)), set('a', 'c', 'v2', at(2)), set('a', 'd', 'kept', at(1)), set('b', 'c', 'kept', at(1)));
      await mutate(deleteColumn('a', 'c'));
      expect(await read()).to.deep.equal({ key: 'row', cells: [`a:d@${at(1)}=kept`, `b:c@${at(1)}=kept`] });
    });

    it('deleteFamily removes every column of that family and nothing else', async () => {
      const { at } = fixture();
      await mutate(set('a', 'c', 'v1', at(1)), set('a', 'c', 'v2', at(2)), set('a', 'd', 'gone', at(1)), set('b', 'c', 'kept', at(1)));
      await mutate(deleteFamily('a'));
      expect(await read()).to.deep.equal({ key: 'row', cells: [`b:c@${at(1)}=kept`] });
    });

    it('deleteRow removes the whole row, and only that row', async () => {
      const { at, store } = fixture();
      await mutate(set('a', 'c', 'v', at(1)), set('b', 'd', 'v', at(1)), set('one', 'e', 'v', at(1)));
      await store.mutateRow(ref, Buffer.from('other'), [set('a', 'c', 'kept', at(1))], call());
      await mutate(deleteRow);
      expect(await read()).to.equal(null);
      expect(showRows(await store.readRows(ref, [Buffer.from('other')], { versions: 1 }, call()))).to.deep.equal([
        { key: 'other', cells: [`a:c@${at(1)}=kept`] },
      ]);
    });

    it('deletes what does not exist without error', async () => {
      await mutate(deleteColumn('a', 'nothing'), deleteFamily('b'), deleteRow);
      expect(await read()).to.equal(null);
      await mutate(set('a', 'c', 'v', fixture().at(1)));
      await mutate(deleteColumn('a', 'nothing'), deleteFamily('b'));
      expect(await read()).to.deep.equal({ key: 'row', cells: [`a:c@${fixture().at(1)}=v`] });
    });

    it('applies the mutations of one call in order: deleteRow then set keeps what was set after', async () => {
      const { at } = fixture();
      await mutate(set('a', 'old', 'v', at(1)));
      await mutate(set('a', 'before', 'v', at(2)), deleteRow, set('b', 'after', 'v', at(1)));
      expect(await read()).to.deep.equal({ key: 'row', cells: [`b:after@${at(1)}=v`] });
    });

    it('applies the mutations of one call in order: a column set then deleted is gone, deleted then set is there', async () => {
      const { at } = fixture();
      await mutate(set('a', 'x', 'v', at(1)), deleteColumn('a', 'x'), deleteColumn('a', 'y'), set('a', 'y', 'v', at(1)));
      await mutate(set('b', 'z', 'v', at(1)), deleteFamily('b'), set('b', 'w', 'v', at(1)));
      expect(await read()).to.deep.equal({ key: 'row', cells: [`a:y@${at(1)}=v`, `b:w@${at(1)}=v`] });
    });

    it('applies the mutations of one call in order: the last of two sets of one version wins', async () => {
      const { at } = fixture();
      await mutate(set('a', 'c', 'first', at(1)), set('a', 'c', 'second', at(1)));
      expect(await read()).to.deep.equal({ key: 'row', cells: [`a:c@${at(1)}=second`] });
    });

    it('fails with NOT_FOUND naming the table for a missing table', async () => {
      const { store, instance, at } = fixture();
      await expectRejection(store.mutateRow({ instance, table: 'never-made' }, key, [set('a', 'c', 'v', at(1))], call()), {
        code: 'NOT_FOUND',
        resource: 'table',
        name: 'never-made',
      });
    });

    it('fails with NOT_FOUND naming the first missing family in mutation order, and writes nothing', async () => {
      const { at } = fixture();
      await mutate(set('a', 'existing', 'kept', at(1)));
      await expectRejection(
        mutate(deleteRow, set('a', 'c', 'v', at(2)), deleteColumn('nope', 'c'), set('zzz', 'c', 'v', at(2)), set('aaa', 'c', 'v', at(2)), set('b', 'c', 'v', at(2))),
        { code: 'NOT_FOUND', resource: 'columnFamily', name: 'nope' },
      );
      await expectRejection(mutate(set('b', 'c', 'v', at(2)), set('zzz', 'c', 'v', at(2)), deleteFamily('aaa')), {
        code: 'NOT_FOUND',
        resource: 'columnFamily',
        name: 'zzz',
      });
      await expectRejection(mutate(deleteFamily('gone')), { code: 'NOT_FOUND', resource: 'columnFamily', name: 'gone' });
      expect(await read()).to.deep.equal({ key: 'row', cells: [`a:existing@${at(1)}=kept`] });
    });

    it('writes nothing to a new row when a family is missing', async () => {
      const { at } = fixture();
      await expectRejection(mutate(set('a', 'c', 'v', at(1)), set('missing', 'c', 'v', at(1))), {
        code: 'NOT_FOUND',
        resource: 'columnFamily',
        name: 'missing',
      });
      expect(await read()).to.equal(null);
    });
  });
}
