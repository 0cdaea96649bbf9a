import { bigtableDriver } from './bigtable/driver.ts';
import type { StoreDriver } from './driver.ts';
import { embeddedDriver } from './embedded/driver.ts';
import { redisDriver } from './redis/driver.ts';
import { spannerDriver } from './spanner/driver.ts';

/** Every store driver the service has: the one list that names them. */
export const DRIVERS: readonly StoreDriver[] = [bigtableDriver, embeddedDriver, redisDriver, spannerDriver] as readonly StoreDriver[];

export function findDriver(name: string): StoreDriver | undefined {
  return DRIVERS.find((driver) => driver.name === name);
}

/**
 * The driver the v1 variables mean when DATA_STORE is unset: Bigtable when anything
 * Bigtable-specific is configured, else the embedded store, so that a fresh clone serves with no
 * configuration at all.
 */
export function defaultDriverName(env: Readonly<Record<string, string>>): string {
  return env['GOOGLE_CLOUD_PROJECT'] !== undefined || env['BIGTABLE_EMULATOR_HOST'] !== undefined ? bigtableDriver.name : embeddedDriver.name;
}
