import { accessSync, constants } from 'node:fs';
import Joi from 'joi';
import { isTrustedUrl } from './auth/trusted-url.ts';

/** The service's whole configuration, built once from the environment by loadConfig. */
export interface Config {
  readonly port: number;
  readonly maxBodyBytes: number;
  /** Deadline for one data store call, counted from when the service starts it. */
  readonly storeTimeoutMs: number;
  /** Most requests handled at once; past it a request is refused with 503 OVERLOADED. */
  readonly maxInflight: number;
  /** Most requests one caller has handled at once; past it the caller gets 429 RATE_LIMITED. */
  readonly maxInflightPerCaller: number;
  /** Most new credentials (tokens not seen before) checked at once; past it 503 OVERLOADED. */
  readonly maxInflightUnauthenticated: number;
  /** Least rate a request body must arrive at after a grace second, or 0; slower: 408 REQUEST_TIMEOUT. */
  readonly minBodyBytesPerSecond: number;
  /** Requests per second per caller (token bucket), or undefined for no rate limit. */
  readonly rateLimitPerSecond: number | undefined;
  /** Instance IDs the service serves; `{instanceID}` in a path must be one of them. */
  readonly instanceIds: readonly string[];
  /** The data store and its own settings. */
  readonly store: StoreConfig;
  /** On SIGTERM, how long in-flight requests may run before their connections are cut. */
  readonly shutdownTimeoutMs: number;
  readonly auth: AuthConfig;
  /** Least severe level written to the log (pino's levels, or "silent"). */
  readonly logLevel: LogLevel;
  /** Port of a separate listener for /metrics; unset: /metrics is served on `port`. */
  readonly metricsPort?: number;
}

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

export type StoreConfig = BigtableConfig | EmbeddedConfig;

export interface BigtableConfig {
  readonly type: 'bigtable';
  readonly projectId: string;
  /** host:port of a Bigtable emulator; when set, no credentials are looked up. */
  readonly emulatorHost?: string;
  /** Service account key file; otherwise application default credentials. */
  readonly credentialsFile?: string;
}

export interface EmbeddedConfig {
  readonly type: 'embedded';
  /** Directory of the store's database, as configured (relative to the working directory). */
  readonly dataDir: string;
}

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

/** MAX_INFLIGHT_PER_CALLER when not set: half of MAX_INFLIGHT (at least 1). */
export function defaultInflightPerCaller(maxInflight: number): number {
  return Math.max(1, Math.ceil(maxInflight / 2));
}
/**
 * MAX_INFLIGHT_UNAUTHENTICATED when not set. A first check of a token's signature costs about
 * 0.1-0.2 ms of CPU; 16 at once keep both cores of a pod busy, and callers reusing their token
 * never wait on them.
 */
export const DEFAULT_INFLIGHT_UNAUTHENTICATED = 16;
/**
 * MIN_BODY_BYTES_PER_SECOND when not set: 16 KiB/s, a hundredth of a slow mobile link and far
 * below any caller in the same region; a body at that rate holds a slot for at most the 30 s
 * request timeout only if it is 480 KiB or more.
 */
export const DEFAULT_MIN_BODY_BYTES_PER_SECOND = 16 * 1024;

// Bigtable's own rules for instance IDs: 6-33 characters, a lowercase letter first, no trailing hyphen.
const BIGTABLE_INSTANCE_ID = /^[a-z][-a-z0-9]{4,31}[a-z0-9]$/;
// The embedded store names instances itself, so the same alphabet but from one character ("local").
const EMBEDDED_INSTANCE_ID = /^[a-z](?:[-a-z0-9]{0,31}[a-z0-9])?$/;
// Project IDs go into resource names (projects/{id}/...), so nothing that could break the path.
// Legacy domain-scoped IDs ("example.com:my-project") are allowed.
const PROJECT_ID = /^[a-z][-a-z0-9.:]{2,98}[a-z0-9]$/;

function instanceIdList(pattern: RegExp, rule: string) {
  return Joi.string()
    .trim()
    .custom((value: string, helpers) => {
      const ids = value.split(',').map((id) => id.trim());
      for (const id of ids) {
        if (!pattern.test(id)) {
          return helpers.message({ custom: `{{#label}} entry "${id}" is not a valid instance ID (${rule})` });
        }
      }
      if (new Set(ids).size !== ids.length) {
        return helpers.message({ custom: '{{#label}} lists an instance ID more than once' });
      }
      return ids;
    });
}

