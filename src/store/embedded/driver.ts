import { resolve } from 'node:path';
import Joi from 'joi';
import type { StoreDriver } from '../driver.ts';
import { EMBEDDED_CAPABILITIES, EMBEDDED_LIMITS } from './limits.ts';

export interface EmbeddedSettings {
  /** Directory of the store's database, as configured (relative to the working directory). */
  readonly dataDir: string;
}

const settings = Joi.object<EmbeddedSettings>({
  dataDir: Joi.string().trim().default('./data'),
});

/** embeddedDriver keeps the data in a SQLite database in one local directory: no cloud, no emulator. */
export const embeddedDriver: StoreDriver<EmbeddedSettings> = {
  name: 'embedded',
  // The embedded store names instances itself: Bigtable's alphabet, but from one character ("local").
  instanceId: {
    pattern: /^[a-z](?:[-a-z0-9]{0,31}[a-z0-9])?$/,
    rule: '1-33 characters: lowercase letters, digits and hyphens, starting with a letter',
  },
  settings,
  fromEnvironment: (env) => ({ dataDir: env['DATA_DIR'] }),
  defaultInstances: ['local'],
  // The process locks the database for its lifetime: a second store on the directory could not open it.
  exclusiveResources: (embedded) => ({ dataDir: resolve(embedded.dataDir) }),
  capabilities: EMBEDDED_CAPABILITIES,
  limits: EMBEDDED_LIMITS,
  describe: (embedded) => ({ dataDir: resolve(embedded.dataDir) }),
  open: async (store) => {
    const { EmbeddedStore } = await import('./embedded-store.ts');
    return EmbeddedStore.open(store.settings);
  },
};
