import { pino } from 'pino';
import { redisDriver } from '../../../src/store/redis/driver.ts';
import type { DataStore } from '../../../src/store/store.ts';
import { missingBackend, type DriverHarnessFactory } from '../driver-harness.ts';
import { REDIS_SERVER, type RedisServer, redisAvailable, spawnRedis } from '../redis-server.ts';

/**
 * Redis on a redis-server of its own (test/support/redis-server.ts) for each opened store,
 * opened through the driver and stopped when the store closes: nothing is shared, and the
 * Redis on 6379 is never touched.
 */
export const harness: DriverHarnessFactory = {
  driver: 'redis',
  make(context) {
    if (!redisAvailable()) missingBackend(context, 'redis', `no redis-server at ${REDIS_SERVER}`);
    const servers = new Map<DataStore, RedisServer>();
    return Promise.resolve({
      traits: { fastWideWrites: true, propertyRuns: 100 },
      async open(instances) {
        const server = await spawnRedis();
        const store = await redisDriver.open(
          { name: 'redis', instances, settings: { url: server.url, cluster: false } },
          { logger: pino({ level: 'silent' }) },
        );
        servers.set(store, server);
        return store;
      },
      async close(store) {
        await store.close();
        await servers.get(store)?.stop();
        servers.delete(store);
      },
    });
  },
};
