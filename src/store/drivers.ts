import { bigtableDriver } from './bigtable/driver.ts';
import type { StoreDriver } from './driver.ts';
import { embeddedDriver } from './embedded/driver.ts';

/** Every store driver the service has: the one list that names them. */
export const DRIVERS: readonly StoreDriver[] = [bigtableDriver, embeddedDriver] as readonly StoreDriver[];

export function findDriver(name: string): StoreDriver | undefined {
  return DRIVERS.find((driver) => driver.name === name);
}
