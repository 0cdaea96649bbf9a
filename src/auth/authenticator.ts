import type { Logger } from 'pino';
import type { AuthConfig, AuthMode, OidcConfig } from '../config.ts';
import { ANONYMOUS, type Caller, type ServedStores } from './access.ts';
import { type ApiKeyEntry, type SubjectGrant, parseApiKeysFile, parseGrantsFile, unservedScopes } from './access-files.ts';
import { findApiKeyHolder } from './api-keys.ts';
import { AuthenticationError, NOT_ACCEPTED } from './errors.ts';
import { DEFAULT_OIDC_TIMING, OidcVerifier, type OidcTiming } from './oidc.ts';
import { type FileCheckOutcome, ReloadingFile } from './reloading-file.ts';

/** A credential as the request carried it. */
export interface Credential {
  /** `bearer`: from `Authorization: Bearer`; `apiKey`: from `X-API-Key`. */
  readonly via: 'bearer' | 'apiKey';
  readonly value: string;
}

/**
 * CheckGate runs a credential check that costs real work (a token's signature), or refuses to:
 * the caller bounds how many run at once. Cheap checks (an API key, a token seen before) do not
 * pass through it.
 */
export type CheckGate = <T>(check: () => Promise<T>) => Promise<T>;

export interface AuthenticateCallOptions {
  /** Where expensive checks run; without it they run at once. */
  readonly gate?: CheckGate;
}

/**
 * Authenticator turns a request's credential into the Caller it proves. One per process; it
 * owns the timers that reload the access files and refresh the signing keys.
 */
export interface Authenticator {
  /** The modes on; empty with AUTH_MODE none. */
  readonly modes: readonly AuthMode[];
  /**
   * Resolves to the caller, or rejects with an AuthenticationError (401), or with
   * BACKEND_UNAVAILABLE (503) when the token issuer's keys cannot be had.
   */
  authenticate(credential: Credential | undefined, options?: AuthenticateCallOptions): Promise<Caller>;
  /** Fetches what checking needs (the OIDC keys) now rather than on the first request, logging how it went. Never rejects. */
  warmUp(): Promise<void>;
  /** Stops the background work (file reloads, key refreshes). */
  close(): void;
}

export interface AuthenticatorOptions {
  readonly logger: Logger;
  /** The served stores and instances, to warn about grants naming others. */
  readonly stores: ServedStores;
  /** How often the keys and grants files are read again for changes. */
  readonly reloadIntervalMs?: number;
  /** Told what each read of the keys or grants file found, by its variable (for the metrics). */
  readonly onFileCheck?: (variable: string, outcome: FileCheckOutcome) => void;
  readonly oidcTiming?: OidcTiming;
}

/** Kubernetes takes a minute or more to update a mounted Secret; a few seconds more add nothing. */
const DEFAULT_RELOAD_INTERVAL_MS = 2000;
// A compact JWS: three base64url parts. API keys never contain dots in practice.
const JWT_SHAPE = /^[\w-]+\.[\w-]+\.[\w-]*$/;

/** With AUTH_MODE none: every request is the admin ANONYMOUS, whatever it sends. */
export const NO_AUTHENTICATION: Authenticator = Object.freeze({
  modes: Object.freeze([]),
  authenticate: () => Promise.resolve(ANONYMOUS),
  warmUp: () => Promise.resolve(),
  close: () => {},
});

/**
 * openAuthenticator builds the authenticator for the configured modes, reading the keys and
 * grants files now: an unreadable or invalid file throws a ConfigError.
 */
