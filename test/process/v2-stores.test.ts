import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { ApiClient } from '../support/api-client.ts';
import { emulatorHost } from '../support/emulator.ts';
import { type ServiceProcess, cleanEnv, runService } from '../support/service-process.ts';
import { TEST_PROJECT, randomInstanceId } from '../support/test-app.ts';

describe('v2 across service processes', function () {
  this.timeout(120_000);
  let directory: string;
  const running: ServiceProcess[] = [];

  before(() => {
    directory = mkdtempSync(join(tmpdir(), 'kvcrud-v2-stores-'));
  });
  after(async () => {
    await Promise.all(running.splice(0).map((service) => service.stop()));
    rmSync(directory, { recursive: true, force: true });
  });

  async function start(storesFile: string): Promise<ApiClient> {
    const service = await runService(cleanEnv({ PORT: '0', STORES_FILE: storesFile }));
    running.push(service);
    return ApiClient.connect(service.baseUrl);
  }

  it('serves an embedded and a Bigtable store through v2 in one process, v1 on the default one', async function () {
    const host = emulatorHost(this);
    const remote = randomInstanceId();
    const file = join(directory, 'both.yaml');
    writeFileSync(
      file,
      [
        'default: local',
        'stores:',
        `  local: { driver: embedded, dataDir: ${join(directory, 'local')}, instances: [local] }`,
        `  remote: { driver: bigtable, projectId: ${TEST_PROJECT}, emulatorHost: "${host}", instances: [${remote}] }`,
      ].join('\n'),
    );
    const api = await start(file);
    const stores = (await api.get('/v2/stores')).body.stores as Array<{ name: string; driver: string; default: boolean }>;
    expect(stores.map(({ name, driver, default: isDefault }) => [name, driver, isDefault])).to.deep.equal([
      ['local', 'embedded', true],
      ['remote', 'bigtable', false],
    ]);
    for (const [store, instance] of [['local', 'local'], ['remote', remote]]) {
      const tables = `/v2/stores/${store}/instances/${instance}/tables`;
      expect((await api.post(tables, { name: 'orders', families: [{ name: 'cf' }] })).status, store).to.equal(201);
      await api.request('PUT', `${tables}/orders/rows/k`, { json: { cells: [{ family: 'cf', column: 'c', value: store }] } });
      expect((await api.get(`${tables}/orders/rows/k`)).body.cells[0].value, store).to.equal(store);
    }
    // v1 reaches the default store: what v2 wrote there.
    expect((await api.get('/v1/local/readCellData?tableName=orders&id=k')).body.data[0].columnValue).to.equal('local');
  });

  it('resumes in one process a page token another gave, on one Bigtable instance', async function () {
    const host = emulatorHost(this);
    const instance = randomInstanceId();
    const file = join(directory, 'bigtable.yaml');
    writeFileSync(file, ['default: bt', 'stores:', `  bt: { driver: bigtable, projectId: ${TEST_PROJECT}, emulatorHost: "${host}", instances: [${instance}] }`].join('\n'));
    const [first, second] = await Promise.all([start(file), start(file)]);
    if (first === undefined || second === undefined) throw new Error('two processes');
    const rows = `/v2/stores/bt/instances/${instance}/tables/pages/rows`;
    expect((await first.post(`/v2/stores/bt/instances/${instance}/tables`, { name: 'pages', families: [{ name: 'cf' }] })).status).to.equal(201);
    const keys = Array.from({ length: 23 }, (_, index) => `key-${String(index).padStart(2, '0')}`);
    const written = await first.post(`${rows}:batchWrite`, { entries: keys.map((key) => ({ key, mutations: [{ set: { family: 'cf', column: 'c', value: key } }] })) });
    expect(written.status).to.equal(200);

    const seen: string[] = [];
    let token: string | undefined;
    let turn = 0;
    do {
      const api = turn % 2 === 0 ? first : second;
      const page = await api.get(`${rows}?pageSize=5${token === undefined ? '' : `&pageToken=${token}`}`);
      expect(page.status).to.equal(200);
      seen.push(...page.body.rows.map((row: { key: string }) => row.key));
      token = page.body.nextPageToken;
      turn += 1;
    } while (token !== undefined);
    expect(seen).to.deep.equal(keys);
    expect(turn).to.equal(5);
  });
});
