import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'chai';
import { type KeyEntry, keysFile, newApiKey, tempDirectory } from '../support/access-files.ts';
import { randomInstanceId, useTestApp } from '../support/test-app.ts';
import { problemOf } from '../support/v2.ts';

/**
 * v2 authorization: grants scoped to a store and instance (`store/instance`, `store/*`, `*`, and a
 * bare instance of the default store), checked before the store, the instance and the body are
 * looked at; GET /v2/stores shows each caller only what it may use.
 */
describe('v2 authorization', () => {
  const files = tempDirectory();
  after(() => files.remove());
  const keys: Record<string, KeyEntry> = {};
  const app = useTestApp({
    instanceCount: 2,
    auth: (instances, store) => {
      const [first = ''] = instances;
      const entries: KeyEntry[] = [
        { name: 'reader-first', key: newApiKey(), role: 'reader', instances: [`${store}/${first}`] },
        { name: 'writer-store', key: newApiKey(), role: 'writer', instances: [`${store}/*`] },
        { name: 'admin-bare', key: newApiKey(), role: 'admin', instances: [first] },
        { name: 'elsewhere', key: newApiKey(), role: 'admin', instances: ['other-store/*', `${store}/not-served`] },
        { name: 'admin-all', key: newApiKey(), role: 'admin', instances: ['*'] },
      ];
      for (const entry of entries) keys[entry.name] = entry;
      const apiKeysFile = join(files.path, 'keys.json');
      writeFileSync(apiKeysFile, keysFile(entries));
      return { config: { modes: ['apikey'], apiKeysFile, protectDocs: false } };
    },
  });
  const as = (name: string) => app().api.as({ 'x-api-key': keys[name]?.key ?? '' });
  const tables = (instance: string, store = app().storeName) => `/v2/stores/${store}/instances/${instance}/tables`;

  before(async () => {
    for (const instance of app().instances) {
      expect((await as('admin-all').post(tables(instance), { name: 'shared', families: [{ name: 'cf' }] })).status).to.equal(201);
    }
  });

  it('lists only the stores and instances each caller may use', async () => {
    const [first, second] = app().instances;
    const listed = async (name: string) =>
      ((await as(name).get('/v2/stores')).body.stores as Array<{ name: string; instances: string[] }>).map((store) => [store.name, store.instances]);
    expect(await listed('reader-first')).to.deep.equal([[app().storeName, [first]]]);
    expect(await listed('admin-bare')).to.deep.equal([[app().storeName, [first]]]);
    expect(await listed('writer-store')).to.deep.equal([[app().storeName, [first, second]]]);
    expect(await listed('admin-all')).to.deep.equal([[app().storeName, [first, second]]]);
    expect(await listed('elsewhere')).to.deep.equal([]);
  });

  it('describes a store only to a caller with a grant on it; 404 for an unknown store only to one whose grant covers it', async () => {
    expect((await as('reader-first').get(`/v2/stores/${app().storeName}`)).body.instances).to.deep.equal([app().instances[0]]);
    expect(problemOf(await as('elsewhere').get(`/v2/stores/${app().storeName}`))).to.deep.equal({ status: 403, code: 'PERMISSION_DENIED' });
    expect(problemOf(await as('reader-first').get('/v2/stores/nope'))).to.deep.equal({ status: 403, code: 'PERMISSION_DENIED' });
    expect(problemOf(await as('admin-all').get('/v2/stores/nope'))).to.deep.equal({ status: 404, code: 'STORE_NOT_FOUND' });
  });

  it('gives each grant the role it names on the store and instance it names, and nothing elsewhere', async () => {
    const [first = '', second = ''] = app().instances;
    const write = (name: string, instance: string) =>
      as(name).request('PUT', `${tables(instance)}/shared/rows/${name}`, { json: { cells: [{ family: 'cf', column: 'c', value: 'v' }] } });
    const read = (name: string, instance: string) => as(name).get(`${tables(instance)}/shared/rows?pageSize=1`);
    const create = (name: string, instance: string) => as(name).post(tables(instance), { name: `by-${name}`, families: [{ name: 'cf' }] });

    expect((await read('reader-first', first)).status).to.equal(200);
    expect(problemOf(await read('reader-first', second))).to.deep.equal({ status: 403, code: 'PERMISSION_DENIED' });
    expect(problemOf(await write('reader-first', first))).to.deep.equal({ status: 403, code: 'PERMISSION_DENIED' });

    expect((await write('writer-store', first)).status).to.equal(200);
    expect((await write('writer-store', second)).status).to.equal(200);
    expect(problemOf(await create('writer-store', first))).to.deep.equal({ status: 403, code: 'PERMISSION_DENIED' });

    // A bare instance name is the default store's.
    expect((await create('admin-bare', first)).status).to.equal(201);
    expect(problemOf(await create('admin-bare', second))).to.deep.equal({ status: 403, code: 'PERMISSION_DENIED' });

    expect(problemOf(await read('elsewhere', first))).to.deep.equal({ status: 403, code: 'PERMISSION_DENIED' });
  });

  it('answers 403 before 404: an unknown store or instance is revealed only to a caller whose grant covers it', async () => {
    const unknown = randomInstanceId();
    expect(problemOf(await as('writer-store').get(`${tables(unknown)}/shared/rows`))).to.deep.equal({ status: 404, code: 'INSTANCE_NOT_FOUND' });
    expect(problemOf(await as('reader-first').get(`${tables(unknown)}/shared/rows`))).to.deep.equal({ status: 403, code: 'PERMISSION_DENIED' });
    const missing = await as('admin-all').get(tables(app().instances[0] ?? '', 'nope'));
    expect(problemOf(missing)).to.deep.equal({ status: 404, code: 'STORE_NOT_FOUND' });
    expect(missing.body.detail).to.contain(`You may use "${app().storeName}"`);
    // A caller that may use no store is pointed to the list, and told of none.
    const elsewhere = await as('elsewhere').get('/v2/stores/other-store');
    expect(problemOf(elsewhere)).to.deep.equal({ status: 404, code: 'STORE_NOT_FOUND' });
    expect(elsewhere.body.detail).to.contain('GET /v2/stores').and.not.to.contain('You may use');
    expect(problemOf(await as('writer-store').get(tables(app().instances[0] ?? '', 'nope')))).to.deep.equal({ status: 403, code: 'PERMISSION_DENIED' });
  });

  it('refuses before reading the body: a malformed body gets 403 or 404, not 400', async () => {
    const malformed = { body: '{"name": ', headers: { 'content-type': 'application/json' } };
    expect(problemOf(await as('reader-first').request('POST', tables(app().instances[0] ?? ''), malformed))).to.deep.equal({
      status: 403,
      code: 'PERMISSION_DENIED',
    });
    expect(problemOf(await as('admin-all').request('POST', tables(randomInstanceId()), malformed))).to.deep.equal({ status: 404, code: 'INSTANCE_NOT_FOUND' });
    expect(problemOf(await as('admin-all').request('POST', tables(app().instances[0] ?? ''), malformed))).to.deep.equal({ status: 400, code: 'MALFORMED_JSON' });
  });

  it('answers 401 without a credential', async () => {
    expect(problemOf(await app().api.get('/v2/stores'))).to.deep.equal({ status: 401, code: 'UNAUTHENTICATED' });
    expect(problemOf(await app().api.get(`${tables(app().instances[0] ?? '')}/shared/rows`))).to.deep.equal({ status: 401, code: 'UNAUTHENTICATED' });
  });
});

describe('v2 rate limiting', () => {
  const app = useTestApp({ rateLimitPerSecond: 2 });

  it('counts v2 requests against the caller\'s rate, before the store is looked up', async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 4; i++) statuses.push((await app().api.get('/v2/stores/unknown-store')).status);
    expect(statuses.slice(0, 2)).to.deep.equal([404, 404]);
    expect(statuses.slice(2)).to.include(429);
  });
});
