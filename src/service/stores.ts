import type { NamedStore, StoreSet } from '../store/store-set.ts';
import type { StoreCapabilities } from '../store/store.ts';
import { ApiError } from './errors.ts';
import { type PublishedLimits, publishedLimits } from './limits.ts';
import { shorten } from './text.ts';

/** A store as GET /v2/stores describes it. */
export interface StoreDescription {
  readonly name: string;
  readonly driver: string;
  /** Whether this store serves v1. */
  readonly default: boolean;
  readonly instances: readonly string[];
  readonly capabilities: StoreCapabilities;
  readonly limits: PublishedLimits;
}

/**
 * StoreDirectory finds the store and instance a request names, or says which one is not served:
 * STORE_NOT_FOUND, then INSTANCE_NOT_FOUND. Every request resolves its target here before anything
 * else of it is looked at.
 */
export class StoreDirectory {
  readonly #stores: StoreSet;

  constructor(stores: StoreSet) {
    this.#stores = stores;
  }

  get default(): NamedStore {
    return this.#stores.default;
  }

  get all(): readonly NamedStore[] {
    return this.#stores.all;
  }

  /**
   * The store named `name`; 404 STORE_NOT_FOUND if the service has none by that name, naming the
   * stores the caller may use when `usable` lists them (asked only then).
   */
  store(name: string, usable?: () => readonly string[]): NamedStore {
    const store = this.#stores.get(name);
    if (store === undefined) {
      const names = usable?.() ?? [];
      const which = names.length === 0 ? '' : ` You may use ${names.map((candidate) => `"${candidate}"`).join(', ')}.`;
      throw new ApiError('STORE_NOT_FOUND', `Store "${shorten(name)}" is not served by this service.${which} GET /v2/stores lists the stores you may use, with their instances.`);
    }
    return store;
  }

  /** The store, if it serves `instance`; 404 STORE_NOT_FOUND (see store) or INSTANCE_NOT_FOUND otherwise. */
  instance(storeName: string, instance: string, usable?: () => readonly string[]): NamedStore {
    const store = this.store(storeName, usable);
    if (!store.instances.includes(instance)) {
      throw new ApiError(
        'INSTANCE_NOT_FOUND',
        `Instance "${shorten(instance)}" is not served by store "${store.name}". GET /v2/stores lists the instances you may use; a store's instances are set in STORES_FILE (INSTANCE_IDS for the one store without it).`,
      );
    }
    return store;
  }

  /** The store's description, listing only `instances` of its own (those the caller may use). */
  describe(store: NamedStore, instances: readonly string[] = store.instances): StoreDescription {
    return {
      name: store.name,
      driver: store.driver,
      default: store === this.#stores.default,
      instances: store.instances.filter((instance) => instances.includes(instance)),
      capabilities: { ...store.store.capabilities },
      limits: publishedLimits(store.store.limits),
    };
  }
}
