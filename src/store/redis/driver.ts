import Joi from 'joi';
import type { StoreDriver } from '../driver.ts';
import { readableFile } from '../driver-settings.ts';
import { REDIS_CAPABILITIES, REDIS_LIMITS } from './limits.ts';

export interface RedisSettings {
  /** redis://host:port[/db] or rediss://host:port[/db] (TLS); never with a password in it. */
  readonly url: string;
  /** A file holding the AUTH string (Memorystore's AUTH, or a requirepass password). */
  readonly authStringFile?: string;
  /** A PEM file of the CA that signs the server's certificate: Memorystore's in-transit encryption. */
  readonly caFile?: string;
  /** A Redis Cluster (Memorystore for Redis Cluster): `url` names its discovery endpoint or any node. */
  readonly cluster: boolean;
}

function redisUrl(value: string, helpers: Joi.CustomHelpers): string | Joi.ErrorReport {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return helpers.message({ custom: '{{#label}} must be a URL: redis://host:port or rediss://host:port' });
  }
  if (url.protocol !== 'redis:' && url.protocol !== 'rediss:') {
    return helpers.message({ custom: `{{#label}} must start with redis:// or rediss://, got "${url.protocol}//"` });
  }
  // Credentials stay out of STORES_FILE: it is a ConfigMap, readable by more people than a Secret.
  if (url.password !== '') {
    return helpers.message({ custom: '{{#label}} must not hold a password: put the AUTH string in a file and name it in authStringFile' });
  }
  if (url.hostname === '') return helpers.message({ custom: '{{#label}} must name a host' });
  if (url.pathname !== '' && url.pathname !== '/' && !/^\/\d{1,2}$/.test(url.pathname)) {
    return helpers.message({ custom: `{{#label}} may end only in a database number (/0 to /15), got "${url.pathname}"` });
  }
  return value;
}

const settings = Joi.object<RedisSettings>({
  url: Joi.string()
    .trim()
    .required()
    .custom(redisUrl)
    .when('cluster', {
      is: true,
      then: Joi.string().pattern(/^[^/]+\/\/[^/]+\/?$/).messages({ 'string.pattern.base': '{{#label}} of a cluster cannot name a database: a Redis Cluster has only database 0' }),
    }),
  cluster: Joi.boolean().default(false),
  authStringFile: Joi.string().trim().custom(readableFile),
  caFile: Joi.string()
    .trim()
    .custom(readableFile)
    .when('url', {
      is: Joi.string().pattern(/^rediss:/),
      otherwise: Joi.forbidden().messages({ 'any.unknown': '{{#label}} needs a rediss:// url (TLS)' }),
    }),
});

/** redisDriver serves kvcrud instances as key namespaces of one Redis (Memorystore for Redis) through node-redis. */
export const redisDriver: StoreDriver<RedisSettings> = {
  name: 'redis',
  // Instances become part of Redis key names and hash tags: no braces, slashes or colons.
  instanceId: {
    pattern: /^[a-z](?:[-a-z0-9]{0,31}[a-z0-9])?$/,
    rule: '1-33 characters: lowercase letters, digits and hyphens, starting with a letter',
  },
  settings,
  capabilities: REDIS_CAPABILITIES,
  limits: REDIS_LIMITS,
  describe: (redis) => {
    const url = new URL(redis.url);
    return {
      url: `${url.protocol}//${url.host}${url.pathname === '/' ? '' : url.pathname}`,
      cluster: redis.cluster,
      auth: redis.authStringFile === undefined ? 'none' : 'AUTH string from a file',
      ...(redis.caFile === undefined ? {} : { caFile: redis.caFile }),
    };
  },
  open: async (store, context) => {
    const { RedisStore } = await import('./redis-store.ts');
    return RedisStore.open({
      url: store.settings.url,
      cluster: store.settings.cluster,
      ...(store.settings.authStringFile === undefined ? {} : { authStringFile: store.settings.authStringFile }),
      ...(store.settings.caFile === undefined ? {} : { caFile: store.settings.caFile }),
      instances: store.instances,
      logger: context.logger.child({ store: store.name }),
    });
  },
};
