/**
 * Measures what authentication costs per request, in this process: authenticate() calls per
 * second for each mode, against AUTH_MODE none in the same run. Tokens are real (RS256 and
 * ES256 from a local issuer over HTTP); the keys are fetched once, before timing. "new": each
 * call brings a token never seen (signature checked); "reused": the same token every call, as
 * a caller sends it until it nears expiry (remembered after the first check).
 *
 *   node scripts/bench-auth.ts            (Node 24: PATH=node_modules/.bin:$PATH)
 *
 * Prints calls/s, microseconds per call and the ratio to none. Machines here are noisy:
 * compare the ratios and the microseconds, not the absolute rates across runs.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pino } from 'pino';
import { type Authenticator, type Credential, NO_AUTHENTICATION, openAuthenticator } from '../src/auth/authenticator.ts';
import { keysFile, newApiKey, tempDirectory } from '../test/support/access-files.ts';
import { TEST_AUDIENCE, TestIssuer } from '../test/support/test-issuer.ts';

const DURATION_MS = 2000;
const logger = pino({ level: 'silent' });

/** Calls per second for one credential over and over, or for each of a list once (tokens never seen before). */
async function rate(authenticator: Authenticator, credential: Credential | undefined | Credential[]): Promise<number> {
  if (Array.isArray(credential)) {
    await authenticator.authenticate(credential[0]);
    const start = performance.now();
    for (const each of credential.slice(1)) await authenticator.authenticate(each);
    return (credential.length - 1) / ((performance.now() - start) / 1000);
  }
  // Warm up (JIT, key import), then count calls for DURATION_MS.
  for (let i = 0; i < 200; i += 1) await authenticator.authenticate(credential);
  let calls = 0;
  const end = performance.now() + DURATION_MS;
  while (performance.now() < end) {
    for (let i = 0; i < 50; i += 1) await authenticator.authenticate(credential);
    calls += 50;
  }
  return calls / (DURATION_MS / 1000);
}

const fresh = async (alg: 'RS256' | 'ES256', count: number): Promise<Credential[]> =>
  Promise.all(Array.from({ length: count }, async (_, i) => ({ via: 'bearer' as const, value: await issuer.sign('bench', { alg, claims: { jti: String(i) } }) })));

const directory = tempDirectory();
const issuer = await TestIssuer.start();
try {
  const keysOf = (count: number) => Array.from({ length: count }, (_, i) => ({ name: `svc-${i}`, key: newApiKey(), role: 'reader', instances: ['*'] }));
  const keys = keysOf(1000);
  writeFileSync(join(directory.path, 'keys-10.json'), keysFile(keys.slice(0, 10)));
  writeFileSync(join(directory.path, 'keys-1000.json'), keysFile(keys));
  writeFileSync(join(directory.path, 'grants.json'), JSON.stringify({ grants: [{ subject: 'bench', role: 'reader', instances: ['*'] }] }));
  const oidc = { issuer: issuer.issuer, audiences: [TEST_AUDIENCE], grantsFile: join(directory.path, 'grants.json') };
  const open = (config: Parameters<typeof openAuthenticator>[0]) => openAuthenticator(config, { logger, stores: { default: { name: 'bigtable' }, all: [{ name: 'bigtable', instances: ['inst-a'] }] } });

  const cases: Array<[string, Authenticator, Credential | undefined | Credential[]]> = [
    ['none', NO_AUTHENTICATION, undefined],
    ['apikey, 10 keys', open({ modes: ['apikey'], protectDocs: false, apiKeysFile: join(directory.path, 'keys-10.json') }), { via: 'apiKey', value: keys[9]?.key ?? '' }],
    ['apikey, 1000 keys', open({ modes: ['apikey'], protectDocs: false, apiKeysFile: join(directory.path, 'keys-1000.json') }), { via: 'apiKey', value: keys[999]?.key ?? '' }],
    ['oidc, RS256 new', open({ modes: ['oidc'], protectDocs: false, oidc }), await fresh('RS256', 500)],
    ['oidc, ES256 new', open({ modes: ['oidc'], protectDocs: false, oidc }), await fresh('ES256', 500)],
    ['oidc, RS256 reused', open({ modes: ['oidc'], protectDocs: false, oidc }), { via: 'bearer', value: await issuer.sign('bench', { alg: 'RS256' }) }],
    ['oidc, ES256 reused', open({ modes: ['oidc'], protectDocs: false, oidc }), { via: 'bearer', value: await issuer.sign('bench', { alg: 'ES256' }) }],
  ];
  let baseline = 0;
  console.log('mode                 calls/s     µs/call   ratio to none');
  for (const [name, authenticator, credential] of cases) {
    const perSecond = await rate(authenticator, credential);
    baseline ||= perSecond;
    console.log(`${name.padEnd(18)} ${perSecond.toFixed(0).padStart(10)} ${(1e6 / perSecond).toFixed(1).padStart(11)} ${(perSecond / baseline).toFixed(4).padStart(15)}`);
    authenticator.close();
  }
} finally {
  await issuer.close();
  directory.remove();
}
