import { readFile } from 'node:fs/promises';
import {
  type FetchImplementation,
  type JWTPayload,
  type JWTVerifyGetKey,
  type RemoteJWKSet,
  createRemoteJWKSet,
  customFetch,
  errors,
  jwtVerify,
} from 'jose';
import type { Logger } from 'pino';
import { ApiError } from '../service/errors.ts';
import type { CheckGate } from './authenticator.ts';
import { AuthenticationError, NOT_ACCEPTED } from './errors.ts';
import { isTrustedUrl } from './trusted-url.ts';

/** The signature algorithms accepted: Kubernetes service-account tokens and Google ID tokens use RS256. */
export const ACCEPTED_ALGORITHMS = ['RS256', 'ES256'];

export interface OidcSettings {
  /** The `iss` tokens must have; also where the discovery document is, unless jwksUri is given. */
  readonly issuer: string;
  /** Tokens must name one of these in `aud`. */
  readonly audiences: readonly string[];
  /** Where the signing keys are; otherwise the discovery document's `jwks_uri`. */
  readonly jwksUri?: string;
  /** A file whose content is sent as a bearer token when fetching discovery and keys (the Kubernetes API server asks for one). */
  readonly jwksTokenFile?: string;
}

export interface OidcTiming {
  /** Leeway on exp and nbf, for clocks that differ a little. */
  readonly clockToleranceSeconds: number;
  /** After fetching the keys, how long a token with an unknown `kid` cannot cause another fetch. */
  readonly cooldownMs: number;
  /** How often the keys are fetched again in the background, to drop keys the issuer retired. */
  readonly refreshMs: number;
  /** Deadline of one fetch of the discovery document or the keys. */
  readonly fetchTimeoutMs: number;
  /** After a failed fetch, how long requests fail at once instead of fetching again. */
  readonly retryAfterFailureMs: number;
}

export const DEFAULT_OIDC_TIMING: OidcTiming = Object.freeze({
  clockToleranceSeconds: 30,
  cooldownMs: 30_000,
  refreshMs: 10 * 60_000,
  fetchTimeoutMs: 5000,
  retryAfterFailureMs: 5000,
});

/**
 * How many verified tokens are remembered. Callers reuse a token until it nears expiry (an hour
 * for Kubernetes and Google), so a cluster's callers need a few dozen entries; the bound keeps
 * memory small (tokens are 1-2 KB) whatever the traffic.
 */
const VERIFIED_TOKENS_KEPT = 1000;

/** The issuer's discovery document or keys could not be had: no token can be checked, through no fault of the caller. */
class IssuerUnavailableError extends Error {
  constructor(message: string, cause?: unknown) {
    super(message, cause === undefined ? undefined : { cause });
    this.name = 'IssuerUnavailableError';
  }
}

/**
 * OidcVerifier checks JWT bearer tokens: signed (RS256 or ES256) by a key of the issuer's JWKS,
 * with the configured `iss` and one of the configured audiences, an `exp` not past and an `nbf`
 * not ahead (with a small clock tolerance), and a `sub`.
 *
 * Keys come from jose's remote JWKS, found through `${issuer}/.well-known/openid-configuration`
 * unless AUTH_OIDC_JWKS_URI names them. They are fetched on the first token, kept without expiry
 * (so an issuer outage does not lock everyone out), fetched again every `refreshMs` in the
 * background (so retired keys go), and on a token with an unknown `kid` once the cooldown since
 * the last fetch has passed (so a rotated key is picked up, and random kids cannot make the
 * service hammer the issuer). After a failed fetch no other is tried for `retryAfterFailureMs`.
 */
export class OidcVerifier {
  readonly #settings: OidcSettings;
  readonly #timing: OidcTiming;
  readonly #logger: Logger;
  readonly #refresh: NodeJS.Timeout;
  #jwks: Promise<RemoteJWKSet> | undefined;
  #quietUntil = 0;
  /** Tokens verified before, with their claims, until their exp (oldest first, for eviction). */
  readonly #verified = new Map<string, { readonly claims: JWTPayload; readonly untilMs: number }>();

