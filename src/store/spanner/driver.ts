import Joi from 'joi';
import type { StoreDriver } from '../driver.ts';
import { credentialsFile, emulatorHost, projectId } from '../driver-settings.ts';
import { SPANNER_CAPABILITIES, SPANNER_LIMITS } from './limits.ts';

export interface SpannerSettings {
  readonly projectId: string;
  /** The Spanner instance; each kvcrud instance is a database in it, of the same ID. */
  readonly instance: string;
  /** host:port of a Spanner emulator; when set, no credentials or metadata server are consulted. */
  readonly emulatorHost?: string;
  /** A service account key file; otherwise application default credentials (Workload Identity on GKE). */
  readonly credentialsFile?: string;
  /** Whether single-key reads of one event-loop turn, of one table and selection, are read together (default true). */
  readonly coalesce?: boolean;
}

const settings = Joi.object<SpannerSettings>({
  projectId,
  // Spanner's rule for instance IDs: 2-64 characters, a lowercase letter first, no trailing hyphen.
  instance: Joi.string()
    .trim()
    .pattern(/^[a-z][-a-z0-9]{0,62}[a-z0-9]$/)
    .required()
    .messages({ 'string.pattern.base': '{{#label}} "{{#value}}" is not a Spanner instance ID (2-64 lowercase letters, digits and hyphens, starting with a letter)' }),
  emulatorHost,
  credentialsFile,
  coalesce: Joi.boolean(),
});

/** spannerDriver serves kvcrud instances as databases of one Cloud Spanner instance through @google-cloud/spanner. */
export const spannerDriver: StoreDriver<SpannerSettings> = {
  name: 'spanner',
  // Spanner's rule for database IDs, since each kvcrud instance is the database of the same ID:
  // 2-30 characters, a lowercase letter first, no trailing hyphen or underscore.
  instanceId: {
    pattern: /^[a-z][-_a-z0-9]{0,28}[a-z0-9]$/,
    rule: '2-30 characters: lowercase letters, digits, hyphens and underscores, starting with a letter and ending with a letter or digit (a Spanner database ID)',
  },
  settings,
  capabilities: SPANNER_CAPABILITIES,
  limits: SPANNER_LIMITS,
  describe: (spanner) => ({
    projectId: spanner.projectId,
    instance: spanner.instance,
    ...(spanner.emulatorHost === undefined ? { credentials: spanner.credentialsFile ?? 'application default' } : { emulatorHost: spanner.emulatorHost }),
  }),
  open: async (store, context) => {
    const { SpannerStore } = await import('./spanner-store.ts');
    const { onBatch } = context;
    return SpannerStore.open({
      projectId: store.settings.projectId,
      instance: store.settings.instance,
      ...(store.settings.emulatorHost === undefined ? {} : { emulatorHost: store.settings.emulatorHost }),
      ...(store.settings.credentialsFile === undefined ? {} : { credentialsFile: store.settings.credentialsFile }),
      ...(store.settings.coalesce === undefined ? {} : { coalesce: store.settings.coalesce }),
      ...(onBatch === undefined ? {} : { onBatch: (operation: string, size: number) => onBatch(store.name, operation, size) }),
      instances: store.instances,
      logger: context.logger.child({ store: store.name }),
    });
  },
};
