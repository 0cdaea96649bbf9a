import { expect } from 'chai';
import { embeddedDriver } from '../../src/store/embedded/driver.ts';
import { useTestApp } from '../support/test-app.ts';
import { createTable, problemOf, publishing, v2Paths } from '../support/v2.ts';

describe('v2 stores', () => {
  const app = useTestApp();

  it('GET /v2/stores lists the store with its driver, instances, capabilities and limits', async () => {
    const { api, storeName, instance } = app();
    const response = await api.get('/v2/stores');
    expect(response.status).to.equal(200);
    expect(response.body.stores).to.have.length(1);
    const [store] = response.body.stores;
    expect(store).to.deep.include({ name: storeName, driver: 'embedded', default: true, instances: [instance] });
    expect(store.capabilities).to.deep.equal(embeddedDriver.capabilities);
    expect(store.limits).to.deep.include(embeddedDriver.limits);
    expect(store.limits).to.include({ tablesPerBatchDelete: 100, columnsPerRead: 100, pageBytes: 16 * 1024 * 1024, pageTokenChars: 1000 });
  });

  it('GET /v2/stores/{store} describes one store, and answers 404 STORE_NOT_FOUND for another', async () => {
    const { api, storeName } = app();
    const response = await api.get(`/v2/stores/${storeName}`);
    expect(response.status).to.equal(200);
    expect(response.body.name).to.equal(storeName);
    const missing = await api.get('/v2/stores/prod-bt');
    expect(problemOf(missing)).to.deep.equal({ status: 404, code: 'STORE_NOT_FOUND' });
    // It says which stores to use instead, as INSTANCE_NOT_FOUND says which instances.
    expect(missing.body.detail).to.contain(`You may use "${storeName}"`).and.to.contain('GET /v2/stores');
  });

  it('answers 404 STORE_NOT_FOUND and INSTANCE_NOT_FOUND for a path naming what is not served', async () => {
    const { api, storeName, instance } = app();
    const store = await api.get(`/v2/stores/nope/instances/${instance}/tables`);
    expect(problemOf(store)).to.deep.equal({ status: 404, code: 'STORE_NOT_FOUND' });
    expect(store.body.detail).to.contain(`You may use "${storeName}"`);
    expect(problemOf(await api.get(`/v2/stores/${storeName}/instances/nope/tables`))).to.deep.equal({ status: 404, code: 'INSTANCE_NOT_FOUND' });
  });

  it('refuses unknown query parameters', async () => {
    expect(problemOf(await app().api.get('/v2/stores?verbose=true'))).to.deep.equal({ status: 400, code: 'VALIDATION_FAILED' });
  });
});

