import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'chai';
import { pino } from 'pino';
import { AuthenticationError } from '../../src/auth/errors.ts';
import { DEFAULT_OIDC_TIMING, OidcVerifier, type OidcSettings, type OidcTiming } from '../../src/auth/oidc.ts';
import { ApiError } from '../../src/service/errors.ts';
import { eventually, tempDirectory } from '../support/access-files.ts';
import { TEST_AUDIENCE, TestIssuer } from '../support/test-issuer.ts';

describe('OidcVerifier', () => {
  let issuer: TestIssuer;
  const verifiers: OidcVerifier[] = [];
  const logs: Array<Record<string, unknown>> = [];
  const logger = pino({ level: 'debug' }, { write: (line: string) => void logs.push(JSON.parse(line) as Record<string, unknown>) });
  const files = tempDirectory();

  beforeEach(async () => {
    issuer = await TestIssuer.start();
    logs.length = 0;
  });
  afterEach(async () => {
    for (const verifier of verifiers.splice(0)) verifier.close();
    await issuer.close();
  });
  after(() => files.remove());

  function verifier(settings: Partial<OidcSettings> = {}, timing: Partial<OidcTiming> = {}): OidcVerifier {
    const created = new OidcVerifier({ issuer: issuer.issuer, audiences: [TEST_AUDIENCE], ...settings }, logger, { ...DEFAULT_OIDC_TIMING, ...timing });
    verifiers.push(created);
    return created;
  }
  async function rejection(promise: Promise<unknown>): Promise<unknown> {
    try {
      await promise;
    } catch (error) {
      return error;
    }
    throw new Error('the token was accepted');
  }

  it('finds the keys through the discovery document and returns the verified claims', async () => {
    const claims = await verifier().verify(await issuer.sign('someone', { claims: { email: 'a@b.c' } }));
    expect(claims).to.include({ sub: 'someone', email: 'a@b.c', iss: issuer.issuer });
    expect(issuer.requests.map((request) => request.path)).to.deep.equal(['/.well-known/openid-configuration', '/keys']);
  });

  it('answers BACKEND_UNAVAILABLE (503) when the issuer refuses connections or does not answer in time', async () => {
    const token = await issuer.sign('someone');
    for (const [settings, timing] of [
      [{ issuer: 'http://127.0.0.1:1' }, {}],
      [{ jwksUri: 'http://127.0.0.1:1/keys' }, {}],
      [{}, { fetchTimeoutMs: 1 }],
    ] as const) {
      if ('fetchTimeoutMs' in timing) issuer.delayMs = 200;
      const error = await rejection(verifier(settings, timing).verify(token));
      issuer.delayMs = 0;
      expect(error, JSON.stringify(settings)).to.be.instanceOf(ApiError);
      expect((error as ApiError).code, JSON.stringify(settings)).to.equal('BACKEND_UNAVAILABLE');
    }
  });

  it('uses AUTH_OIDC_JWKS_URI without asking for discovery', async () => {
    await verifier({ jwksUri: issuer.jwksUri }).verify(await issuer.sign('someone'));
    expect(issuer.requests.map((request) => request.path)).to.deep.equal(['/keys']);
  });

  it('refuses a discovery document for another issuer (503: no token can be checked)', async () => {
    issuer.advertisedIssuer = 'https://impostor.example';
    const error = await rejection(verifier().verify(await issuer.sign('someone')));
    expect(error).to.be.instanceOf(ApiError);
    expect((error as ApiError).code).to.equal('BACKEND_UNAVAILABLE');
    expect(((error as ApiError).cause as Error).message).to.contain('is for issuer "https://impostor.example"');
  });

  it('sends the token file as a bearer credential with every fetch, read anew each time', async () => {
    const tokenFile = join(files.path, 'token');
    writeFileSync(tokenFile, 'first-token\n');
    const checker = verifier({ jwksTokenFile: tokenFile }, { cooldownMs: 0 });
    await checker.verify(await issuer.sign('someone'));
    writeFileSync(tokenFile, 'rotated-token\n');
    const kid = await issuer.rotate();
    await checker.verify(await issuer.sign('someone', { kid }));
    expect(issuer.requests.map((request) => request.authorization)).to.deep.equal(['Bearer first-token', 'Bearer first-token', 'Bearer rotated-token']);
  });

  it('drops keys the issuer retired at the next background refresh, and keeps its keys while the issuer is down', async () => {
    const checker = verifier({}, { refreshMs: 50, retryAfterFailureMs: 50 });
    const ecToken = await issuer.sign('someone', { alg: 'ES256' });
    const rsaToken = await issuer.sign('someone', { alg: 'RS256' });
    await checker.verify(ecToken);

    issuer.failWith = 503;
    await eventually(() => Promise.resolve(logs.some((line) => line['msg']?.toString().startsWith('cannot refresh'))), 2000, 'a failed refresh');
    await checker.verify(rsaToken);

    issuer.failWith = undefined;
    issuer.retire('ec-1');
    const refused = async () => {
      try {
        await checker.verify(ecToken);
        return false;
      } catch (error) {
        return error instanceof AuthenticationError;
      }
    };
    await eventually(refused, 2000, 'the retired key is dropped');
    await checker.verify(rsaToken);
  });

  it('remembers a verified token only until its exp', async () => {
    const checker = verifier({}, { clockToleranceSeconds: 0 });
    const token = await issuer.sign('someone', { claims: { exp: Math.floor(Date.now() / 1000) + 2 } });
    await checker.verify(token);
    expect((await checker.verify(token)).sub).to.equal('someone');
    await new Promise((resolve) => setTimeout(resolve, 2100));
    const error = await rejection(checker.verify(token));
    expect(error).to.be.instanceOf(AuthenticationError);
    expect((error as AuthenticationError).detail).to.equal('The token has expired or is not valid yet.');
  });

  it('warms up: fetches the keys at start and logs the outcome', async () => {
    await verifier().warmUp();
    expect(logs.at(-1)).to.include({ msg: 'fetched the OIDC signing keys', keys: 2 });
    issuer.failWith = 500;
    await verifier().warmUp();
    expect(logs.at(-1)?.['msg']).to.match(/^cannot fetch the OIDC signing keys yet/);
  });
});
