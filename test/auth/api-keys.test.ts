import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { SpanKind } from '@opentelemetry/api';
import { expect } from 'chai';
import { type KeyEntry, eventually, keysFile, newApiKey, replaceFile, tempDirectory } from '../support/access-files.ts';
import { withOverrides } from '../support/store-faults.ts';
import { useTestApp } from '../support/test-app.ts';
import { spanRecorder } from '../support/tracing.ts';

describe('API keys', () => {
  const files = tempDirectory();
  const keysPath = join(files.path, 'keys.json');
  const admin: KeyEntry = { name: 'ops', key: newApiKey(), role: 'admin', instances: ['*'] };
  const app = useTestApp({
    auth: () => {
      writeFileSync(keysPath, keysFile([admin]));
      return { config: { modes: ['apikey'], apiKeysFile: keysPath, protectDocs: false }, reloadIntervalMs: 50 };
    },
    // A bug in the store for one table, to see what a server-side failure logs.
    wrapStore: (store) =>
      withOverrides(store, {
        readRows: (table, ...rest) => (table.table === 'explodes' ? Promise.reject(new Error('a bug')) : store.readRows(table, ...rest)),
      }),
  });
  after(() => files.remove());

  const read = (headers: Record<string, string>) => app().api.get(`/v1/${app().instance}/readCellData?tableName=absent&id=r`, { headers });
  const write = (key: string) =>
    app()
      .api.as({ 'x-api-key': key })
      .post(`/v1/${app().instance}/insertData`, { tableName: 'absent', rowKeyId: 'r', data: [{ columnFamily: 'cf', columnName: 'c', columnValue: 'v' }] });

  it('accepts a key in X-API-Key or as a bearer credential, and nothing close to it', async () => {
    expect((await read({ 'x-api-key': admin.key })).status).to.equal(404);
    expect((await read({ authorization: `Bearer ${admin.key}` })).status).to.equal(404);
    for (const attempt of [`${admin.key}x`, admin.key.slice(1), admin.key.toLowerCase()]) {
      const response = await read({ 'x-api-key': attempt });
      expect(response.status).to.equal(401);
      expect(response.headers.get('www-authenticate')).to.equal('Bearer realm="kvcrud", error="invalid_token"');
    }
  });

  it("logs a server-side failure with the caller's name, never its key", async () => {
    const response = await app().api.get(`/v1/${app().instance}/readCellData?tableName=explodes&id=r`, { headers: { 'x-api-key': admin.key } });
    expect(response.status).to.equal(500);
    const line = app().logs.find((entry) => entry['requestId'] === response.body.requestId && entry['level'] === 'error');
    expect(line).to.include({ principal: 'apikey:ops', status: 500 });
    expect(JSON.stringify(app().logs)).to.not.contain(admin.key);
  });

  it("puts the caller's name on its trace span, never its key", async () => {
    spanRecorder.start();
    try {
      const traceId = randomBytes(16).toString('hex');
      const traceparent = `00-${traceId}-${randomBytes(8).toString('hex')}-01`;
      await app().api.get(`/v1/${app().instance}/readCellData?tableName=t&id=r`, { headers: { 'x-api-key': admin.key, traceparent } });
      const spans = await spanRecorder.trace(traceId);
      const server = spans.find((span) => span.kind === SpanKind.SERVER);
      expect(server?.attributes).to.include({ 'enduser.id': 'apikey:ops' });
      expect(JSON.stringify(spans.map((span) => span.attributes))).to.not.contain(admin.key);
    } finally {
      spanRecorder.stop();
    }
  });

  it('answers 401 invalid_request for a malformed X-API-Key', async () => {
    const response = await read({ 'x-api-key': 'two words' });
    expect(response.status).to.equal(401);
    expect(response.body.detail).to.equal('The X-API-Key header must hold just the key.');
    expect(response.headers.get('www-authenticate')).to.equal('Bearer realm="kvcrud", error="invalid_request"');
  });

  it('picks up a changed keys file without a restart: new keys, changed roles, revoked keys', async () => {
    const newcomer: KeyEntry = { name: 'orders-svc', key: newApiKey(), role: 'writer', instances: [app().instance] };
    expect((await write(newcomer.key)).status).to.equal(401);

    replaceFile(keysPath, keysFile([admin, newcomer]));
    await eventually(async () => (await write(newcomer.key)).status === 404, 2000, 'the new key is accepted');
    expect(app().logs.some((line) => line['msg'] === 'reloaded AUTH_API_KEYS_FILE' && line['keys'] === 2)).to.equal(true);

    replaceFile(keysPath, keysFile([admin, { ...newcomer, role: 'reader' }]));
    await eventually(async () => (await write(newcomer.key)).status === 403, 2000, 'the lowered role applies');

    replaceFile(keysPath, keysFile([admin]));
    await eventually(async () => (await write(newcomer.key)).status === 401, 2000, 'the revoked key is refused');
  });

  it('keeps the last valid keys when the file becomes invalid, and logs an error', async () => {
    replaceFile(keysPath, '{"keys": "oops"}');
    await eventually(
      () => Promise.resolve(app().logs.some((line) => line['msg'] === 'AUTH_API_KEYS_FILE is invalid; the last valid content stays in force')),
      2000,
      'the invalid file is reported',
    );
    expect((await read({ 'x-api-key': admin.key })).status).to.equal(404);
    expect((await read({ 'x-api-key': newApiKey() })).status).to.equal(401);
    replaceFile(keysPath, keysFile([admin]));
  });

  it('shows in the metrics when the keys file last loaded and how often it could not be', async () => {
    const scrape = async () => (await app().api.get('/metrics', { headers: { 'x-api-key': admin.key } })).body as string;
    const sample = (text: string, pattern: RegExp) => Number(pattern.exec(text)?.[1] ?? NaN);
    const lastSuccess = /kvcrud_access_file_last_success_timestamp_seconds\{file="AUTH_API_KEYS_FILE"\} ([\d.e+]+)/;
    const failures = /kvcrud_access_file_failures_total\{file="AUTH_API_KEYS_FILE",reason="invalid"\} (\d+)/;
    await eventually(async () => sample(await scrape(), lastSuccess) > Date.now() / 1000 - 5, 5000, 'a recent successful read');

    replaceFile(keysPath, `${keysFile([admin])},`);
    await eventually(async () => sample(await scrape(), failures) >= 2, 5000, 'the failed reads are counted');
    const stale = sample(await scrape(), lastSuccess);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(sample(await scrape(), lastSuccess)).to.equal(stale);

    replaceFile(keysPath, keysFile([admin]));
    await eventually(async () => sample(await scrape(), lastSuccess) > stale, 5000, 'a successful read again');
  });
});
