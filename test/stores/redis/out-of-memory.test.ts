import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { type RedisServer, requireRedis, spawnRedis } from '../../support/redis-server.ts';
import { type ServiceProcess, cleanEnv, runService } from '../../support/service-process.ts';

/** Redis at its memory limit, with the policy kvcrud asks for (noeviction), behind the service as a process. */
describe('redis store: Redis at maxmemory with noeviction', function () {
  this.timeout(120_000);
  let server: RedisServer;
  let service: ServiceProcess;
  let dir: string;
  const tables = '/v2/stores/cache/instances/sessions/tables';

  const call = async (method: string, path: string, body?: unknown) => {
    const response = await fetch(`${service.baseUrl}${path}`, {
      method,
      ...(body === undefined ? {} : { headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }),
    });
    const text = await response.text();
    return { status: response.status, retryAfter: response.headers.get('retry-after'), body: (text === '' ? {} : JSON.parse(text)) as Record<string, unknown> };
  };
  const put = (table: string, key: string, value: string) => call('PUT', `${tables}/${table}/rows/${key}`, { cells: [{ family: 'cf', column: 'c', value }] });

  before(async function () {
    requireRedis(this);
    server = await spawnRedis({ args: ['--maxmemory', '2mb', '--maxmemory-policy', 'noeviction'] });
    dir = mkdtempSync(join(tmpdir(), 'kvcrud-redis-oom-'));
    const storesFile = join(dir, 'stores.yaml');
    writeFileSync(storesFile, `default: cache\nstores:\n  cache: { driver: redis, url: "${server.url}", instances: [sessions] }\n`);
    service = await runService(cleanEnv({ PORT: '0', STORES_FILE: storesFile, STORE_TIMEOUT_MS: '2000' }));
  });
  after(async () => {
    await service?.stop('SIGKILL');
    await server?.stop('SIGKILL');
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  });

  it('answers writes 507 INSUFFICIENT_STORAGE at once, not 503; reads, deletes and readiness go on; writes again once memory is freed', async () => {
    expect((await call('POST', tables, { name: 'users', families: [{ name: 'cf', maxVersions: 1 }] })).status).to.equal(201);
    const value = 'v'.repeat(48_000);
    let written = 0;
    let refused: Awaited<ReturnType<typeof call>> | undefined;
    let took = 0;
    // 2 MB hold a few dozen such rows beside what Redis uses itself.
    while (written < 200) {
      const started = Date.now();
      const answer = await put('users', `user-${written}`, value);
      took = Date.now() - started;
      if (answer.status !== 200) {
        refused = answer;
        break;
      }
      written++;
    }
    expect(written).to.be.above(2);
    expect([refused?.status, refused?.body['code']]).to.deep.equal([507, 'INSUFFICIENT_STORAGE']);
    expect(refused?.retryAfter).to.equal('30');
    expect(took, 'refused at once, not retried until the deadline').to.be.below(1000);

    // Redis frees memory in the background (lazy frees, the change stream's trimming), so a large
    // write right after a refusal may pass: v1 is refused within a few.
    let v1: Awaited<ReturnType<typeof call>> | undefined;
    for (let attempt = 0; attempt < 5 && v1?.status !== 507; attempt++) {
      v1 = await call('POST', '/v1/sessions/insertData', { tableName: 'users', rowKeyId: `v1-${attempt}`, data: [{ columnFamily: 'cf', columnName: 'c', columnValue: value }] });
    }
    expect([v1?.status, v1?.body['code']]).to.deep.equal([507, 'INSUFFICIENT_STORAGE']);
    // Redis refuses a write only while its memory is over maxmemory, and a refused write leaves it
    // just under: a small write (a createTable) may still pass, then the next large one is refused.

    expect((await call('GET', `${tables}/users/rows/user-0`)).status).to.equal(200);
    expect((await call('GET', '/readyz')).status).to.equal(200);
    expect(service.output.filter((line) => line.includes('"status":507')).join('\n')).to.contain('OOM command not allowed');

    // Deletes free memory, and writes go on once there is room.
    for (let index = 0; index < Math.min(written, 10); index++) {
      expect((await call('DELETE', `${tables}/users/rows/user-${index}`)).status).to.equal(204);
    }
    expect((await put('users', 'after-deletes', 'small')).status).to.equal(200);
    expect((await call('DELETE', `${tables}/users`)).status).to.equal(204);
    expect(service.process.exitCode).to.equal(null);
  });
});
