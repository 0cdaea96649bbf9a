import { expect } from 'chai';
import { StoreError } from '../../src/store/errors.ts';
import type { DataStore } from '../../src/store/store.ts';
import { withOverrides } from '../support/store-faults.ts';
import type { DriverHarnessFactory } from '../support/driver-harness.ts';
import { type TestApp, useTestApp } from '../support/test-app.ts';

const createTables = async (app: TestApp, ...names: string[]) => {
  for (const tableName of names) {
    const response = await app.api.post(`/v1/${app.instance}/createTable`, { tableName, columnFamily: 'cf' });
    expect(response.status).to.equal(201);
  }
};
const tableExists = async (app: TestApp, tableName: string) => {
  const response = await app.api.post(`/v1/${app.instance}/insertData`, {
    tableName,
    rowKeyId: 'probe',
    data: [{ columnFamily: 'cf', columnName: 'c', columnValue: 'v' }],
  });
  return response.status === 200;
};

/** The delete table cases of the conformance suite, run against the store `store` makes. */
export function deleteTableCases(store: DriverHarnessFactory): void {
  describe('DELETE /v1/{instanceID}/deleteTable', () => {
    const app = useTestApp({ store });
    const remove = (tableList: unknown) => app().api.delete(`/v1/${app().instance}/deleteTable`, { tableList });

    it('returns 200 listing the deleted tables in request order', async () => {
      await createTables(app(), 'd1', 'd2', 'd3');
      const response = await remove(['d3', 'd1']);
      expect(response.status).to.equal(200);
      expect(response.body).to.deep.equal({ instanceID: app().instance, deleted: ['d3', 'd1'] });
      expect(await tableExists(app(), 'd1')).to.equal(false);
      expect(await tableExists(app(), 'd3')).to.equal(false);
      expect(await tableExists(app(), 'd2')).to.equal(true);
    });

    it('returns 404 TABLE_NOT_FOUND naming the missing tables, and deletes none', async () => {
      await createTables(app(), 'keep1', 'keep2');
      const response = await remove(['keep1', 'ghost1', 'keep2', 'ghost2']);
      expect(response.status).to.equal(404);
      expect(response.body).to.include({ code: 'TABLE_NOT_FOUND' });
      expect(response.body.notFound).to.deep.equal(['ghost1', 'ghost2']);
      expect(await tableExists(app(), 'keep1')).to.equal(true);
      expect(await tableExists(app(), 'keep2')).to.equal(true);
    });

    it('returns 404 INSTANCE_NOT_FOUND for an instance the service does not serve', async () => {
      const response = await app().api.delete('/v1/other-instance/deleteTable', { tableList: ['a'] });
      expect(response.status).to.equal(404);
      expect(response.body.code).to.equal('INSTANCE_NOT_FOUND');
    });

    it('returns 400 VALIDATION_FAILED for an empty, oversized or repeating list', async () => {
      for (const [tableList, path] of [
        [[], 'tableList'],
        [Array.from({ length: 101 }, (_, i) => `t${i}`), 'tableList'],
        [['a', 'b', 'a'], 'tableList[2]'],
        [['ok', 'not/ok'], 'tableList[1]'],
        ['a', 'tableList'],
      ] as const) {
        const response = await remove(tableList);
        expect(response.status, JSON.stringify(tableList).slice(0, 40)).to.equal(400);
        expect(response.body.errors[0].path).to.equal(path);
      }
    });

    it('accepts 100 tables in one request', async function () {
      this.timeout(60_000);
      const names = Array.from({ length: 100 }, (_, i) => `many${i}`);
      await createTables(app(), ...names);
      const response = await remove(names);
      expect(response.status).to.equal(200);
      expect(response.body.deleted).to.deep.equal(names);
    });
  });

  describe('DELETE /v1/{instanceID}/deleteTable when the store fails part-way', () => {
    // A backend failing between two deletions cannot be arranged for real; the real store is
    // wrapped so its second deleteTable call fails as an unreachable backend would.
    let deleteCalls = 0;
    const app = useTestApp({
      store,
      wrapStore: (store: DataStore): DataStore =>
        withOverrides(store, {
          deleteTable: async (...args) => {
            deleteCalls += 1;
            if (deleteCalls === 2) throw new StoreError('UNAVAILABLE', 'injected: connection reset');
            return store.deleteTable(...args);
          },
        }),
    });

    it('answers with the failure and lists what was deleted and what was not', async () => {
      await createTables(app(), 'p1', 'p2', 'p3');
      const response = await app().api.delete(`/v1/${app().instance}/deleteTable`, { tableList: ['p1', 'p2', 'p3'] });
      expect(response.status).to.equal(503);
      expect(response.body).to.include({ code: 'BACKEND_UNAVAILABLE' });
      expect(response.body.deleted).to.deep.equal(['p1']);
      expect(response.body.notDeleted).to.deep.equal(['p2', 'p3']);
      expect(await tableExists(app(), 'p1')).to.equal(false);
      expect(await tableExists(app(), 'p2')).to.equal(true);
      expect(await tableExists(app(), 'p3')).to.equal(true);
    });
  });
}
