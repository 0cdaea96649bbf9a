/**
 * OIDC bearer tokens over HTTP: which tokens are accepted, what a refused caller is told, and
 * how keys are fetched, rotated and kept through an issuer outage. Tokens are real, signed by a
 * local issuer serving its JWKS and discovery document over HTTP.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'chai';
import { SignJWT } from 'jose';
import { MAX_CREDENTIAL_CHARS } from '../../src/http/middleware/authenticate.ts';
import { tempDirectory } from '../support/access-files.ts';
import type { ApiResponse } from '../support/api-client.ts';
import { TEST_AUDIENCE, TestIssuer, unsignedToken } from '../support/test-issuer.ts';
import { type TestAuth, useTestApp } from '../support/test-app.ts';

const WRITER = 'system:serviceaccount:shop:orders';
const READER_EMAIL = 'reports@my-project.iam.gserviceaccount.com';
const NOT_ACCEPTED = 'The credential was not accepted.';
const EXPIRED = 'The token has expired or is not valid yet.';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** An app in oidc mode trusting `issuer()`, with a writer subject and a reader email on every instance. */
function oidcApp(issuer: () => TestIssuer, timing: Partial<NonNullable<TestAuth['oidcTiming']>> = {}) {
  const files = tempDirectory();
  after(() => files.remove());
  return useTestApp({
    auth: () => {
      const grantsFile = join(files.path, 'grants.json');
      writeFileSync(
        grantsFile,
        JSON.stringify({
          grants: [
            { subject: WRITER, role: 'writer', instances: ['*'] },
            { email: READER_EMAIL, role: 'reader', instances: ['*'] },
          ],
        }),
      );
      return {
        config: { modes: ['oidc'], protectDocs: false, oidc: { issuer: issuer().issuer, audiences: [TEST_AUDIENCE, 'other-audience'], grantsFile } },
        oidcTiming: { clockToleranceSeconds: 30, cooldownMs: 30_000, refreshMs: 600_000, fetchTimeoutMs: 2000, retryAfterFailureMs: 5000, ...timing },
      };
    },
  });
}

