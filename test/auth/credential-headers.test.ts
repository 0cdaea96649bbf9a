/**
 * How a credential must be sent: one Authorization or X-API-Key header, once, and at most
 * MAX_CREDENTIAL_CHARS long, which a large real token fits.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'chai';
import { MAX_CREDENTIAL_CHARS } from '../../src/http/middleware/authenticate.ts';
import { type KeyEntry, keysFile, newApiKey, tempDirectory } from '../support/access-files.ts';
import { sendRaw } from '../support/raw-http.ts';
import { harness as embeddedHarness } from '../support/harnesses/embedded.ts';
import { TEST_AUDIENCE, TestIssuer } from '../support/test-issuer.ts';
import { useTestApp } from '../support/test-app.ts';

const INVALID_REQUEST = 'Bearer realm="kvcrud", error="invalid_request"';

describe('credential headers', () => {
  const SUBJECT = 'system:serviceaccount:shop:orders';
  const files = tempDirectory();
  after(() => files.remove());
  let issuer: TestIssuer;
  before(async () => {
    issuer = await TestIssuer.start();
  });
  after(async () => {
    await issuer?.close();
  });
  const admin: KeyEntry = { name: 'ops', key: newApiKey(), role: 'admin', instances: ['*'] };
  const app = useTestApp({
    store: embeddedHarness,
    auth: () => {
      const apiKeysFile = join(files.path, 'keys.json');
      const grantsFile = join(files.path, 'grants.json');
      writeFileSync(apiKeysFile, keysFile([admin]));
      writeFileSync(grantsFile, JSON.stringify({ grants: [{ subject: SUBJECT, role: 'reader', instances: ['*'] }] }));
      return {
        config: { modes: ['apikey', 'oidc'], apiKeysFile, protectDocs: false, oidc: { issuer: issuer.issuer, audiences: [TEST_AUDIENCE], grantsFile } },
      };
    },
  });
  const read = (headers: ReadonlyArray<readonly [string, string]>) =>
    sendRaw(app().baseUrl, { method: 'GET', path: `/v1/${app().instance}/readCellData?tableName=absent&id=r`, headers }, app().api);

  it('answers 401 invalid_request to two Authorization headers, whichever is good', async () => {
    const good = `Bearer ${admin.key}`;
    const bad = `Bearer ${newApiKey()}`;
    for (const pair of [[good, bad], [bad, good], [good, good]]) {
      const response = await read(pair.map((value) => ['authorization', value] as const));
      expect(response.status).to.equal(401);
      expect(response.body.detail).to.equal('Send one Authorization header, not several.');
      expect(response.headers.get('www-authenticate')).to.equal(INVALID_REQUEST);
    }
    expect((await read([['authorization', good]])).status).to.equal(404);
  });

  it('answers 401 invalid_request to two X-API-Key headers, whichever is good', async () => {
    for (const pair of [[admin.key, newApiKey()], [newApiKey(), admin.key], [admin.key, admin.key]]) {
      const response = await read(pair.map((value) => ['x-api-key', value] as const));
      expect(response.status).to.equal(401);
      expect(response.body.detail).to.equal('Send one X-API-Key header, not several.');
      expect(response.headers.get('www-authenticate')).to.equal(INVALID_REQUEST);
    }
  });

  it(`accepts a valid token of ${MAX_CREDENTIAL_CHARS / 1024} KiB`, async () => {
    // A token with many claims (groups, say), just under the bound.
    const sign = (padding: number) => issuer.sign(SUBJECT, { claims: { groups: 'g'.repeat(Math.floor((padding * 3) / 4) - 400) } });
    let padding = MAX_CREDENTIAL_CHARS;
    let token = await sign(padding);
    while (token.length > MAX_CREDENTIAL_CHARS) {
      padding -= 64;
      token = await sign(padding);
    }
    expect(token.length).to.be.within(MAX_CREDENTIAL_CHARS - 200, MAX_CREDENTIAL_CHARS);
    const response = await read([['authorization', `Bearer ${token}`]]);
    expect(response.status, JSON.stringify(response.body)).to.equal(404);
    expect(response.body.code).to.equal('TABLE_NOT_FOUND');
  });

  it('answers 401 invalid_request, saying so, to a longer credential', async () => {
    for (const [header, value] of [
      ['authorization', `Bearer ${'x'.repeat(MAX_CREDENTIAL_CHARS + 1)}`],
      ['x-api-key', 'x'.repeat(MAX_CREDENTIAL_CHARS + 1)],
    ] as const) {
      const response = await read([[header, value]]);
      expect(response.status).to.equal(401);
      expect(response.body.detail).to.equal(`The credential is longer than ${MAX_CREDENTIAL_CHARS} characters.`);
      expect(response.headers.get('www-authenticate')).to.equal(INVALID_REQUEST);
    }
  });
});

describe('credential headers with AUTH_MODE none', () => {
  const app = useTestApp({ store: embeddedHarness });

  it('ignores them, repeated or not, as it ignores every credential', async () => {
    const response = await sendRaw(app().baseUrl, {
      method: 'GET',
      path: `/v1/${app().instance}/readCellData?tableName=absent&id=r`,
      headers: [['authorization', 'Bearer a'], ['authorization', 'Bearer b'], ['x-api-key', 'c'], ['x-api-key', 'd']],
    }, app().api);
    expect(response.status).to.equal(404);
  });
});
