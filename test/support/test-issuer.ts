import { type IncomingMessage, type Server, type ServerResponse, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { type CryptoKey, type JWK, SignJWT, base64url, exportJWK, generateKeyPair } from 'jose';

export type SigningAlgorithm = 'RS256' | 'ES256';

interface SigningKey {
  readonly kid: string;
  readonly alg: SigningAlgorithm;
  readonly privateKey: CryptoKey;
  readonly publicJwk: JWK;
}

export interface SignOptions {
  /** Default RS256. */
  readonly alg?: SigningAlgorithm;
  /** Sign with this key id of the issuer (default: its first key of the algorithm). */
  readonly kid?: string;
  /** Sign with a key the issuer does not publish, under this kid. */
  readonly strangerKid?: string;
  /** Claims to set or override; `undefined` removes a default claim. */
  readonly claims?: Record<string, unknown>;
}

/** The default audience tokens are minted for. */
export const TEST_AUDIENCE = 'kvcrud-test';

/**
 * TestIssuer is a real OpenID provider for the tests: locally generated RS256 and ES256 keys,
 * served as a JWKS with a discovery document over HTTP on a free port, signing real tokens.
 * It counts JWKS fetches, can rotate in a new key, and can be made to fail.
 */
export class TestIssuer {
  readonly issuer: string;
  readonly jwksUri: string;
  readonly #server: Server;
  readonly #keys: SigningKey[];
  #jwksFetches = 0;
  /** Every request received: path and the Authorization header it carried. */
  readonly requests: Array<{ path: string; authorization: string | undefined }> = [];
  /** When set, discovery and JWKS requests answer this status instead. */
  failWith: number | undefined;
  /** How long to wait before answering. */
  delayMs = 0;
  /** When set, the discovery document names this issuer instead of the real one. */
  advertisedIssuer: string | undefined;

  private constructor(server: Server, keys: SigningKey[]) {
    this.#server = server;
    this.#keys = keys;
    const { port } = server.address() as AddressInfo;
    this.issuer = `http://127.0.0.1:${port}`;
    this.jwksUri = `${this.issuer}/keys`;
  }

  static async start(): Promise<TestIssuer> {
    const keys = [await makeKey('RS256', 'rsa-1'), await makeKey('ES256', 'ec-1')];
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const issuer = new TestIssuer(server, keys);
    server.on('request', (request: IncomingMessage, response: ServerResponse) => {
      issuer.requests.push({ path: request.url ?? '', authorization: request.headers.authorization });
      setTimeout(() => issuer.answer(request.url ?? '', response), issuer.delayMs);
    });
    return issuer;
  }

  /** How many times the JWKS was fetched. */
  get jwksFetches(): number {
    return this.#jwksFetches;
  }

  /** Publishes a new key (as an issuer does before it starts signing with it) and returns its kid. */
  async rotate(alg: SigningAlgorithm = 'RS256'): Promise<string> {
    const key = await makeKey(alg, `${alg === 'RS256' ? 'rsa' : 'ec'}-${this.#keys.length + 1}`);
    this.#keys.push(key);
    return key.kid;
  }

  /** Stops publishing a key. */
  retire(kid: string): void {
    const index = this.#keys.findIndex((key) => key.kid === kid);
    if (index >= 0) this.#keys.splice(index, 1);
  }

  /** A signed token for `subject`, valid for five minutes, for TEST_AUDIENCE, from this issuer. */
  async sign(subject: string, options: SignOptions = {}): Promise<string> {
    const alg = options.alg ?? 'RS256';
    const now = Math.floor(Date.now() / 1000);
    const defaults: Record<string, unknown> = { iss: this.issuer, aud: TEST_AUDIENCE, sub: subject, iat: now, exp: now + 300 };
    const claims = Object.fromEntries(Object.entries({ ...defaults, ...options.claims }).filter(([, value]) => value !== undefined));
    let key: { kid: string; privateKey: CryptoKey };
    if (options.strangerKid === undefined) {
      const found = this.#keys.find((candidate) => (options.kid === undefined ? candidate.alg === alg : candidate.kid === options.kid));
      if (found === undefined) throw new Error(`no ${alg} key ${options.kid ?? ''}`);
      key = found;
    } else {
      key = { kid: options.strangerKid, privateKey: (await generateKeyPair(alg)).privateKey };
    }
    return new SignJWT(claims).setProtectedHeader({ alg, kid: key.kid, typ: 'JWT' }).sign(key.privateKey);
  }

  close(): Promise<void> {
    this.#server.closeAllConnections();
    return new Promise((resolve) => this.#server.close(() => resolve()));
  }

  answer(url: string, response: ServerResponse): void {
    if (this.failWith !== undefined) {
      response.writeHead(this.failWith).end();
      return;
    }
    if (url === '/.well-known/openid-configuration') {
      response.writeHead(200, { 'content-type': 'application/json' });
      response.end(JSON.stringify({ issuer: this.advertisedIssuer ?? this.issuer, jwks_uri: this.jwksUri, id_token_signing_alg_values_supported: ['RS256', 'ES256'] }));
      return;
    }
    if (url === '/keys') {
      this.#jwksFetches += 1;
      response.writeHead(200, { 'content-type': 'application/jwk-set+json' });
      response.end(JSON.stringify({ keys: this.#keys.map((key) => key.publicJwk) }));
      return;
    }
    response.writeHead(404).end();
  }
}

async function makeKey(alg: SigningAlgorithm, kid: string): Promise<SigningKey> {
  const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true });
  return { kid, alg, privateKey, publicJwk: { ...(await exportJWK(publicKey)), kid, alg, use: 'sig' } };
}

/** An unsigned token (`alg: none`) with the claims, as an attacker would send it. */
export function unsignedToken(claims: Record<string, unknown>): string {
  const encode = (value: object) => base64url.encode(JSON.stringify(value));
  return `${encode({ alg: 'none', typ: 'JWT' })}.${encode(claims)}.`;
}