describe('OIDC tokens', () => {
  let issuer: TestIssuer;
  before(async () => {
    issuer = await TestIssuer.start();
  });
  after(async () => {
    await issuer?.close();
  });
  const app = oidcApp(() => issuer);
  const now = () => Math.floor(Date.now() / 1000);

  before(async () => {
    const api = app().api.as({ authorization: `Bearer ${await issuer.sign(WRITER)}` });
    // Reading a table that does not exist: 404 TABLE_NOT_FOUND shows a caller got through.
    expect((await api.get(`/v1/${app().instance}/readCellData?tableName=absent&id=r`)).status).to.equal(404);
  });

  function read(headers: Record<string, string>): Promise<ApiResponse> {
    return app().api.get(`/v1/${app().instance}/readCellData?tableName=absent&id=r`, { headers });
  }
  const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

  function expectAccepted(response: ApiResponse, what: string): void {
    expect(response.status, `${what}: ${JSON.stringify(response.body)}`).to.equal(404);
    expect(response.body.code, what).to.equal('TABLE_NOT_FOUND');
  }
  function expectRefused(response: ApiResponse, detail: string, what: string, challenge = 'invalid_token'): void {
    expect(response.status, `${what}: ${JSON.stringify(response.body)}`).to.equal(401);
    expect(response.body.code, what).to.equal('UNAUTHENTICATED');
    expect(response.body.detail, what).to.equal(detail);
    expect(response.headers.get('www-authenticate'), what).to.equal(`Bearer realm="kvcrud", error="${challenge}"`);
  }

  it('accepts RS256 and ES256 tokens for the subject of a grant', async () => {
    expectAccepted(await read(bearer(await issuer.sign(WRITER, { alg: 'RS256' }))), 'RS256');
    expectAccepted(await read(bearer(await issuer.sign(WRITER, { alg: 'ES256' }))), 'ES256');
  });

  it('accepts a token whose aud lists a configured audience among others', async () => {
    expectAccepted(await read(bearer(await issuer.sign(WRITER, { claims: { aud: ['someone-else', TEST_AUDIENCE] } }))), 'aud list');
    expectAccepted(await read(bearer(await issuer.sign(WRITER, { claims: { aud: 'other-audience' } }))), 'second audience');
  });

  it('allows 30 s of clock skew on exp and nbf, not more', async () => {
    expectAccepted(await read(bearer(await issuer.sign(WRITER, { claims: { exp: now() - 10 } }))), 'expired 10 s ago');
    expectAccepted(await read(bearer(await issuer.sign(WRITER, { claims: { nbf: now() + 10 } }))), 'nbf in 10 s');
    expectRefused(await read(bearer(await issuer.sign(WRITER, { claims: { exp: now() - 60 } }))), EXPIRED, 'expired 60 s ago');
    expectRefused(await read(bearer(await issuer.sign(WRITER, { claims: { nbf: now() + 120 } }))), EXPIRED, 'nbf in 2 min');
  });

  it('refuses a token for another audience or from another issuer, without saying which', async () => {
    expectRefused(await read(bearer(await issuer.sign(WRITER, { claims: { aud: 'not-kvcrud' } }))), NOT_ACCEPTED, 'audience');
    expectRefused(await read(bearer(await issuer.sign(WRITER, { claims: { iss: 'https://evil.example' } }))), NOT_ACCEPTED, 'issuer');
  });

  it('refuses unsigned (alg none) and HMAC-signed tokens', async () => {
    const claims = { iss: issuer.issuer, aud: TEST_AUDIENCE, sub: WRITER, exp: now() + 300 };
    expectRefused(await read(bearer(unsignedToken(claims))), NOT_ACCEPTED, 'alg none');
    const hmac = await new SignJWT(claims).setProtectedHeader({ alg: 'HS256', kid: 'rsa-1' }).sign(new TextEncoder().encode('a shared secret of 32 bytes!!!!!'));
    expectRefused(await read(bearer(hmac)), NOT_ACCEPTED, 'HS256');
  });

  it('refuses a token whose signature or claims were tampered with', async () => {
    const token = await issuer.sign('system:serviceaccount:shop:nobody');
    const [header, payload, signature] = token.split('.') as [string, string, string];
    // The same signature over other claims: a caller promoting itself.
    const claims = JSON.parse(Buffer.from(payload, 'base64url').toString()) as Record<string, unknown>;
    const promoted = Buffer.from(JSON.stringify({ ...claims, sub: WRITER })).toString('base64url');
    expectRefused(await read(bearer(`${header}.${promoted}.${signature}`)), NOT_ACCEPTED, 'claims changed');
    // The signature itself changed.
    const bytes = Buffer.from(signature, 'base64url');
    bytes[10] = (bytes[10] ?? 0) ^ 0xff;
    expectRefused(await read(bearer(`${header}.${payload}.${bytes.toString('base64url')}`)), NOT_ACCEPTED, 'signature changed');
  });

  it('refuses a token signed by a key the issuer does not publish, under a known or an unknown kid', async () => {
    expectRefused(await read(bearer(await issuer.sign(WRITER, { strangerKid: 'rsa-1' }))), NOT_ACCEPTED, 'known kid, other key');
    expectRefused(await read(bearer(await issuer.sign(WRITER, { strangerKid: 'no-such-kid' }))), NOT_ACCEPTED, 'unknown kid');
  });

  it('refuses a token without exp or sub', async () => {
    expectRefused(await read(bearer(await issuer.sign(WRITER, { claims: { exp: undefined } }))), NOT_ACCEPTED, 'no exp');
    expectRefused(await read(bearer(await issuer.sign(WRITER, { claims: { sub: undefined } }))), NOT_ACCEPTED, 'no sub');
  });

  it('answers 401 invalid_request for a malformed Authorization header, and invalid_token for a bearer that is no JWT', async () => {
    const malformed = 'The Authorization header must be `Bearer <credential>`.';
    for (const authorization of ['Bearer', 'Bearer ', 'Bearer two words', 'Basic dXNlcjpwYXNz', 'Token abc']) {
      expectRefused(await read({ authorization }), malformed, JSON.stringify(authorization.slice(0, 20)), 'invalid_request');
    }
    const tooLong = `Bearer ${'a'.repeat(MAX_CREDENTIAL_CHARS + 1)}`;
    expectRefused(await read({ authorization: tooLong }), `The credential is longer than ${MAX_CREDENTIAL_CHARS} characters.`, 'too long', 'invalid_request');
    expectRefused(await read({ authorization: 'Bearer not-a-jwt' }), NOT_ACCEPTED, 'not a JWT');
    expectRefused(await read({ authorization: 'Bearer a.b.c' }), NOT_ACCEPTED, 'three bad parts');
    // The scheme name is case-insensitive (RFC 9110).
    expectAccepted(await read({ authorization: `bearer ${await issuer.sign(WRITER)}` }), 'lower-case scheme');
  });

  it('answers 401 invalid_request to an API key when only oidc is on, and to two credentials at once', async () => {
    expectRefused(await read({ 'x-api-key': 'some-key' }), 'API keys are not accepted here; send a bearer token.', 'X-API-Key', 'invalid_request');
    const both = { ...bearer(await issuer.sign(WRITER)), 'x-api-key': 'some-key' };
    expectRefused(await read(both), 'Send one credential: Authorization or X-API-Key, not both.', 'both', 'invalid_request');
  });

  it('answers 403 to a valid token without a grant, naming the subject', async () => {
    const response = await read(bearer(await issuer.sign('system:serviceaccount:shop:stranger')));
    expect(response.status).to.equal(403);
    expect(response.body.code).to.equal('PERMISSION_DENIED');
    expect(response.body.detail).to.equal(
      `oidc:system:serviceaccount:shop:stranger may not readCellData on instance "${app().instance}": that needs the reader role there.`,
    );
  });

  it('matches an email grant only when the issuer says the email is verified', async () => {
    const verified = await issuer.sign('1234567890', { claims: { email: READER_EMAIL.toUpperCase(), email_verified: true } });
    expectAccepted(await read(bearer(verified)), 'verified email');
    const write = await app().api.post(`/v1/${app().instance}/insertData`, { tableName: 't', rowKeyId: 'r', data: [] });
    expect(write.status).to.equal(401);
    const asReader = app().api.as(bearer(verified));
    const denied = await asReader.post(`/v1/${app().instance}/insertData`, { tableName: 't', rowKeyId: 'r', data: [{ columnFamily: 'cf', columnName: 'c', columnValue: 'v' }] });
    expect(denied.status).to.equal(403);
    expect(denied.body.detail).to.contain(`oidc:${READER_EMAIL}`);

    const unverified = await issuer.sign('1234567890', { claims: { email: READER_EMAIL, email_verified: false } });
    expect((await read(bearer(unverified))).status).to.equal(403);
  });

  it('logs why a token was refused, never the token', async () => {
    const token = await issuer.sign(WRITER, { claims: { aud: 'not-kvcrud' } });
    const response = await read(bearer(token));
    const line = app().logs.find((entry) => entry['requestId'] === response.body.requestId);
    expect(line).to.include({ msg: 'request not authenticated' });
    expect(line?.['reason']).to.match(/aud/);
    expect(JSON.stringify(app().logs)).to.not.contain(token.split('.')[2]);
  });
});