export function openAuthenticator(config: AuthConfig, options: AuthenticatorOptions): Authenticator {
  if (config.modes.length === 0) return NO_AUTHENTICATION;
  const { logger, stores } = options;
  const intervalMs = options.reloadIntervalMs ?? DEFAULT_RELOAD_INTERVAL_MS;
  const warnUnserved = (variable: string) => (grants: ReadonlyArray<{ grant: ApiKeyEntry['grant'] }>) => {
    const unserved = unservedScopes(
      grants.map((entry) => entry.grant),
      stores,
    );
    if (unserved.length > 0) logger.warn({ file: variable, instances: unserved }, `${variable} names stores or instances this service does not serve`);
  };

  const fileChecks = (variable: string) => {
    const report = options.onFileCheck;
    return report === undefined ? {} : { onCheck: (outcome: FileCheckOutcome) => report(variable, outcome) };
  };

  let apiKeys: ReloadingFile<ApiKeyEntry[]> | undefined;
  let grants: ReloadingFile<SubjectGrant[]> | undefined;
  let verifier: OidcVerifier | undefined;
  try {
    if (config.apiKeysFile !== undefined) {
      apiKeys = ReloadingFile.open({
        variable: 'AUTH_API_KEYS_FILE',
        path: config.apiKeysFile,
        parse: parseApiKeysFile,
        intervalMs,
        logger,
        onLoad: warnUnserved('AUTH_API_KEYS_FILE'),
        summarize: (keys) => ({ keys: keys.length }),
        ...fileChecks('AUTH_API_KEYS_FILE'),
      });
    }
    if (config.oidc !== undefined) {
      grants = ReloadingFile.open({
        variable: 'AUTH_OIDC_GRANTS_FILE',
        path: config.oidc.grantsFile,
        parse: parseGrantsFile,
        intervalMs,
        logger,
        onLoad: warnUnserved('AUTH_OIDC_GRANTS_FILE'),
        summarize: (entries) => ({ grants: entries.length }),
        ...fileChecks('AUTH_OIDC_GRANTS_FILE'),
      });
      verifier = new OidcVerifier(oidcSettings(config.oidc), logger, options.oidcTiming ?? DEFAULT_OIDC_TIMING);
    }
  } catch (error) {
    apiKeys?.close();
    grants?.close();
    throw error;
  }

  const missingCredential = missingDetail(config.modes);
  return {
    modes: config.modes,
    async authenticate(credential, callOptions = {}) {
      if (credential === undefined) throw new AuthenticationError(missingCredential, { reason: 'no credential' });
      if (credential.via === 'apiKey' && apiKeys === undefined) {
        throw new AuthenticationError('API keys are not accepted here; send a bearer token.', {
          challenge: 'invalid_request',
          reason: 'X-API-Key without AUTH_MODE apikey',
        });
      }
      if (apiKeys !== undefined) {
        const holder = findApiKeyHolder(apiKeys.value, credential.value);
        if (holder !== undefined) return holder;
        if (credential.via === 'apiKey' || verifier === undefined || !JWT_SHAPE.test(credential.value)) {
          throw new AuthenticationError(NOT_ACCEPTED, { challenge: 'invalid_token', reason: 'unknown api key' });
        }
      }
      if (verifier === undefined || grants === undefined) throw new Error('no way to check the credential');
      return tokenCaller(await verifier.verify(credential.value, callOptions.gate), grants.value);
    },
    async warmUp() {
      await verifier?.warmUp();
    },
    close() {
      apiKeys?.close();
      grants?.close();
      verifier?.close();
    },
  };
}

function oidcSettings(config: OidcConfig) {
  return {
    issuer: config.issuer,
    audiences: config.audiences,
    ...(config.jwksUri === undefined ? {} : { jwksUri: config.jwksUri }),
    ...(config.jwksTokenFile === undefined ? {} : { jwksTokenFile: config.jwksTokenFile }),
  };
}

/**
 * The caller a verified token stands for: its grants are those for its `sub`, and those for its
 * `email` when the issuer says the email is verified. A valid token without grants is still a
 * known caller (403, not 401): it proved who it is, it may just do nothing.
 */
function tokenCaller(claims: { sub?: string; exp?: number; email?: unknown; email_verified?: unknown }, entries: readonly SubjectGrant[]): Caller {
  const subject = claims.sub ?? '';
  const email = typeof claims.email === 'string' && claims.email_verified === true ? claims.email.toLowerCase() : undefined;
  const bySubject = entries.filter((entry) => 'subject' in entry && entry.subject === subject);
  const byEmail = email === undefined ? [] : entries.filter((entry) => 'email' in entry && entry.email === email);
  const name = bySubject.length === 0 && email !== undefined && byEmail.length > 0 ? email : subject;
  return {
    name: `oidc:${name}`,
    grants: [...bySubject, ...byEmail].map((entry) => entry.grant),
    ...(claims.exp === undefined ? {} : { expiresAtMs: claims.exp * 1000 }),
  };
}

function missingDetail(modes: readonly AuthMode[]): string {
  const ways = [
    ...(modes.includes('apikey') ? ['an API key (`X-API-Key: <key>` or `Authorization: Bearer <key>`)'] : []),
    ...(modes.includes('oidc') ? ['a token (`Authorization: Bearer <JWT>`)'] : []),
  ];
  return `This endpoint needs a credential: ${ways.join(' or ')}.`;
}