const ID_ALPHABET = 'lowercase letters, digits and hyphens, starting with a letter';

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
  MIN_BODY_BYTES_PER_SECOND: Joi.number().integer().min(0).max(1024 * MIB).default(DEFAULT_MIN_BODY_BYTES_PER_SECOND),
  RATE_LIMIT_PER_SECOND: Joi.number().integer().min(1).max(1_000_000),
  // Unset: Bigtable when anything Bigtable-specific is configured, else the embedded store, so a
  // fresh clone serves with no configuration at all.
  DATA_STORE: Joi.string()
    .trim()
    .valid('bigtable', 'embedded')
    .default((env: Record<string, unknown>) =>
      env['GOOGLE_CLOUD_PROJECT'] !== undefined || env['BIGTABLE_EMULATOR_HOST'] !== undefined ? 'bigtable' : 'embedded',
    ),
  INSTANCE_IDS: Joi.when('DATA_STORE', {
    is: 'bigtable',
    then: instanceIdList(BIGTABLE_INSTANCE_ID, `6-33 characters: ${ID_ALPHABET}`).required(),
    otherwise: instanceIdList(EMBEDDED_INSTANCE_ID, `1-33 characters: ${ID_ALPHABET}`).default(['local']),
  }),
  DATA_DIR: Joi.string().trim().default('./data'),
  GOOGLE_CLOUD_PROJECT: Joi.string()
    .trim()
    .pattern(PROJECT_ID)
    .when('DATA_STORE', { is: 'bigtable', then: Joi.required() })
    .messages({ 'string.pattern.base': '{{#label}} "{{#value}}" is not a valid project ID' }),
  BIGTABLE_EMULATOR_HOST: Joi.string()
    .trim()
    .pattern(/^[A-Za-z0-9.-]+:([1-9][0-9]{0,4})$/)
    .messages({ 'string.pattern.base': '{{#label}} must be host:port, got "{{#value}}"' }),
  GOOGLE_APPLICATION_CREDENTIALS: Joi.string().trim(),
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
export const CONFIG_VARIABLES: readonly string[] = Object.keys((envSchema.describe() as { keys: Record<string, unknown> }).keys);

/**
 * loadConfig validates the environment and returns a frozen Config, or throws a ConfigError
 * listing every problem, each naming its variable.
 */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  // An empty variable means "not set", as with the shell's ${VAR:-default}.
  const present = Object.fromEntries(Object.entries(env).filter(([, value]) => value !== undefined && value.trim() !== ''));
  const result = envSchema.validate(present);
  if (result.error) {
    throw new ConfigError(result.error.details.map((detail) => detail.message));
  }
  const vars = result.value as {
    PORT: number;
    MAX_BODY_BYTES: number;
    STORE_TIMEOUT_MS: number;
    MAX_INFLIGHT: number;
    MAX_INFLIGHT_PER_CALLER: number;
    MAX_INFLIGHT_UNAUTHENTICATED: number;
    MIN_BODY_BYTES_PER_SECOND: number;
    RATE_LIMIT_PER_SECOND?: number;
    INSTANCE_IDS: string[];
    DATA_STORE: 'bigtable' | 'embedded';
    DATA_DIR: string;
    GOOGLE_CLOUD_PROJECT: string;
    BIGTABLE_EMULATOR_HOST?: string;
    GOOGLE_APPLICATION_CREDENTIALS?: string;
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
    minBodyBytesPerSecond: vars.MIN_BODY_BYTES_PER_SECOND,
    rateLimitPerSecond: vars.RATE_LIMIT_PER_SECOND,
    instanceIds: Object.freeze([...vars.INSTANCE_IDS]),
    store: Object.freeze(vars.DATA_STORE === 'bigtable' ? bigtableConfig(vars) : { type: 'embedded' as const, dataDir: vars.DATA_DIR }),
    shutdownTimeoutMs: vars.SHUTDOWN_TIMEOUT_MS,
    auth,
    logLevel: vars.LOG_LEVEL,
    ...(vars.METRICS_PORT === undefined ? {} : { metricsPort: vars.METRICS_PORT }),
  });
}

function bigtableConfig(vars: {
  GOOGLE_CLOUD_PROJECT: string;
  BIGTABLE_EMULATOR_HOST?: string;
  GOOGLE_APPLICATION_CREDENTIALS?: string;
}): BigtableConfig {
  const bigtable: { -readonly [K in keyof BigtableConfig]: BigtableConfig[K] } = { type: 'bigtable', projectId: vars.GOOGLE_CLOUD_PROJECT };
  if (vars.BIGTABLE_EMULATOR_HOST !== undefined) {
    bigtable.emulatorHost = vars.BIGTABLE_EMULATOR_HOST;
  } else if (vars.GOOGLE_APPLICATION_CREDENTIALS !== undefined) {
    // Only checked when it will be used: against the emulator no credentials are read at all.
    try {
      accessSync(vars.GOOGLE_APPLICATION_CREDENTIALS, constants.R_OK);
    } catch {
      throw new ConfigError([`GOOGLE_APPLICATION_CREDENTIALS file "${vars.GOOGLE_APPLICATION_CREDENTIALS}" cannot be read`]);
    }
    bigtable.credentialsFile = vars.GOOGLE_APPLICATION_CREDENTIALS;
  }
  return bigtable;
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
