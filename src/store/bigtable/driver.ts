import Joi from 'joi';
import type { StoreDriver } from '../driver.ts';
import { credentialsFile, emulatorHost, projectId } from '../driver-settings.ts';
import { BIGTABLE_CAPABILITIES, BIGTABLE_LIMITS } from './limits.ts';

export interface BigtableSettings {
  readonly projectId: string;
  /** host:port of a Bigtable emulator; when set, no credentials or metadata server are consulted. */
  readonly emulatorHost?: string;
  /** A service account key file; otherwise application default credentials (Workload Identity on GKE). */
  readonly credentialsFile?: string;
  /** Whether single-row writes and single-key reads of one event-loop turn go out together (default true). */
  readonly coalesce?: boolean;
}

const settings = Joi.object<BigtableSettings>({
  projectId,
  emulatorHost,
  credentialsFile,
  coalesce: Joi.boolean(),
});

/** bigtableDriver serves Cloud Bigtable instances through the official client's generated gRPC clients. */
export const bigtableDriver: StoreDriver<BigtableSettings> = {
  name: 'bigtable',
  // Bigtable's own rule: 6-33 characters, a lowercase letter first, no trailing hyphen.
  instanceId: {
    pattern: /^[a-z][-a-z0-9]{4,31}[a-z0-9]$/,
    rule: '6-33 characters: lowercase letters, digits and hyphens, starting with a letter',
  },
  settings,
  fromEnvironment: (env) => ({
    projectId: env['GOOGLE_CLOUD_PROJECT'],
    emulatorHost: env['BIGTABLE_EMULATOR_HOST'],
    credentialsFile: env['GOOGLE_APPLICATION_CREDENTIALS'],
    coalesce: env['BIGTABLE_COALESCE'],
  }),
  capabilities: BIGTABLE_CAPABILITIES,
  limits: BIGTABLE_LIMITS,
  describe: (bigtable) => ({
    projectId: bigtable.projectId,
    ...(bigtable.emulatorHost === undefined ? { credentials: bigtable.credentialsFile ?? 'application default' } : { emulatorHost: bigtable.emulatorHost }),
  }),
  open: async (store, context) => {
    const { BigtableStore } = await import('./bigtable-store.ts');
    const { onBatch } = context;
    return new BigtableStore({
      ...store.settings,
      instanceIds: store.instances,
      ...(onBatch === undefined ? {} : { onBatch: (operation: string, size: number) => onBatch(store.name, operation, size) }),
    });
  },
};
