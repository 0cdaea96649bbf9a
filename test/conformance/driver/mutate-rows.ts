import { expect } from 'chai';
import type { TableRef } from '../../../src/store/store.ts';
import type { DriverHarnessFactory } from '../../support/driver-harness.ts';
import { call, deleteRow, expectRejection, expectStoreError, set, showRows, useFixture } from './fixtures.ts';

/** mutateRows: one result per entry, each entry atomic, entries on one row in order. */
export function mutateRowsCases(factory: DriverHarnessFactory): void {
  describe('mutateRows', () => {
    const fixture = useFixture(factory);
    let ref: TableRef;
    const key = (text: string) => Buffer.from(text);

    beforeEach(async () => {
      const { table, keepAll } = fixture();
      ref = await table([keepAll('a'), keepAll('b')]);
    });

    const read = async (...keys: string[]) => showRows(await fixture().store.readRows(ref, keys.map(key), { versions: fixture().allVersions }, call()));

    it('applies every entry and answers undefined for each, in entry order', async () => {
      const { store, at } = fixture();
      const results = await store.mutateRows(
        ref,
        [
          { key: key('r1'), mutations: [set('a', 'c', 'one', at(1))] },
          { key: key('r2'), mutations: [set('a', 'c', 'two', at(1)), set('b', 'd', 'two-b', at(1))] },
          { key: key('r3'), mutations: [set('b', 'c', 'three', at(1))] },
        ],
        call(),
      );
      expect(results).to.deep.equal([undefined, undefined, undefined]);
      expect(await read('r1', 'r2', 'r3')).to.deep.equal([
        { key: 'r1', cells: [`a:c@${at(1)}=one`] },
        { key: 'r2', cells: [`a:c@${at(1)}=two`, `b:d@${at(1)}=two-b`] },
        { key: 'r3', cells: [`b:c@${at(1)}=three`] },
      ]);
    });

    it('reports an entry naming a missing family by its index, applies the good entries, and nothing of the bad one', async () => {
      const { store, at } = fixture();
      await store.mutateRow(ref, key('bad'), [set('a', 'c', 'kept', at(1))], call());
      const results = await store.mutateRows(
        ref,
        [
          { key: key('good1'), mutations: [set('a', 'c', 'one', at(2))] },
          { key: key('bad'), mutations: [deleteRow, set('a', 'c', 'lost', at(2)), set('nope', 'c', 'v', at(2)), set('zilch', 'c', 'v', at(2))] },
          { key: key('good2'), mutations: [set('b', 'c', 'two', at(2))] },
          { key: key('bad2'), mutations: [set('b', 'c', 'lost', at(2)), set('zilch', 'c', 'v', at(2))] },
        ],
        call(),
      );
      expect(results).to.have.length(4);
      expect(results[0]).to.equal(undefined);
      expectStoreError(results[1], { code: 'NOT_FOUND', resource: 'columnFamily', name: 'nope' });
      expect(results[2]).to.equal(undefined);
      expectStoreError(results[3], { code: 'NOT_FOUND', resource: 'columnFamily', name: 'zilch' });
      expect(await read('good1', 'bad', 'good2', 'bad2')).to.deep.equal([
        { key: 'good1', cells: [`a:c@${at(2)}=one`] },
        { key: 'bad', cells: [`a:c@${at(1)}=kept`] },
        { key: 'good2', cells: [`b:c@${at(2)}=two`] },
        null,
      ]);
    });

    it('applies entries that name the same row in entry order', async () => {
      const { store, at } = fixture();
      const results = await store.mutateRows(
        ref,
        [
          { key: key('same'), mutations: [set('a', 'c', 'first', at(1))] },
          { key: key('same'), mutations: [set('a', 'c', 'second', at(1))] },
          { key: key('gone'), mutations: [set('a', 'c', 'v', at(1))] },
          { key: key('back'), mutations: [deleteRow] },
          { key: key('gone'), mutations: [deleteRow] },
          { key: key('back'), mutations: [set('b', 'c', 'v', at(1))] },
          { key: key('same'), mutations: [set('b', 'c', 'third', at(1))] },
        ],
        call(),
      );
      expect(results).to.deep.equal(Array(7).fill(undefined));
      expect(await read('same', 'gone', 'back')).to.deep.equal([
        { key: 'same', cells: [`a:c@${at(1)}=second`, `b:c@${at(1)}=third`] },
        null,
        { key: 'back', cells: [`b:c@${at(1)}=v`] },
      ]);
    });

    it('applies the good entries on a row around a bad entry on the same row', async () => {
      const { store, at } = fixture();
      const results = await store.mutateRows(
        ref,
        [
          { key: key('r'), mutations: [set('a', 'c', 'first', at(1))] },
          { key: key('r'), mutations: [deleteRow, set('missing', 'c', 'v', at(1))] },
          { key: key('r'), mutations: [set('b', 'c', 'third', at(1))] },
        ],
        call(),
      );
      expect(results[0]).to.equal(undefined);
      expectStoreError(results[1], { code: 'NOT_FOUND', resource: 'columnFamily', name: 'missing' });
      expect(results[2]).to.equal(undefined);
      expect(await read('r')).to.deep.equal([{ key: 'r', cells: [`a:c@${at(1)}=first`, `b:c@${at(1)}=third`] }]);
    });

    it('rejects the whole call with NOT_FOUND naming the table for a missing table', async () => {
      const { store, instance, at } = fixture();
      await expectRejection(store.mutateRows({ instance, table: 'never-made' }, [{ key: key('r'), mutations: [set('a', 'c', 'v', at(1))] }], call()), {
        code: 'NOT_FOUND',
        resource: 'table',
        name: 'never-made',
      });
    });
  });
}
