import { expect } from 'chai';
import { harness as embeddedHarness } from '../support/harnesses/embedded.ts';
import { useTestApp } from '../support/test-app.ts';

/** What v2 says of the family a v1 createTable made, and the versions a v2 read finds. */
async function v1Table(app: ReturnType<ReturnType<typeof useTestApp>>): Promise<{ families: unknown; versions: number }> {
  const v1 = `/v1/${app.instance}`;
  expect((await app.api.post(`${v1}/createTable`, { tableName: 'kept', columnFamily: 'cf' })).status).to.equal(201);
  for (const value of ['a', 'b', 'c']) {
    expect((await app.api.post(`${v1}/insertData`, { tableName: 'kept', rowKeyId: 'r', data: [{ columnFamily: 'cf', columnName: 'c', columnValue: value }] })).status).to.equal(200);
    await new Promise((resolve) => setTimeout(resolve, 2)); // service timestamps are milliseconds
  }
  const table = `/v2/stores/${app.storeName}/instances/${app.instance}/tables/kept`;
  const described = await app.api.get(table);
  const read = await app.api.get(`${table}/rows/r?versions=10`);
  expect(read.body.cells[0].value).to.equal('c');
  return { families: described.body.families, versions: read.body.cells.length };
}

describe('v1 tables keep V1_MAX_VERSIONS versions of each column', () => {
  describe('by default', () => {
    const app = useTestApp({ store: embeddedHarness });
    it('one: the family says maxVersions 1, and only the latest version is left', async () => {
      expect(await v1Table(app())).to.deep.equal({ families: [{ name: 'cf', maxVersions: 1 }], versions: 1 });
    });
  });

  describe('with V1_MAX_VERSIONS=0', () => {
    const app = useTestApp({ store: embeddedHarness, v1MaxVersions: 0 });
    it('every version, as before', async () => {
      expect(await v1Table(app())).to.deep.equal({ families: [{ name: 'cf' }], versions: 3 });
    });
  });

  describe('with V1_MAX_VERSIONS=2', () => {
    const app = useTestApp({ store: embeddedHarness, v1MaxVersions: 2 });
    it('the newest two', async () => {
      expect(await v1Table(app())).to.deep.equal({ families: [{ name: 'cf', maxVersions: 2 }], versions: 2 });
    });
  });
});
