import type { Config } from '../config.ts';
import { BigtableStore } from './bigtable/bigtable-store.ts';
import type { DataStore } from './store.ts';

/** openStore creates the configured DataStore: the one place that names the adapters. */
export function openStore(config: Config): DataStore {
  switch (config.dataStore) {
    case 'bigtable':
      return new BigtableStore({ ...config.bigtable, instanceIds: config.instanceIds });
  }
}
