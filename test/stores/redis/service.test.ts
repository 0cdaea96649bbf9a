import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { type RedisServer, requireRedis, spawnRedis } from '../../support/redis-server.ts';
import { type ServiceProcess, cleanEnv, runService } from '../../support/service-process.ts';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The service as a process, with a STORES_FILE whose only (and so default) store is Redis. */
describe('redis store: served by the service from a STORES_FILE', () => {
  let server: RedisServer;
  let service: ServiceProcess;
  let dir: string;
  // The answer's body is JSON.parse's any: the tests check it field by field.
  const call = async (method: string, path: string, request?: unknown): Promise<{ status: number; body: ReturnType<typeof JSON.parse> }> => {
    const response = await fetch(`${service.baseUrl}${path}`, {
      method,
      ...(request === undefined ? {} : { headers: { 'content-type': 'application/json' }, body: JSON.stringify(request) }),
    });
    const text = await response.text();
    return { status: response.status, body: text === '' ? undefined : JSON.parse(text) };
  };

  before(async function () {
    this.timeout(90_000);
    requireRedis(this);
    server = await spawnRedis();
    dir = mkdtempSync(join(tmpdir(), 'kvcrud-redis-service-'));
    const storesFile = join(dir, 'stores.yaml');
    writeFileSync(storesFile, `default: cache\nstores:\n  cache: { driver: redis, url: "${server.url}", instances: [sessions] }\n`);
    service = await runService(cleanEnv({ PORT: '0', STORES_FILE: storesFile, STORE_TIMEOUT_MS: '1000' }));
  });
  after(async () => {
    await service?.stop('SIGKILL');
    await server?.stop('SIGKILL');
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  });

  it('describes the store at start-up without a secret', () => {
    const line = service.output.find((entry) => entry.includes('listening')) ?? '';
    expect(line).to.include('"driver":"redis"');
    expect(line).to.include(`redis://127.0.0.1:${server.port}`);
  });

  it('serves v1 as the default store, and redis-cli shows the row as documented', async () => {
    expect((await call('POST', '/v1/sessions/createTable', { tableName: 'users', columnFamily: 'profile' })).status).to.equal(201);
    const write = await call('POST', '/v1/sessions/insertData', {
      tableName: 'users',
      rowKeyId: 'user#1',
      data: [{ columnFamily: 'profile', columnName: 'name', columnValue: 'Ada' }],
    });
    expect(write.status).to.equal(200);
    const read = await call('GET', '/v1/sessions/readCellData?tableName=users&id=user%231');
    expect(read.status).to.equal(200);
    expect(read.body?.['data']?.[0]).to.include({ columnFamily: 'profile', columnName: 'name', columnValue: 'Ada' });

    const generation = (await server.cli('--raw', 'HGET', 'kvcrud:{sessions/users}:table', 'generation')).trim();
    const stored = await server.cli('HGETALL', `kvcrud:{sessions/users}:${generation}:r:user#1`);
    expect(stored).to.match(/^1\) "profile:name"\n2\) "\d{16}:Ada"\n$/);
  });

  it('serves v2: the store and its capabilities, tables, rows and scans; more versions than it keeps is 501', async () => {
    const stores = await call('GET', '/v2/stores');
    expect(stores.status).to.equal(200);
    const cache = stores.body?.['stores']?.find((store: { name: string }) => store.name === 'cache');
    expect(cache).to.deep.include({ name: 'cache', driver: 'redis', instances: ['sessions'] });
    expect(cache.capabilities).to.deep.equal({ multipleVersions: false, maxAge: true, reverseScan: true, checkAndMutate: true, readModifyWrite: true, changeFeed: true });
    expect(cache.limits.changeRetentionSeconds).to.equal(3600);
    expect(cache.limits.versionsPerRead).to.equal(1);

    const tables = '/v2/stores/cache/instances/sessions/tables';
    const created = await call('POST', tables, { name: 'events', families: [{ name: 'e', maxVersions: 1, maxAgeSeconds: 3600 }] });
    expect(created.status).to.equal(201);
    const keepsAll = await call('POST', tables, { name: 'history', families: [{ name: 'e' }] });
    expect([keepsAll.status, keepsAll.body?.['code']]).to.deep.equal([501, 'NOT_SUPPORTED_BY_STORE']);
    for (const key of ['b', 'a', 'c']) {
      const put = await call('PUT', `${tables}/events/rows/${key}`, { cells: [{ family: 'e', column: 'v', value: `value-${key}` }] });
      expect(put.status).to.equal(200);
    }
    const row = await call('GET', `${tables}/events/rows/a`);
    expect([row.status, row.body?.['cells']?.[0]?.['value']]).to.deep.equal([200, 'value-a']);
    const scan = await call('GET', `${tables}/events/rows?reverse=true&pageSize=2`);
    expect(scan.status).to.equal(200);
    expect(scan.body?.['rows'].map((entry: { key: string }) => entry.key)).to.deep.equal(['c', 'b']);
    expect(scan.body?.['nextPageToken']).to.be.a('string');
    const versions = await call('GET', `${tables}/events/rows/a?versions=2`);
    expect([versions.status, versions.body?.['code']]).to.deep.equal([501, 'NOT_SUPPORTED_BY_STORE']);
    expect((await call('DELETE', `${tables}/events`)).status).to.equal(204);
    expect((await call('GET', `${tables}/events/rows/a`)).body?.['code']).to.equal('TABLE_NOT_FOUND');
  });

  it('Redis killed: 503 at once and /readyz 503; back on the same port (empty): tables answer TABLE_NOT_FOUND, then serve again, without a restart', async function () {
    this.timeout(60_000);
    expect((await call('GET', '/readyz')).status).to.equal(200);
    const port = server.port;
    await server.stop('SIGKILL');
    await sleep(300);
    const started = Date.now();
    const down = await call('GET', '/v1/sessions/readCellData?tableName=users&id=user%231');
    expect([down.status, down.body?.['code']]).to.deep.equal([503, 'BACKEND_UNAVAILABLE']);
    expect(Date.now() - started, 'answered fast, not at the deadline').to.be.below(500);
    expect((await call('GET', '/readyz')).status).to.equal(503);
    expect((await call('GET', '/healthz')).status).to.equal(200);

    server = await spawnRedis({ port });
    const restarted = Date.now();
    while ((await call('GET', '/readyz')).status !== 200) {
      if (Date.now() - restarted > 10_000) expect.fail('/readyz not 200 within 10 s of Redis coming back');
      await sleep(100);
    }
    // Redis without persistence comes back empty: the catalog is gone with the rest.
    const gone = await call('GET', '/v1/sessions/readCellData?tableName=users&id=user%231');
    expect([gone.status, gone.body?.['code']]).to.deep.equal([404, 'TABLE_NOT_FOUND']);
    expect((await call('POST', '/v1/sessions/createTable', { tableName: 'users', columnFamily: 'profile' })).status).to.equal(201);
    const write = await call('POST', '/v1/sessions/insertData', {
      tableName: 'users',
      rowKeyId: 'user#1',
      data: [{ columnFamily: 'profile', columnName: 'name', columnValue: 'again' }],
    });
    expect(write.status).to.equal(200);
    expect((await call('GET', '/v1/sessions/readCellData?tableName=users&id=user%231')).body?.['data']?.[0]?.['columnValue']).to.equal('again');
  });
});
