import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { BigtableStore } from '../../src/store/bigtable/bigtable-store.ts';
import { EmbeddedStore } from '../../src/store/embedded/embedded-store.ts';
import { RedisStore } from '../../src/store/redis/redis-store.ts';
import { SpannerStore } from '../../src/store/spanner/spanner-store.ts';
import type { DataStore } from '../../src/store/store.ts';
import { emulatorHost } from './emulator.ts';
import { requireRedis, spawnRedis } from './redis-server.ts';
import { requireSpanner, sharedSpannerEmulator } from './spanner-emulator.ts';
import { spannerTestInstance } from './harnesses/spanner.ts';

export const TEST_PROJECT = 'kvcrud-test';

/**
 * StoreHarness is all an adapter supplies to the conformance suite (test/conformance), in the
 * style of gocloud.dev's drivertest: a way to open a fresh store, and to close it.
 */
export interface StoreHarness {
  /** The name of the adapter's driver (`Driver.name` in src/store/driver.ts): `bigtable`, `embedded`, `redis`, `spanner`. */
  readonly name: string;
  readonly capabilities: StoreCapabilities;
  /** Opens a store serving `instances` that holds nothing another test made. */
  open(instances: readonly string[]): Promise<DataStore>;
}

/**
 * What a store can do in test time. Capabilities never excuse a difference in behaviour: they
 * only let a case use a cheaper way to reach the same assertion.
 */
export interface StoreCapabilities {
  /** Writes 100,000 cells in one request within seconds (the Bigtable emulator takes ~40 s). */
  readonly fastWideWrites: boolean;
}

/** Makes a harness, or skips the calling suite when what the adapter needs is missing. */
export type HarnessFactory = (context: Mocha.Context) => StoreHarness;

/** Bigtable on the emulator the test run started (a fresh store = fresh random instance IDs). */
export const bigtableHarness: HarnessFactory = (context) => {
  const host = emulatorHost(context);
  return {
    name: 'bigtable',
    capabilities: { fastWideWrites: false },
    open: (instances) => Promise.resolve(new BigtableStore({ projectId: TEST_PROJECT, instanceIds: instances, emulatorHost: host })),
  };
};

/** The embedded store in a new temporary directory, removed when the store closes. */
export const embeddedHarness: HarnessFactory = () => ({
  name: 'embedded',
  capabilities: { fastWideWrites: true },
  async open() {
    const dataDir = mkdtempSync(join(tmpdir(), 'kvcrud-embedded-'));
    const store = await EmbeddedStore.open({ dataDir });
    const close = store.close.bind(store);
    return Object.assign(store, {
      async close() {
        await close();
        rmSync(dataDir, { recursive: true, force: true });
      },
    });
  },
});

/** The Redis store on a redis-server of its own, stopped when the store closes. */
export const redisHarness: HarnessFactory = (context) => {
  requireRedis(context);
  return {
    name: 'redis',
    capabilities: { fastWideWrites: true },
    async open(instances) {
      const server = await spawnRedis();
      const store = RedisStore.open({ url: server.url, instances, logger: pino({ level: 'silent' }) });
      const close = store.close.bind(store);
      return Object.assign(store, {
        async close() {
          await close();
          await server.stop();
        },
      });
    },
  };
};

/** Spanner on the run's emulator, each store on a Spanner instance of its own. */
export const spannerHarness: HarnessFactory = (context) => {
  requireSpanner(context);
  return {
    name: 'spanner',
    capabilities: { fastWideWrites: true },
    async open(instances) {
      const emulator = await sharedSpannerEmulator();
      return SpannerStore.open({ projectId: TEST_PROJECT, instance: spannerTestInstance(), emulatorHost: emulator.host, instances, logger: pino({ level: 'silent' }) });
    },
  };
};

/** Every adapter's harness, for suites that run against each store. */
export const STORE_HARNESSES: readonly HarnessFactory[] = [bigtableHarness, embeddedHarness, redisHarness, spannerHarness];
