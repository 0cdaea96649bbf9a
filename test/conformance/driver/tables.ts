import { expect } from 'chai';
import type { DriverHarnessFactory } from '../../support/driver-harness.ts';
import { call, expectRejection, plainFamily, scanAll, set, showRows, useFixture } from './fixtures.ts';

/** createTable, describeTable, listTables and deleteTable. */
export function tableCases(factory: DriverHarnessFactory): void {
  describe('tables', () => {
    const fixture = useFixture(factory, { instanceCount: 2 });

    it('creates a table with several families and describes them ordered by name', async () => {
      const { store, instance, keepAll } = fixture();
      // ASCII order: '-' < '.' < digits < upper case < '_' < lower case.
      const names = ['b', 'a', '_u', 'Z', '9', 'a.b', 'a-b', 'aa'];
      const ref = { instance, table: 'families' };
      await store.createTable(ref, names.map(keepAll), call());
      const schema = await store.describeTable(ref, call());
      expect(schema.name).to.equal('families');
      expect(schema.families.map(plainFamily)).to.deep.equal(['9', 'Z', '_u', 'a', 'a-b', 'a.b', 'aa', 'b'].map(keepAll));
    });

    it('describes each family with the retention policy it was created with', async () => {
      const { store, instance } = fixture();
      const { multipleVersions, maxAge } = store.capabilities;
      const families = [
        { name: 'latest', maxVersions: 1 },
        ...(multipleVersions ? [{ name: 'all' }, { name: 'three', maxVersions: 3 }] : []),
        ...(maxAge ? [{ name: 'day', maxVersions: 1, maxAgeSeconds: 86_400 }] : []),
        ...(multipleVersions && maxAge ? [{ name: 'hour', maxAgeSeconds: 3600 }, { name: 'both', maxVersions: 2, maxAgeSeconds: 60 }] : []),
      ];
      const ref = { instance, table: 'policies' };
      await store.createTable(ref, families, call());
      const schema = await store.describeTable(ref, call());
      const sorted = [...families].sort((x, y) => (x.name < y.name ? -1 : 1));
      expect(schema.families.map(plainFamily)).to.deep.equal(sorted);
    });

    it('fails with ALREADY_EXISTS naming an existing table, and leaves its families and rows unchanged', async () => {
      const { store, instance, keepAll, at } = fixture();
      const ref = { instance, table: 'twice' };
      await store.createTable(ref, [keepAll('first')], call());
      await store.mutateRow(ref, Buffer.from('r'), [set('first', 'c', 'kept', at(1))], call());

      await expectRejection(store.createTable(ref, [keepAll('second')], call()), { code: 'ALREADY_EXISTS', resource: 'table', name: 'twice' });

      expect((await store.describeTable(ref, call())).families.map(plainFamily)).to.deep.equal([keepAll('first')]);
      expect(showRows(await store.readRows(ref, [Buffer.from('r')], { versions: 1 }, call()))).to.deep.equal([
        { key: 'r', cells: [`first:c@${at(1)}=kept`] },
      ]);
    });

    it('lists the tables of one instance, and only those', async () => {
      const { store, instances, keepAll } = fixture();
      const [first, second] = instances as [string, string];
      for (const table of ['list-a', 'list-b', 'list-c']) await store.createTable({ instance: first, table }, [keepAll('f')], call());
      await store.createTable({ instance: second, table: 'list-other' }, [keepAll('f')], call());

      const listed = await store.listTables(first, call());
      expect(listed).to.include.members(['list-a', 'list-b', 'list-c']);
      expect(listed).not.to.include('list-other');
      expect(new Set(listed).size, 'each table listed once').to.equal(listed.length);
      expect(await store.listTables(second, call())).to.include('list-other').and.not.include('list-a');
    });

    it('keeps tables of the same name in two instances apart', async () => {
      const { store, instances, keepAll, at } = fixture();
      const [first, second] = instances as [string, string];
      const one = { instance: first, table: 'same-name' };
      const other = { instance: second, table: 'same-name' };
      await store.createTable(one, [keepAll('f')], call());
      await store.createTable(other, [keepAll('g')], call());
      await store.mutateRow(one, Buffer.from('r'), [set('f', 'c', 'first', at(1))], call());

      expect((await store.describeTable(other, call())).families.map(plainFamily)).to.deep.equal([keepAll('g')]);
      expect(await store.readRows(other, [Buffer.from('r')], { versions: 1 }, call())).to.deep.equal([null]);
      await store.deleteTable(one, call());
      expect(await store.listTables(second, call())).to.include('same-name');
    });

    it('fails with NOT_FOUND naming the table when describing a missing table', async () => {
      const { store, instance } = fixture();
      await expectRejection(store.describeTable({ instance, table: 'never-made' }, call()), { code: 'NOT_FOUND', resource: 'table', name: 'never-made' });
    });

    it('deletes a table: afterwards every call treats it as missing', async () => {
      const { store, instance, keepAll, at } = fixture();
      const ref = { instance, table: 'doomed' };
      await store.createTable(ref, [keepAll('f')], call());
      await store.mutateRow(ref, Buffer.from('r'), [set('f', 'c', 'v', at(1))], call());

      await store.deleteTable(ref, call());

      const missing = { code: 'NOT_FOUND', resource: 'table', name: 'doomed' } as const;
      expect(await store.listTables(instance, call())).not.to.include('doomed');
      await expectRejection(store.describeTable(ref, call()), missing);
      await expectRejection(store.readRows(ref, [Buffer.from('r')], { versions: 1 }, call()), missing);
      await expectRejection(store.mutateRow(ref, Buffer.from('r'), [set('f', 'c', 'v', at(2))], call()), missing);
      await expectRejection(store.mutateRows(ref, [{ key: Buffer.from('r'), mutations: [set('f', 'c', 'v', at(2))] }], call()), missing);
      await expectRejection(scanAll(store, ref, { range: {}, reverse: false, limit: 10, versions: 1 }), missing);
      await expectRejection(store.deleteTable(ref, call()), missing);
    });

    it('creates a table anew after deleting it, with the new families and none of the old rows', async () => {
      const { store, instance, keepAll, at } = fixture();
      const ref = { instance, table: 'reborn' };
      await store.createTable(ref, [keepAll('old')], call());
      await store.mutateRow(ref, Buffer.from('r'), [set('old', 'c', 'v', at(1))], call());
      await store.deleteTable(ref, call());

      await store.createTable(ref, [keepAll('new')], call());

      expect((await store.describeTable(ref, call())).families.map(plainFamily)).to.deep.equal([keepAll('new')]);
      expect(await store.readRows(ref, [Buffer.from('r')], { versions: 1 }, call())).to.deep.equal([null]);
      expect(await scanAll(store, ref, { range: {}, reverse: false, limit: 10, versions: 1 })).to.deep.equal([]);
      await expectRejection(store.mutateRow(ref, Buffer.from('r'), [set('old', 'c', 'v', at(2))], call()), {
        code: 'NOT_FOUND',
        resource: 'columnFamily',
        name: 'old',
      });
      await store.mutateRow(ref, Buffer.from('r'), [set('new', 'c', 'v', at(2))], call());
    });

    it('fails with NOT_FOUND naming the table when deleting a missing table', async () => {
      const { store, instance } = fixture();
      await expectRejection(store.deleteTable({ instance, table: 'never-made' }, call()), { code: 'NOT_FOUND', resource: 'table', name: 'never-made' });
    });

    it('answers a health check', async () => {
      const { store } = fixture();
      await store.checkHealth(call());
    });
  });
}