  constructor(settings: OidcSettings, logger: Logger, timing: OidcTiming = DEFAULT_OIDC_TIMING) {
    this.#settings = settings;
    this.#timing = timing;
    this.#logger = logger;
    this.#refresh = setInterval(() => void this.#refreshKeys(), timing.refreshMs);
    this.#refresh.unref();
  }

  /**
   * Resolves to the verified claims of the token. Rejects with an AuthenticationError (401) for
   * a token that is not acceptable, or an ApiError BACKEND_UNAVAILABLE (503) when the issuer's
   * keys cannot be fetched.
   *
   * A token verified before is accepted again without checking its signature (the costly part of
   * a check: see docs/performance.md) until its exp, as jose would accept it; the remembered tokens are
   * forgotten whenever the keys are refreshed, so a retired key stops being trusted then.
   * A signature is checked within `gate`, which may refuse (the HTTP layer bounds such checks).
   */
  async verify(token: string, gate: CheckGate = (check) => check()): Promise<JWTPayload> {
    const known = this.#verified.get(token);
    if (known !== undefined) {
      if (Date.now() < known.untilMs) return known.claims;
      this.#verified.delete(token);
    }
    // Only this costs real work, so only this waits on the gate.
    return gate(async () => {
      try {
        const { payload } = await jwtVerify(token, this.#getKey, {
          issuer: this.#settings.issuer,
          audience: [...this.#settings.audiences],
          algorithms: ACCEPTED_ALGORITHMS,
          clockTolerance: this.#timing.clockToleranceSeconds,
          requiredClaims: ['exp', 'sub'],
        });
        this.#remember(token, payload);
        return payload;
      } catch (error) {
        throw this.#classify(error);
      }
    });
  }

  /** Fetches the discovery document (if needed) and the keys now, logging the outcome; for start-up. */
  async warmUp(): Promise<void> {
    try {
      const jwks = await this.#keySet();
      await jwks.reload();
      this.#logger.info({ issuer: this.#settings.issuer, keys: jwks.jwks()?.keys.length ?? 0 }, 'fetched the OIDC signing keys');
    } catch (error) {
      this.#logger.error({ err: error, issuer: this.#settings.issuer }, 'cannot fetch the OIDC signing keys yet; tokens are refused with 503 until they can be');
    }
  }

  /** Stops the background refresh. */
  close(): void {
    clearInterval(this.#refresh);
  }

  readonly #getKey: JWTVerifyGetKey = async (header, token) => {
    try {
      const jwks = await this.#keySet();
      return await jwks(header, token);
    } catch (error) {
      // A kid the issuer does not have is the token's problem; anything else is the issuer's.
      if (error instanceof errors.JWKSNoMatchingKey || error instanceof errors.JWKSMultipleMatchingKeys) throw error;
      throw error instanceof IssuerUnavailableError ? error : new IssuerUnavailableError('cannot fetch the signing keys', error);
    }
  };

