import Joi from 'joi';
import { isTrustedUrl } from './auth/trusted-url.ts';
import { isTrustedProxy } from './http/admission/client-address.ts';
import { STORE_VARIABLES, type StoresConfig, loadStores } from './store/stores-config.ts';

/** The service's whole configuration, built once from the environment by loadConfig. */
export interface Config {
  readonly port: number;
  readonly maxBodyBytes: number;
  /** Deadline for one data store call, counted from when the service starts it. */
  readonly storeTimeoutMs: number;
  /** Most requests handled at once; past it a request is refused with 503 OVERLOADED. */
  readonly maxInflight: number;
  /**
   * Most requests one caller has handled at once while the service is near MAX_INFLIGHT
   * (perCallerBoundFrom); past it the caller gets 429 RATE_LIMITED. Below that, no bound per caller.
   */
  readonly maxInflightPerCaller: number;
  /**
   * The proxies whose `X-Forwarded-For` names the client (TRUSTED_PROXIES): addresses, CIDR ranges,
   * or `loopback`, `linklocal`, `uniquelocal`. Empty: the header is ignored, and a caller is told
   * apart by the socket's address.
   */
  readonly trustedProxies: readonly string[];
  /** Most change feeds open at once (FEEDS_MAX); past it 503 OVERLOADED. */
  readonly feedsMax?: number;
  /** Most change feeds one caller has open at once (FEEDS_MAX_PER_CALLER); past it 429 RATE_LIMITED. */
  readonly feedsMaxPerCaller?: number;
  /** Most new credentials (tokens not seen before) checked at once; past it 503 OVERLOADED. */
  readonly maxInflightUnauthenticated: number;
  /** Least rate a request body must arrive at after a grace second, or 0; slower: 408 REQUEST_TIMEOUT. */
  readonly minBodyBytesPerSecond: number;
  /** Requests per second per caller (token bucket), or undefined for no rate limit. */
  readonly rateLimitPerSecond: number | undefined;
  /**
   * The instances of the default store, which v1 serves: `{instanceID}` in a v1 path must be one
   * of them.
   */
  readonly instanceIds: readonly string[];
  /** Every store the process serves, and the default one. */
  readonly stores: StoresConfig;
  /** On SIGTERM, how long in-flight requests may run before their connections are cut. */
  readonly shutdownTimeoutMs: number;
  readonly auth: AuthConfig;
  /** Least severe level written to the log (pino's levels, or "silent"). */
  readonly logLevel: LogLevel;
  /** Port of a separate listener for /metrics; unset: /metrics is served on `port`. */
  readonly metricsPort?: number;
  /**
   * How many versions of each column a family created through v1 keeps (v1 reads only the
   * latest), or 0 for every version.
   */
  readonly v1MaxVersions: number;
}

/**
 * V1_MAX_VERSIONS by default. v1 reads only the latest version, so older ones only cost disk (and,
 * on a store that reads by walking versions, time); a table rewritten 140 times per row grew
 * without bound, where one version per column keeps it at the size of its live data.
 */
export const DEFAULT_V1_MAX_VERSIONS = 1;

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/** A way callers may prove who they are (AUTH_MODE). */
export type AuthMode = 'apikey' | 'oidc';

export interface AuthConfig {
  /** The ways callers may authenticate, any of which is accepted; empty for AUTH_MODE none, where every caller is admin. */
  readonly modes: readonly AuthMode[];
  /** With apikey: the JSON file of key digests, roles and instances. */
  readonly apiKeysFile?: string;
  /** With oidc. */
  readonly oidc?: OidcConfig;
  /** Whether the explorer and the OpenAPI document need a credential too. */
  readonly protectDocs: boolean;
}

export interface OidcConfig {
  readonly issuer: string;
  readonly audiences: readonly string[];
  readonly jwksUri?: string;
  /** A file whose content is sent as a bearer token when fetching discovery and keys. */
  readonly jwksTokenFile?: string;
  /** The JSON file of grants to token subjects or emails. */
  readonly grantsFile: string;
}

/** ConfigError names the environment variable that is wrong and what is wrong with it. */
export class ConfigError extends Error {
  readonly problems: readonly string[];

  constructor(problems: readonly string[]) {
    super(`invalid configuration: ${problems.join('; ')}`);
    this.name = 'ConfigError';
    this.problems = problems;
  }
}

const MIB = 1024 * 1024;

/**
 * FEEDS_MAX and FEEDS_MAX_PER_CALLER when not set. An open feed holds a connection and a bounded
 * buffer (about 64 KiB) and no request slot: a thousand fit in a pod's memory many times over.
 */
