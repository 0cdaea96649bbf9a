import { accessSync, constants } from 'node:fs';
import Joi from 'joi';

/** The service's whole configuration, built once from the environment by loadConfig. */
export interface Config {
  readonly port: number;
  readonly maxBodyBytes: number;
  /** Deadline for one data store call, counted from when the service starts it. */
  readonly storeTimeoutMs: number;
  /** Most requests handled at once; past it a request is refused with 503 OVERLOADED. */
  readonly maxInflight: number;
  /** Requests per second per caller (token bucket), or undefined for no rate limit. */
  readonly rateLimitPerSecond: number | undefined;
  /** Instance IDs the service serves; `{instanceID}` in a path must be one of them. */
  readonly instanceIds: readonly string[];
  /** The data store and its own settings. */
  readonly store: StoreConfig;
}

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

const envSchema = Joi.object({
  PORT: Joi.number().integer().min(0).max(65535).default(8080),
  MAX_BODY_BYTES: Joi.number().integer().min(1024).max(512 * MIB).default(10 * MIB),
  STORE_TIMEOUT_MS: Joi.number().integer().min(1).max(600_000).default(5000),
  MAX_INFLIGHT: Joi.number().integer().min(1).max(1_000_000).default(256),
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
    RATE_LIMIT_PER_SECOND?: number;
    INSTANCE_IDS: string[];
    DATA_STORE: 'bigtable' | 'embedded';
    DATA_DIR: string;
    GOOGLE_CLOUD_PROJECT: string;
    BIGTABLE_EMULATOR_HOST?: string;
    GOOGLE_APPLICATION_CREDENTIALS?: string;
  };

  return Object.freeze({
    port: vars.PORT,
    maxBodyBytes: vars.MAX_BODY_BYTES,
    storeTimeoutMs: vars.STORE_TIMEOUT_MS,
    maxInflight: vars.MAX_INFLIGHT,
    rateLimitPerSecond: vars.RATE_LIMIT_PER_SECOND,
    instanceIds: Object.freeze([...vars.INSTANCE_IDS]),
    store: Object.freeze(vars.DATA_STORE === 'bigtable' ? bigtableConfig(vars) : { type: 'embedded' as const, dataDir: vars.DATA_DIR }),
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