describe('v2 tables', () => {
  const app = useTestApp();

  it('creates a table with several families and policies (201), and describes it with them, ordered by name', async () => {
    const { api } = app();
    const families = [{ name: 'meta' }, { name: 'cf', maxVersions: 3 }, { name: 'logs', maxAgeSeconds: 86_400, maxVersions: 10 }];
    const created = await api.post(v2Paths(app()).tables, { name: 'orders', families });
    expect(created.status).to.equal(201);
    const expected = { name: 'orders', families: [{ name: 'cf', maxVersions: 3 }, { name: 'logs', maxVersions: 10, maxAgeSeconds: 86_400 }, { name: 'meta' }] };
    expect(created.body).to.deep.equal(expected);
    const described = await api.get(v2Paths(app()).table('orders'));
    expect(described.status).to.equal(200);
    expect(described.body).to.deep.equal(expected);
  });

  it('answers 409 TABLE_ALREADY_EXISTS for a table that exists, leaving it as it was', async () => {
    await createTable(app(), 'twice', [{ name: 'a' }]);
    const again = await app().api.post(v2Paths(app()).tables, { name: 'twice', families: [{ name: 'b' }] });
    expect(problemOf(again)).to.deep.equal({ status: 409, code: 'TABLE_ALREADY_EXISTS' });
    expect((await app().api.get(v2Paths(app()).table('twice'))).body.families).to.deep.equal([{ name: 'a' }]);
  });

  it('lists the tables in byte order', async () => {
    await createTable(app(), 'list-b');
    await createTable(app(), 'list-A');
    const { body } = await app().api.get(v2Paths(app()).tables);
    const listed = (body.tables as string[]).filter((name) => name.startsWith('list-'));
    expect(listed).to.deep.equal(['list-A', 'list-b']);
  });

  it('refuses bad families with 400: none, repeated names, bad policies', async () => {
    const { api } = app();
    const create = (families: unknown) => api.post(v2Paths(app()).tables, { name: 'bad', families });
    for (const families of [[], [{ name: 'a' }, { name: 'a' }], [{ name: 'a', maxVersions: 0 }], [{ name: 'a', maxAgeSeconds: -1 }], [{ name: 'a:b' }], [{ name: 'a', gc: 1 }]]) {
      expect(problemOf(await create(families)), JSON.stringify(families)).to.deep.equal({ status: 400, code: 'VALIDATION_FAILED' });
    }
    expect((await api.get(v2Paths(app()).table('bad'))).status).to.equal(404);
  });

  it('deletes a table (204), which is then gone (404)', async () => {
    await createTable(app(), 'doomed');
    const deleted = await app().api.request('DELETE', v2Paths(app()).table('doomed'));
    expect(deleted.status).to.equal(204);
    expect(problemOf(await app().api.get(v2Paths(app()).table('doomed')))).to.deep.equal({ status: 404, code: 'TABLE_NOT_FOUND' });
    expect(problemOf(await app().api.request('DELETE', v2Paths(app()).table('doomed')))).to.deep.equal({ status: 404, code: 'TABLE_NOT_FOUND' });
  });

  it('batch-deletes tables in order, and deletes none when one is missing (404 with notFound)', async () => {
    await createTable(app(), 'batch-1');
    await createTable(app(), 'batch-2');
    const refused = await app().api.post(`${v2Paths(app()).tables}:batchDelete`, { tables: ['batch-1', 'batch-missing', 'batch-2'] });
    expect(problemOf(refused)).to.deep.equal({ status: 404, code: 'TABLE_NOT_FOUND' });
    expect(refused.body.notFound).to.deep.equal(['batch-missing']);
    expect((await app().api.get(v2Paths(app()).table('batch-1'))).status).to.equal(200);

    const deleted = await app().api.post(`${v2Paths(app()).tables}:batchDelete`, { tables: ['batch-2', 'batch-1'] });
    expect(deleted.status).to.equal(200);
    expect(deleted.body).to.deep.equal({ deleted: ['batch-2', 'batch-1'] });
  });

  it('refuses a batch delete over tablesPerBatchDelete, naming the limit', async () => {
    const tables = Array.from({ length: 101 }, (_, index) => `t${index}`);
    const response = await app().api.post(`${v2Paths(app()).tables}:batchDelete`, { tables });
    expect(problemOf(response)).to.deep.equal({ status: 400, code: 'VALIDATION_FAILED', limit: 'tablesPerBatchDelete' });
  });
});

describe("v2 tables on a store's published limits and capabilities", () => {
  // No store at hand lacks maxAge or has so few families per table: a real store is wrapped to
  // publish less, so that what is tested is the service's gate, before the store is called.
  const app = useTestApp({ wrapStore: (store) => publishing(store, { capabilities: { maxAge: false, multipleVersions: false }, limits: { familiesPerTable: 2 } }) });

  it('answers 501 NOT_SUPPORTED_BY_STORE naming the capability, and creates nothing', async () => {
    const { api } = app();
    const create = (name: string, families: unknown) => api.post(v2Paths(app()).tables, { name, families });
    expect(problemOf(await create('aged', [{ name: 'cf', maxVersions: 1, maxAgeSeconds: 60 }]))).to.deep.equal({
      status: 501,
      code: 'NOT_SUPPORTED_BY_STORE',
      capability: 'maxAge',
    });
    expect(problemOf(await create('kept', [{ name: 'cf' }]))).to.deep.equal({ status: 501, code: 'NOT_SUPPORTED_BY_STORE', capability: 'multipleVersions' });
    expect(problemOf(await create('three', [{ name: 'cf', maxVersions: 3 }]))).to.deep.equal({
      status: 501,
      code: 'NOT_SUPPORTED_BY_STORE',
      capability: 'multipleVersions',
    });
    expect((await api.get(v2Paths(app()).tables)).body.tables).to.deep.equal([]);
    expect((await create('latest', [{ name: 'cf', maxVersions: 1 }])).status).to.equal(201);
  });

  it('answers 400 naming familiesPerTable for more families than the store takes', async () => {
    const families = ['a', 'b', 'c'].map((name) => ({ name, maxVersions: 1 }));
    const response = await app().api.post(v2Paths(app()).tables, { name: 'wide', families });
    expect(problemOf(response)).to.deep.equal({ status: 400, code: 'VALIDATION_FAILED', limit: 'familiesPerTable' });
    expect(response.body.errors).to.deep.equal([{ path: 'families', message: 'families has 3 families, more than the 2 this store takes' }]);
  });

  it('serves v1 on it with families that keep the latest version, which is all v1 reads', async () => {
    const { api, instance } = app();
    expect((await api.post(`/v1/${instance}/createTable`, { tableName: 'v1', columnFamily: 'cf' })).status).to.equal(201);
    expect((await api.get(v2Paths(app()).table('v1'))).body.families).to.deep.equal([{ name: 'cf', maxVersions: 1 }]);
  });
});