  /** The remote key set, once its URI is known. Concurrent first calls share one discovery. */
  #keySet(): Promise<RemoteJWKSet> {
    this.#jwks ??= this.#jwksUri().then(
      (uri) =>
        createRemoteJWKSet(uri, {
          cooldownDuration: this.#timing.cooldownMs,
          cacheMaxAge: Infinity,
          timeoutDuration: this.#timing.fetchTimeoutMs,
          [customFetch]: this.#fetch,
        }),
      (error: unknown) => {
        this.#jwks = undefined;
        throw error;
      },
    );
    return this.#jwks;
  }

  async #jwksUri(): Promise<URL> {
    if (this.#settings.jwksUri !== undefined) return new URL(this.#settings.jwksUri);
    const issuer = this.#settings.issuer;
    const url = `${issuer.replace(/\/+$/, '')}/.well-known/openid-configuration`;
    const response = await this.#fetch(url, {
      method: 'GET',
      headers: new Headers({ accept: 'application/json' }),
      redirect: 'manual',
      signal: AbortSignal.timeout(this.#timing.fetchTimeoutMs),
    });
    if (response.status !== 200) throw new IssuerUnavailableError(`${url} answered ${response.status}`);
    let document: { issuer?: unknown; jwks_uri?: unknown };
    try {
      document = (await response.json()) as typeof document;
    } catch (error) {
      throw new IssuerUnavailableError(`${url} is not JSON`, error);
    }
    // OpenID Connect Discovery 1.0 §4.3: the document must be for the issuer it was fetched from.
    if (document.issuer !== issuer) {
      throw new IssuerUnavailableError(`${url} is for issuer ${JSON.stringify(document.issuer)}, not ${JSON.stringify(issuer)}`);
    }
    if (typeof document.jwks_uri !== 'string' || !URL.canParse(document.jwks_uri)) {
      throw new IssuerUnavailableError(`${url} has no valid jwks_uri`);
    }
    const jwksUri = new URL(document.jwks_uri);
    if (!isTrustedUrl(jwksUri)) throw new IssuerUnavailableError(`${url} names a jwks_uri that is not https: ${jwksUri.href}`);
    this.#logger.info({ issuer, jwksUri: jwksUri.href }, 'discovered the OIDC signing keys');
    return jwksUri;
  }

  /** fetch for discovery and keys: adds the bearer token file's content, and stays quiet for a while after a failure. */
  readonly #fetch: FetchImplementation = async (url, options) => {
    if (Date.now() < this.#quietUntil) throw new IssuerUnavailableError('the last fetch from the issuer failed moments ago');
    try {
      const headers = new Headers(options.headers);
      if (this.#settings.jwksTokenFile !== undefined) {
        const token = (await readFile(this.#settings.jwksTokenFile, 'utf8')).trim();
        headers.set('authorization', `Bearer ${token}`);
      }
      const response = await fetch(url, { ...options, headers });
      if (response.status !== 200) this.#quietUntil = Date.now() + this.#timing.retryAfterFailureMs;
      return response;
    } catch (error) {
      this.#quietUntil = Date.now() + this.#timing.retryAfterFailureMs;
      throw error;
    }
  };

  #remember(token: string, claims: JWTPayload): void {
    if (this.#verified.size >= VERIFIED_TOKENS_KEPT) {
      const oldest = this.#verified.keys().next().value;
      if (oldest !== undefined) this.#verified.delete(oldest);
    }
    // requiredClaims made exp present; jose accepted the token until exp plus the tolerance.
    const untilMs = ((claims.exp ?? 0) + this.#timing.clockToleranceSeconds) * 1000;
    this.#verified.set(token, { claims, untilMs });
  }

  async #refreshKeys(): Promise<void> {
    if (this.#jwks === undefined) return;
    try {
      await (await this.#jwks).reload();
      this.#verified.clear();
    } catch (error) {
      this.#logger.warn({ err: error, issuer: this.#settings.issuer }, 'cannot refresh the OIDC signing keys; the ones fetched before stay in use');
    }
  }

  #classify(error: unknown): unknown {
    if (error instanceof IssuerUnavailableError) {
      return new ApiError('BACKEND_UNAVAILABLE', "The token cannot be checked now: the issuer's signing keys are unavailable.", {}, error);
    }
    if (error instanceof errors.JWTExpired || (error instanceof errors.JWTClaimValidationFailed && error.claim === 'nbf')) {
      return new AuthenticationError('The token has expired or is not valid yet.', { challenge: 'invalid_token', reason: `jwt ${error.claim} check failed`, cause: error });
    }
    if (error instanceof errors.JOSEError) {
      return new AuthenticationError(NOT_ACCEPTED, { challenge: 'invalid_token', reason: `jwt rejected: ${error.code}: ${error.message}`, cause: error });
    }
    return error;
  }
}
