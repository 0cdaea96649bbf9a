import type { DataStore } from './store.ts';

/** One configured and opened store, as the service sees it. */
export interface NamedStore {
  /** The operator's name for it (`prod-bt`, `cache`): in v2 paths, grants, metric labels and logs. */
  readonly name: string;
  /** Its driver's name (`bigtable`, `embedded`, `spanner`, `redis`). */
  readonly driver: string;
  /** The instances it serves, in configuration order. */
  readonly instances: readonly string[];
  /** The store, already wrapped so that every call is measured, traced and checked for its deadline. */
  readonly store: DataStore;
}

/**
 * StoreSet is every store the process serves, by name, and the default one (which serves v1).
 * Built once at start-up from the configuration; constant afterwards.
 */
export interface StoreSet {
  readonly default: NamedStore;
  /** In configuration order. */
  readonly all: readonly NamedStore[];
  get(name: string): NamedStore | undefined;
}

/**
 * createStoreSet builds the StoreSet of `stores` (in configuration order, names distinct), whose
 * default is the one named `defaultName`.
 */
export function createStoreSet(stores: readonly NamedStore[], defaultName: string): StoreSet {
  const byName = new Map(stores.map((store) => [store.name, store]));
  const defaultStore = byName.get(defaultName);
  if (defaultStore === undefined || byName.size !== stores.length) {
    throw new Error(`a store set needs distinct names and a default among them, got ${stores.map((store) => store.name).join(', ')} and "${defaultName}"`);
  }
  return Object.freeze({
    default: defaultStore,
    all: Object.freeze([...stores]),
    get: (name: string) => byName.get(name),
  });
}
