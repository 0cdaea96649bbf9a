import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'chai';
import { ApiClient } from '../support/api-client.ts';
import { type KeyEntry, eventually, keysFile, newApiKey, replaceFile, tempDirectory } from '../support/access-files.ts';
import { emulatorHost } from '../support/emulator.ts';
import { runService, runServiceToExit, serviceEnv } from '../support/service-process.ts';
import { TEST_AUDIENCE, TestIssuer } from '../support/test-issuer.ts';
import { randomInstanceId } from '../support/test-app.ts';

const EX_CONFIG = 78;
const parsed = (lines: readonly string[]) => lines.flatMap((line) => (line.startsWith('{') ? [JSON.parse(line) as Record<string, unknown>] : []));

describe('the service process with authentication', () => {
  const files = tempDirectory();
  after(() => files.remove());

  it('with AUTH_MODE none (the default), warns at start-up that every caller is admin', async function () {
    const service = await runService(serviceEnv(randomInstanceId(), emulatorHost(this)));
    try {
      await eventually(() => Promise.resolve(parsed(service.output).some((line) => line['level'] === 'warn')), 5000, 'a warning');
      const warning = parsed(service.output).find((line) => line['level'] === 'warn');
      expect(warning?.['msg']).to.equal('AUTH_MODE is none: every caller is admin on every instance. Set AUTH_MODE to apikey or oidc to say who may do what.');
      expect(parsed(service.output)[0]).to.include({ auth: 'none' });
    } finally {
      await service.stop();
    }
  });

  it('exits 78 naming the file and the problem when the keys file is invalid at start-up', async () => {
    const path = join(files.path, 'invalid-keys.json');
    writeFileSync(path, JSON.stringify({ keys: [{ name: 'a', sha256: 'abc', role: 'reader', instances: ['*'] }] }));
    const { code, stderr } = await runServiceToExit(serviceEnv('inst-a', '127.0.0.1:1', { AUTH_MODE: 'apikey', AUTH_API_KEYS_FILE: path }));
    expect(code).to.equal(EX_CONFIG);
    expect(stderr).to.equal(
      `kvcrud: invalid configuration: AUTH_API_KEYS_FILE file "${path}": keys[0].sha256 must be the SHA-256 of the key in hex (64 digits)\n`,
    );
  });

  it('exits 78 when the keys file cannot be read, or a mode lacks its variables', async () => {
    const missing = await runServiceToExit(serviceEnv('inst-a', '127.0.0.1:1', { AUTH_MODE: 'apikey', AUTH_API_KEYS_FILE: '/nonexistent/keys.json' }));
    expect(missing.code).to.equal(EX_CONFIG);
    expect(missing.stderr).to.equal('kvcrud: invalid configuration: AUTH_API_KEYS_FILE file "/nonexistent/keys.json" cannot be read (ENOENT)\n');
    const incomplete = await runServiceToExit(serviceEnv('inst-a', '127.0.0.1:1', { AUTH_MODE: 'oidc', AUTH_OIDC_AUDIENCE: 'kvcrud' }));
    expect(incomplete.code).to.equal(EX_CONFIG);
    expect(incomplete.stderr).to.equal(
      'kvcrud: invalid configuration: AUTH_OIDC_ISSUER is required when AUTH_MODE includes oidc\nkvcrud: invalid configuration: AUTH_OIDC_GRANTS_FILE is required when AUTH_MODE includes oidc\n',
    );
  });

  it('with AUTH_MODE apikey, picks up a changed keys file without a restart', async function () {
    this.timeout(60_000);
    const instance = randomInstanceId();
    const path = join(files.path, 'keys.json');
    const admin: KeyEntry = { name: 'ops', key: newApiKey(), role: 'admin', instances: [instance] };
    const newcomer: KeyEntry = { name: 'orders-svc', key: newApiKey(), role: 'reader', instances: [instance] };
    writeFileSync(path, keysFile([admin]));
    const service = await runService(serviceEnv(instance, emulatorHost(this), { AUTH_MODE: 'apikey', AUTH_API_KEYS_FILE: path }));
    try {
      const api = await ApiClient.connect(service.baseUrl);
      const created = await api.as({ 'x-api-key': admin.key }).post(`/v1/${instance}/createTable`, { tableName: 't', columnFamily: 'cf' });
      expect(created.status).to.equal(201);
      const readAs = (key: string) => api.as({ authorization: `Bearer ${key}` }).get(`/v1/${instance}/readCellData?tableName=t&id=r`);
      expect((await readAs(newcomer.key)).status).to.equal(401);

      replaceFile(path, keysFile([admin, newcomer]));
      // The service reads the file every 2 s.
      await eventually(async () => (await readAs(newcomer.key)).status === 404, 10_000, 'the new key is accepted');
      expect((await readAs(newcomer.key)).body.code).to.equal('ROW_NOT_FOUND');
      expect(parsed(service.output).some((line) => line['msg'] === 'reloaded AUTH_API_KEYS_FILE')).to.equal(true);
      expect(service.output.join('\n')).to.not.contain(newcomer.key);
      expect(service.output.join('\n')).to.not.contain(admin.key);
    } finally {
      await service.stop();
    }
  });

  it('with AUTH_MODE oidc, fetches the issuer keys at start-up and accepts its tokens', async function () {
    this.timeout(60_000);
    const issuer = await TestIssuer.start();
    const instance = randomInstanceId();
    const grantsFile = join(files.path, 'grants.json');
    writeFileSync(grantsFile, JSON.stringify({ grants: [{ subject: 'system:serviceaccount:shop:orders', role: 'reader', instances: ['*'] }] }));
    const service = await runService(
      serviceEnv(instance, emulatorHost(this), {
        AUTH_MODE: 'oidc',
        AUTH_OIDC_ISSUER: issuer.issuer,
        AUTH_OIDC_AUDIENCE: TEST_AUDIENCE,
        AUTH_OIDC_GRANTS_FILE: grantsFile,
        AUTH_PROTECT_DOCS: 'true',
      }),
    );
    try {
      await eventually(() => Promise.resolve(parsed(service.output).some((line) => line['msg'] === 'fetched the OIDC signing keys')), 5000, 'keys fetched');
      const token = await issuer.sign('system:serviceaccount:shop:orders');
      const api = await ApiClient.connect(service.baseUrl, { authorization: `Bearer ${token}` });
      expect((await api.get('/openapi.json')).status).to.equal(401);
      const read = await api.as({ authorization: `Bearer ${token}` }).get(`/v1/${instance}/readCellData?tableName=t&id=r`);
      expect(read.status).to.equal(404);
      expect(read.body.code).to.equal('TABLE_NOT_FOUND');
      expect(service.output.join('\n')).to.not.contain(token);
    } finally {
      await service.stop();
      await issuer.close();
    }
  });
});