export const DEFAULT_FEEDS_MAX = 1000;
export const DEFAULT_FEEDS_MAX_PER_CALLER = 100;

/** MAX_INFLIGHT_PER_CALLER when not set: half of MAX_INFLIGHT (at least 1). */
export function defaultInflightPerCaller(maxInflight: number): number {
  return Math.max(1, Math.ceil(maxInflight / 2));
}

/**
 * How many requests in flight in all make the service "near its limit", from which
 * MAX_INFLIGHT_PER_CALLER applies: all but an eighth of MAX_INFLIGHT (224 of 256). Below it, one
 * caller may have as many requests as the service has room for; from it on, a caller over its
 * share is refused, so the last eighth is always left to callers within theirs.
 */
export function perCallerBoundFrom(maxInflight: number): number {
  return maxInflight - Math.ceil(maxInflight / 8);
}
/**
 * MAX_INFLIGHT_UNAUTHENTICATED when not set. A first check of a token's signature is CPU work
 * (its cost: docs/performance.md); 16 at once keep both cores of a pod busy, and callers reusing
 * their token never wait on them.
 */
export const DEFAULT_INFLIGHT_UNAUTHENTICATED = 16;
/**
 * MIN_BODY_BYTES_PER_SECOND when not set: 16 KiB/s, a hundredth of a slow mobile link and far
 * below any caller in the same region; a body at that rate holds a slot for at most the 30 s
 * request timeout only if it is 480 KiB or more.
 */
export const DEFAULT_MIN_BODY_BYTES_PER_SECOND = 16 * 1024;

const AUTH_MODES = ['none', 'apikey', 'oidc'];

function authModeList(value: string, helpers: Joi.CustomHelpers): AuthMode[] | Joi.ErrorReport {
  const modes = value.split(',').map((mode) => mode.trim());
  const unknown = modes.find((mode) => !AUTH_MODES.includes(mode));
  if (unknown !== undefined) {
    return helpers.message({ custom: `{{#label}} entry "${unknown}" is not one of ${AUTH_MODES.join(', ')}` });
  }
  if (new Set(modes).size !== modes.length) return helpers.message({ custom: '{{#label}} lists a mode more than once' });
  if (modes.includes('none') && modes.length > 1) return helpers.message({ custom: '{{#label}} cannot combine none with other modes' });
  return modes.filter((mode) => mode !== 'none') as AuthMode[];
}

function trustedProxyList(value: string, helpers: Joi.CustomHelpers): string[] | Joi.ErrorReport {
  const entries = value.split(',').map((entry) => entry.trim());
  if (entries.includes('')) return helpers.message({ custom: '{{#label}} has an empty entry' });
  const invalid = entries.find((entry) => !isTrustedProxy(entry));
  return invalid === undefined
    ? entries
    : helpers.message({ custom: `{{#label}} entry "${invalid}" is not an IP address, a CIDR range, or one of loopback, linklocal, uniquelocal` });
}

// Signing keys fetched over plain HTTP could be replaced on the way: https, or http to localhost.
const trustedUrl = Joi.string()
  .trim()
  .custom((value: string, helpers) =>
    URL.canParse(value) && isTrustedUrl(new URL(value))
      ? value
      : helpers.message({ custom: '{{#label}} must be an https URL (or http to localhost), got "{{#value}}"' }),
  );

