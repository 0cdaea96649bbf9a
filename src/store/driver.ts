import type Joi from 'joi';
import type { Logger } from 'pino';
import type { DataStore, StoreCapabilities, StoreLimits } from './store.ts';

/**
 * StoreDriver is what each store folder (bigtable/, embedded/, spanner/, redis/) exports, once,
 * from its driver.ts: everything the rest of the service needs to know about that kind of store.
 * drivers.ts lists them; nothing else names a driver. Adding a store touches its own folder,
 * that list and the chart.
 */
export interface StoreDriver<Settings extends object = object> {
  /** The `driver` value of a STORES_FILE entry, and the store's name when the v1 variables define it. */
  readonly name: string;
  /** The backend's own rule for instance IDs, checked for every entry of `instances`. */
  readonly instanceId: { readonly pattern: RegExp; readonly rule: string };
  /**
   * Validates one store's driver settings: the STORES_FILE entry without `driver` and
   * `instances`. Its labels are the field names, so messages name the field.
   */
  readonly settings: Joi.ObjectSchema<Settings>;
  /**
   * The driver settings the v1 environment variables define (GOOGLE_CLOUD_PROJECT, DATA_DIR, …)
   * when DATA_STORE names this driver, before validation by `settings`. Absent for drivers that
   * are configured through STORES_FILE only.
   */
  readonly fromEnvironment?: (env: Readonly<Record<string, string>>) => Record<string, unknown>;
  /** The instances served when the v1 variables name this driver and INSTANCE_IDS is unset; absent: INSTANCE_IDS is required. */
  readonly defaultInstances?: readonly string[];
  /**
   * The local resources a store holds exclusively (a data directory, resolved to an absolute
   * path), by the setting that names each. Two stores of one process may not name the same one.
   */
  readonly exclusiveResources?: (settings: Settings) => Readonly<Record<string, string>>;
  readonly capabilities: StoreCapabilities;
  readonly limits: StoreLimits;
  /** What the start-up log line says of a store (project, emulator host, data directory); never a secret. */
  describe(settings: Settings): Record<string, unknown>;
  /**
   * Opens a store. Throws a StoreError when it cannot be opened at all (the embedded store's
   * directory is locked or unwritable). It should not wait for a remote backend: one that is
   * down at start-up is reported by checkHealth, and the service starts anyway.
   *
   * It imports the store's module, and so the backend's client, only then: a process loads the
   * clients of the stores it serves and no others. Loaded up front, the four clients took tens of
   * MiB of heap in every process, whichever stores it served (figures: docs/performance.md).
   */
  open(store: StoreDefinition<Settings>, context: DriverContext): Promise<DataStore>;
}

/** One configured store: its name, the instances it serves and its validated driver settings. */
export interface StoreDefinition<Settings extends object = object> {
  readonly name: string;
  readonly instances: readonly string[];
  readonly settings: Settings;
}

export interface DriverContext {
  readonly logger: Logger;
  /** Told, by drivers that coalesce single-row calls, how many callers each backend call served. */
  readonly onBatch?: (store: string, operation: string, size: number) => void;
}
