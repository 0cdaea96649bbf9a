import type { DriverContext } from './driver.ts';
import { findDriver } from './drivers.ts';
import { isStoreError } from './errors.ts';
import type { DataStore } from './store.ts';
import { type NamedStore, type StoreSet, createStoreSet } from './store-set.ts';
import type { StoreConfig, StoresConfig } from './stores-config.ts';

/** StoreOpenError says which configured store could not be opened, and why (its StoreError). */
export class StoreOpenError extends Error {
  readonly store: string;
  readonly driver: string;

  constructor(store: StoreConfig, cause: Error) {
    const which = store.name === store.driver ? store.name : `${store.name} (${store.driver})`;
    super(`cannot open the ${which} store: ${cause.message}`, { cause });
    this.name = 'StoreOpenError';
    this.store = store.name;
    this.driver = store.driver;
  }
}

/**
 * openStores opens every configured store through its driver, in configuration order: the
 * StoreSet of the stores as the drivers made them (instrumentStores wraps them for the service).
 * If one cannot be opened (a StoreError: the embedded store's directory is locked or
 * unwritable), the stores already opened are closed again and a StoreOpenError naming it is
 * thrown. A remote backend that is down does not stop it: readiness reports that.
 */
export async function openStores(config: StoresConfig, context: DriverContext): Promise<StoreSet> {
  const opened: NamedStore[] = [];
  for (const definition of config.all) {
    const driver = findDriver(definition.driver);
    if (driver === undefined) throw new Error(`no store driver is named "${definition.driver}"`);
    let store: DataStore;
    try {
      store = await driver.open(definition, context);
    } catch (error) {
      await closeStores(opened);
      if (!isStoreError(error)) throw error;
      throw new StoreOpenError(definition, error);
    }
    opened.push({ name: definition.name, driver: driver.name, instances: definition.instances, store });
  }
  return createStoreSet(opened, config.default.name);
}

/**
 * closeStores closes every store at once and resolves when all have closed. It rejects with the
 * first failure only after every store has had its chance to close.
 */
export async function closeStores(stores: StoreSet | readonly NamedStore[]): Promise<void> {
  const all = 'all' in stores ? stores.all : stores;
  const outcomes = await Promise.allSettled(all.map((named) => named.store.close()));
  const failed = outcomes.find((outcome): outcome is PromiseRejectedResult => outcome.status === 'rejected');
  if (failed !== undefined) throw failed.reason;
}
