import { accessSync, constants } from 'node:fs';
import Joi from 'joi';

/** The service's whole configuration, built once from the environment by loadConfig. */
export interface Config {
  readonly port: number;
  readonly maxBodyBytes: number;
  /** Deadline for one data store call, counted from when the service starts it. */
  readonly storeTimeoutMs: number;
  /** Instance IDs the service serves; `{instanceID}` in a path must be one of them. */
  readonly instanceIds: readonly string[];
  readonly dataStore: 'bigtable';
  readonly bigtable: BigtableConfig;
  /** Least severe level written to the log (pino's levels, or "silent"). */
  readonly logLevel: LogLevel;
  /** Port of a separate listener for /metrics; unset: /metrics is served on `port`. */
  readonly metricsPort?: number;
}

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

export interface BigtableConfig {
  readonly projectId: string;
  /** host:port of a Bigtable emulator; when set, no credentials are looked up. */
  readonly emulatorHost?: string;
  /** Service account key file; otherwise application default credentials. */
  readonly credentialsFile?: string;
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
// Project IDs go into resource names (projects/{id}/...), so nothing that could break the path.
// Legacy domain-scoped IDs ("example.com:my-project") are allowed.
const PROJECT_ID = /^[a-z][-a-z0-9.:]{2,98}[a-z0-9]$/;

const instanceIdList = Joi.string()
  .trim()
  .custom((value: string, helpers) => {
    const ids = value.split(',').map((id) => id.trim());
    for (const id of ids) {
      if (!BIGTABLE_INSTANCE_ID.test(id)) {
        return helpers.message({
          custom: `{{#label}} entry "${id}" is not a valid instance ID (6-33 characters: lowercase letters, digits and hyphens, starting with a letter)`,
        });
      }
    }
    if (new Set(ids).size !== ids.length) {
      return helpers.message({ custom: '{{#label}} lists an instance ID more than once' });
    }
    return ids;
  });

const envSchema = Joi.object({
  PORT: Joi.number().integer().min(0).max(65535).default(8080),
  MAX_BODY_BYTES: Joi.number().integer().min(1024).max(512 * MIB).default(10 * MIB),
  STORE_TIMEOUT_MS: Joi.number().integer().min(1).max(600_000).default(5000),
  INSTANCE_IDS: instanceIdList.required(),
  DATA_STORE: Joi.string().trim().valid('bigtable').default('bigtable'),
  GOOGLE_CLOUD_PROJECT: Joi.string().trim().pattern(PROJECT_ID).required().messages({
    'string.pattern.base': '{{#label}} "{{#value}}" is not a valid project ID',
  }),
  BIGTABLE_EMULATOR_HOST: Joi.string()
    .trim()
    .pattern(/^[A-Za-z0-9.-]+:([1-9][0-9]{0,4})$/)
    .messages({ 'string.pattern.base': '{{#label}} must be host:port, got "{{#value}}"' }),
  GOOGLE_APPLICATION_CREDENTIALS: Joi.string().trim(),
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
    INSTANCE_IDS: string[];
    DATA_STORE: 'bigtable';
    GOOGLE_CLOUD_PROJECT: string;
    BIGTABLE_EMULATOR_HOST?: string;
    GOOGLE_APPLICATION_CREDENTIALS?: string;
    LOG_LEVEL: LogLevel;
    METRICS_PORT?: number;
  };

  const bigtable: { -readonly [K in keyof BigtableConfig]: BigtableConfig[K] } = { projectId: vars.GOOGLE_CLOUD_PROJECT };
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

  return Object.freeze({
    port: vars.PORT,
    maxBodyBytes: vars.MAX_BODY_BYTES,
    storeTimeoutMs: vars.STORE_TIMEOUT_MS,
    instanceIds: Object.freeze([...vars.INSTANCE_IDS]),
    dataStore: vars.DATA_STORE,
    bigtable: Object.freeze(bigtable),
    logLevel: vars.LOG_LEVEL,
    ...(vars.METRICS_PORT === undefined ? {} : { metricsPort: vars.METRICS_PORT }),
  });
}
