import type { DataStore } from '../../src/store/store.ts';

/**
 * withOverrides wraps a real store, replacing some of its methods: for faults that cannot be
 * caused for real (a backend failing between two calls, a bug inside an adapter). Every other
 * method is the real store's.
 */
export function withOverrides(store: DataStore, overrides: Partial<DataStore>): DataStore {
  return new Proxy(store, {
    get(target, property, receiver) {
      if (Object.hasOwn(overrides, property)) return overrides[property as keyof DataStore];
      const value: unknown = Reflect.get(target, property, receiver);
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
}
