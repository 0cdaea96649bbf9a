import type { Config } from '../config.ts';
import { BigtableStore } from './bigtable/bigtable-store.ts';
import { EmbeddedStore } from './embedded/embedded-store.ts';
import type { DataStore } from './legacy-store.ts';

/**
 * openStore creates the configured DataStore: the one place that names the adapters. It rejects
 * with a StoreError when the store cannot be opened at all (e.g. the embedded store's directory is
 * in use).
 */
export async function openStore(config: Pick<Config, 'store' | 'instanceIds'>): Promise<DataStore> {
  switch (config.store.type) {
    case 'bigtable':
      return new BigtableStore({ ...config.store, instanceIds: config.instanceIds });
    case 'embedded':
      return EmbeddedStore.open(config.store);
  }
}