const envSchema = Joi.object({
  PORT: Joi.number().integer().min(0).max(65535).default(8080),
  MAX_BODY_BYTES: Joi.number().integer().min(1024).max(512 * MIB).default(10 * MIB),
  STORE_TIMEOUT_MS: Joi.number().integer().min(1).max(600_000).default(5000),
  MAX_INFLIGHT: Joi.number().integer().min(1).max(1_000_000).default(256),
  // Half of MAX_INFLIGHT by default: one caller may take half the slots, never all of them.
  MAX_INFLIGHT_PER_CALLER: Joi.number()
    .integer()
    .min(1)
    .max(Joi.ref('MAX_INFLIGHT'))
    .default((env: { MAX_INFLIGHT: number }) => defaultInflightPerCaller(env.MAX_INFLIGHT))
    .messages({ 'number.max': '{{#label}} must be at most MAX_INFLIGHT' }),
  MAX_INFLIGHT_UNAUTHENTICATED: Joi.number().integer().min(1).max(1_000_000).default(DEFAULT_INFLIGHT_UNAUTHENTICATED),
  FEEDS_MAX: Joi.number().integer().min(1).max(1_000_000).default(DEFAULT_FEEDS_MAX),
  FEEDS_MAX_PER_CALLER: Joi.number()
    .integer()
    .min(1)
    .max(Joi.ref('FEEDS_MAX'))
    .default(DEFAULT_FEEDS_MAX_PER_CALLER)
    .messages({ 'number.max': '{{#label}} must be at most FEEDS_MAX' }),
  MIN_BODY_BYTES_PER_SECOND: Joi.number().integer().min(0).max(1024 * MIB).default(DEFAULT_MIN_BODY_BYTES_PER_SECOND),
  RATE_LIMIT_PER_SECOND: Joi.number().integer().min(1).max(1_000_000),
  TRUSTED_PROXIES: Joi.string().trim().custom(trustedProxyList).default([]),
  V1_MAX_VERSIONS: Joi.number().integer().min(0).max(1000).default(DEFAULT_V1_MAX_VERSIONS),
  // The stores: STORES_FILE, or the v1 variables (DATA_STORE, INSTANCE_IDS, ...), which the
  // store drivers check (see loadStores).
  STORES_FILE: Joi.string().trim(),
  // Below Kubernetes' grace period (30 s by default; the chart derives its own from this).
  SHUTDOWN_TIMEOUT_MS: Joi.number().integer().min(0).max(600_000).default(25_000),
  AUTH_MODE: Joi.string().trim().custom(authModeList).default([]),
  AUTH_API_KEYS_FILE: Joi.string().trim(),
  AUTH_OIDC_ISSUER: trustedUrl,
  AUTH_OIDC_AUDIENCE: Joi.string()
    .trim()
    .custom((value: string) => value.split(',').map((audience) => audience.trim()))
    .custom((value: string[], helpers) =>
      value.includes('') ? helpers.message({ custom: '{{#label}} has an empty entry' }) : value,
    ),
  AUTH_OIDC_JWKS_URI: trustedUrl,
  AUTH_OIDC_JWKS_TOKEN_FILE: Joi.string().trim(),
  AUTH_OIDC_GRANTS_FILE: Joi.string().trim(),
  AUTH_PROTECT_DOCS: Joi.boolean().default(false),
  LOG_LEVEL: Joi.string().trim().lowercase().valid(...LOG_LEVELS).default('info'),
  METRICS_PORT: Joi.number()
    .integer()
    .min(0)
    .max(65535)
    // Port 0 picks a free port for each listener, so it may repeat.
    .when('PORT', { is: Joi.number().min(1), then: Joi.invalid(Joi.ref('PORT')) })
    .messages({ 'any.invalid': '{{#label}} must differ from PORT' }),
})
  .unknown(true)
  .prefs({ convert: true, abortEarly: false, errors: { wrap: { label: false } } });

/** The environment variables the service reads. */
export const CONFIG_VARIABLES: readonly string[] = [
  ...Object.keys((envSchema.describe() as { keys: Record<string, unknown> }).keys),
  ...STORE_VARIABLES.keys(),
];

/**
 * loadConfig validates the environment and returns a frozen Config, or throws a ConfigError
 * listing every problem, each naming its variable.
 */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  // An empty variable means "not set", as with the shell's ${VAR:-default}.
  const present = Object.fromEntries(
    Object.entries(env).filter((entry): entry is [string, string] => entry[1] !== undefined && entry[1].trim() !== ''),
  );
  const result = envSchema.validate(present);
  const stores = loadStores(present);
  const problems = [...(result.error?.details.map((detail) => detail.message) ?? []), ...(stores.problems ?? [])];
  if (problems.length > 0 || stores.stores === undefined) throw new ConfigError(problems);
  const vars = result.value as {
    PORT: number;
    MAX_BODY_BYTES: number;
    STORE_TIMEOUT_MS: number;
    MAX_INFLIGHT: number;
    MAX_INFLIGHT_PER_CALLER: number;
    MAX_INFLIGHT_UNAUTHENTICATED: number;
    FEEDS_MAX: number;
    FEEDS_MAX_PER_CALLER: number;
    MIN_BODY_BYTES_PER_SECOND: number;
    RATE_LIMIT_PER_SECOND?: number;
    TRUSTED_PROXIES: string[];
    V1_MAX_VERSIONS: number;
    SHUTDOWN_TIMEOUT_MS: number;
    LOG_LEVEL: LogLevel;
    METRICS_PORT?: number;
  } & AuthVariables;

  const auth = authConfig(vars);
  return Object.freeze({
    port: vars.PORT,
    maxBodyBytes: vars.MAX_BODY_BYTES,
    storeTimeoutMs: vars.STORE_TIMEOUT_MS,
    maxInflight: vars.MAX_INFLIGHT,
    maxInflightPerCaller: vars.MAX_INFLIGHT_PER_CALLER,
    maxInflightUnauthenticated: vars.MAX_INFLIGHT_UNAUTHENTICATED,
    feedsMax: vars.FEEDS_MAX,
    feedsMaxPerCaller: vars.FEEDS_MAX_PER_CALLER,
    minBodyBytesPerSecond: vars.MIN_BODY_BYTES_PER_SECOND,
    rateLimitPerSecond: vars.RATE_LIMIT_PER_SECOND,
    trustedProxies: Object.freeze([...vars.TRUSTED_PROXIES]),
    instanceIds: stores.stores.default.instances,
    stores: stores.stores,
    shutdownTimeoutMs: vars.SHUTDOWN_TIMEOUT_MS,
    auth,
    logLevel: vars.LOG_LEVEL,
    v1MaxVersions: vars.V1_MAX_VERSIONS,
    ...(vars.METRICS_PORT === undefined ? {} : { metricsPort: vars.METRICS_PORT }),
  });
}