describe('OIDC signing keys', () => {
  let issuer: TestIssuer;
  before(async () => {
    issuer = await TestIssuer.start();
    issuer.failWith = 503; // down when the service starts
  });
  after(async () => {
    await issuer?.close();
  });
  const COOLDOWN_MS = 400;
  const RETRY_MS = 300;
  const app = oidcApp(() => issuer, { cooldownMs: COOLDOWN_MS, retryAfterFailureMs: RETRY_MS });
  const read = (token: string) => app().api.get(`/v1/${app().instance}/readCellData?tableName=absent&id=r`, { headers: { authorization: `Bearer ${token}` } });

  it('answers 503 BACKEND_UNAVAILABLE while the issuer cannot be reached, without asking it again at once, then recovers', async () => {
    const token = await issuer.sign(WRITER);
    const first = await read(token);
    expect(first.status).to.equal(503);
    expect(first.body.code).to.equal('BACKEND_UNAVAILABLE');
    const asked = issuer.requests.length;
    expect(asked).to.equal(1);
    for (let i = 0; i < 5; i += 1) expect((await read(token)).status).to.equal(503);
    expect(issuer.requests.length, 'requests to the issuer during the quiet period').to.equal(asked);
    // The cause is logged for the operators; the caller saw only the code.
    expect(app().logs.some((entry) => entry['level'] === 'error' && entry['status'] === 503)).to.equal(true);

    issuer.failWith = undefined;
    await sleep(RETRY_MS + 50);
    expect((await read(token)).status).to.equal(404);
    expect(issuer.requests.map((request) => request.path)).to.include.members(['/.well-known/openid-configuration', '/keys']);
  });

  it('picks up a rotated key on an unknown kid once the cooldown since the last fetch has passed', async () => {
    await sleep(COOLDOWN_MS + 50);
    // An unknown kid after the cooldown fetches the keys again...
    const fetches = issuer.jwksFetches;
    expect((await read(await issuer.sign(WRITER, { strangerKid: 'random-1' }))).status).to.equal(401);
    expect(issuer.jwksFetches).to.equal(fetches + 1);
    // ...so a key published right after is not seen until the cooldown has passed.
    const kid = await issuer.rotate('ES256');
    const token = await issuer.sign(WRITER, { alg: 'ES256', kid });
    expect((await read(token)).status).to.equal(401);
    expect(issuer.jwksFetches).to.equal(fetches + 1);
    await sleep(COOLDOWN_MS + 50);
    expect((await read(token)).status).to.equal(404);
    expect(issuer.jwksFetches).to.equal(fetches + 2);
  });

  it('does not let tokens with random kids make it fetch the keys more than once per cooldown', async () => {
    const tokens = await Promise.all(Array.from({ length: 20 }, (_, i) => issuer.sign(WRITER, { strangerKid: `random-${i}` })));
    await sleep(COOLDOWN_MS + 50);
    const fetches = issuer.jwksFetches;
    const started = Date.now();
    for (const token of tokens) expect((await read(token)).status).to.equal(401);
    expect(Date.now() - started, 'the requests took longer than the cooldown').to.be.below(COOLDOWN_MS);
    expect(issuer.jwksFetches - fetches).to.equal(1);
  });

  it('keeps accepting tokens signed with the keys it has while the issuer is down', async () => {
    const token = await issuer.sign(WRITER);
    issuer.failWith = 500;
    try {
      expect((await read(token)).status).to.equal(404);
      await sleep(COOLDOWN_MS + 50);
      // An unknown kid now cannot be checked: the issuer is down (503), not the caller wrong.
      expect((await read(await issuer.sign(WRITER, { strangerKid: 'during-outage' }))).status).to.equal(503);
      expect((await read(token)).status).to.equal(404);
    } finally {
      issuer.failWith = undefined;
    }
  });
});
