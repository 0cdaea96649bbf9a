import { expect } from 'chai';
import { findDriver } from '../../src/store/drivers.ts';
import type { DriverHarnessFactory } from '../support/driver-harness.ts';
import { useTestApp } from '../support/test-app.ts';
import { problemOf, scanKeys, v2Paths } from '../support/v2.ts';

/**
 * The v2 API end to end on a store (test/stores/v2-smoke.test.ts runs it for each): what a first session does, through HTTP, every answer
 * checked against the OpenAPI document. The thorough cases run once, on the embedded store
 * (test/v2); the driver conformance suite holds every store to the contract underneath.
 */
export function v2Smoke(name: string, store: DriverHarnessFactory): void {
  describe(`v2 smoke: ${name}`, function () {
    this.timeout(60_000);
    const app = useTestApp({ store });
    const paths = () => v2Paths(app());

    it('publishes its driver, capabilities and limits', async () => {
      const { body } = await app().api.get(`/v2/stores/${app().storeName}`);
      const driver = findDriver(name);
      expect(body.driver).to.equal(name);
      expect(body.limits).to.deep.include(driver?.limits);
      // The Bigtable emulator cannot read in reverse: the store publishes that of itself.
      expect(Object.keys(body.capabilities)).to.deep.equal(Object.keys(driver?.capabilities ?? {}));
    });

    it('creates, writes, reads, scans in pages, batches and deletes, as far as its capabilities go', async () => {
      const { api } = app();
      const { capabilities } = (await api.get(`/v2/stores/${app().storeName}`)).body;
      const families = [
        { name: 'cf', maxVersions: capabilities.multipleVersions === true ? 2 : 1 },
        ...(capabilities.maxAge === true ? [{ name: 'meta', maxAgeSeconds: 3600 }] : [{ name: 'meta', maxVersions: 1 }]),
      ];
      const created = await api.post(paths().tables, { name: 'orders', families });
      expect(created.status).to.equal(201);
      expect((await api.get(paths().table('orders'))).body).to.deep.equal(created.body);

      const write = await api.request('PUT', paths().row('orders', 'order#1'), {
        json: { cells: [{ family: 'cf', column: 'status', value: 'placed' }, { family: 'meta', column: 'by', value: 'ana' }] },
      });
      expect(write.body).to.deep.equal({ key: 'order#1', cellsWritten: 2 });
      await api.post(`${paths().row('orders', 'order#1')}:mutate`, { mutations: [{ set: { family: 'cf', column: 'status', value: 'shipped' } }] });
      const read = await api.get(`${paths().row('orders', 'order#1')}?versions=${capabilities.multipleVersions === true ? 5 : 1}&columns=cf`);
      expect(read.body.cells.map((cell: { value: string }) => cell.value)).to.deep.equal(capabilities.multipleVersions === true ? ['shipped', 'placed'] : ['shipped']);

      const batch = await api.post(`${paths().rows('orders')}:batchWrite`, {
        entries: ['order#2', 'order#3', 'order#4'].map((key) => ({ key, mutations: [{ set: { family: 'cf', column: 'status', value: 'new' } }] })).concat([
          { key: 'order#5', mutations: [{ set: { family: 'nope', column: 'status', value: 'new' } }] },
        ]),
      });
      expect(batch.body.results.map((result: { code: string }) => result.code)).to.deep.equal(['OK', 'OK', 'OK', 'COLUMN_FAMILY_NOT_FOUND']);

      const scanned = await scanKeys(app(), 'orders', 'prefix=order%23&pageSize=2');
      expect(scanned).to.deep.include({ keys: ['order#1', 'order#2', 'order#3', 'order#4'], pages: [2, 2] });

      const got = await api.post(`${paths().rows('orders')}:batchGet`, { keys: ['order#4', 'order#5', 'order#1'] });
      expect(got.body.rows.map((row: { found: boolean }) => row.found)).to.deep.equal([true, false, true]);

      expect((await api.request('DELETE', paths().row('orders', 'order#1'))).status).to.equal(204);
      expect((await api.get(paths().row('orders', 'order#1'))).status).to.equal(404);
      expect((await api.request('DELETE', paths().table('orders'))).status).to.equal(204);
      expect((await api.get(paths().tables)).body.tables).to.not.include('orders');
    });

    it('answers a reverse scan as its capabilities say', async () => {
      const { api } = app();
      const { body } = await api.get(`/v2/stores/${app().storeName}`);
      await api.post(paths().tables, { name: 'rev', families: [{ name: 'cf', maxVersions: 1 }] });
      const response = await api.get(`${paths().rows('rev')}?reverse=true`);
      if (body.capabilities.reverseScan === true) {
        expect(response.status).to.equal(200);
      } else {
        expect(problemOf(response)).to.deep.equal({ status: 501, code: 'NOT_SUPPORTED_BY_STORE', capability: 'reverseScan' });
      }
    });
  });
}