interface AuthVariables {
  AUTH_MODE: AuthMode[];
  AUTH_API_KEYS_FILE?: string;
  AUTH_OIDC_ISSUER?: string;
  AUTH_OIDC_AUDIENCE?: string[];
  AUTH_OIDC_JWKS_URI?: string;
  AUTH_OIDC_JWKS_TOKEN_FILE?: string;
  AUTH_OIDC_GRANTS_FILE?: string;
  AUTH_PROTECT_DOCS: boolean;
}

/**
 * The auth settings, checked as a whole: each mode needs its variables, and a variable of a mode
 * that is off is an error rather than ignored, since an operator who set a keys file but not
 * AUTH_MODE believes the service is protected when it is open to all.
 */
function authConfig(vars: AuthVariables): AuthConfig {
  const modes = vars.AUTH_MODE;
  const problems: string[] = [];
  const variablesOf = (mode: AuthMode, required: ReadonlyArray<keyof AuthVariables>, optional: ReadonlyArray<keyof AuthVariables>) => {
    for (const name of [...required, ...optional]) {
      if (!modes.includes(mode) && vars[name] !== undefined) problems.push(`${name} is set but AUTH_MODE does not include ${mode}`);
      if (modes.includes(mode) && required.includes(name) && vars[name] === undefined) {
        problems.push(`${name} is required when AUTH_MODE includes ${mode}`);
      }
    }
  };
  variablesOf('apikey', ['AUTH_API_KEYS_FILE'], []);
  variablesOf('oidc', ['AUTH_OIDC_ISSUER', 'AUTH_OIDC_AUDIENCE', 'AUTH_OIDC_GRANTS_FILE'], ['AUTH_OIDC_JWKS_URI', 'AUTH_OIDC_JWKS_TOKEN_FILE']);
  if (modes.length === 0 && vars.AUTH_PROTECT_DOCS) problems.push('AUTH_PROTECT_DOCS needs AUTH_MODE apikey or oidc');
  if (problems.length > 0) throw new ConfigError(problems);

  const auth: { -readonly [K in keyof AuthConfig]: AuthConfig[K] } = { modes: Object.freeze([...modes]), protectDocs: vars.AUTH_PROTECT_DOCS };
  if (vars.AUTH_API_KEYS_FILE !== undefined) auth.apiKeysFile = vars.AUTH_API_KEYS_FILE;
  if (modes.includes('oidc')) {
    const oidc: { -readonly [K in keyof OidcConfig]: OidcConfig[K] } = {
      issuer: vars.AUTH_OIDC_ISSUER ?? '',
      audiences: Object.freeze([...(vars.AUTH_OIDC_AUDIENCE ?? [])]),
      grantsFile: vars.AUTH_OIDC_GRANTS_FILE ?? '',
    };
    if (vars.AUTH_OIDC_JWKS_URI !== undefined) oidc.jwksUri = vars.AUTH_OIDC_JWKS_URI;
    if (vars.AUTH_OIDC_JWKS_TOKEN_FILE !== undefined) oidc.jwksTokenFile = vars.AUTH_OIDC_JWKS_TOKEN_FILE;
    auth.oidc = Object.freeze(oidc);
  }
  return Object.freeze(auth);
}
