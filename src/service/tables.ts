import { isStoreError } from '../store/errors.ts';
import type { FamilySpec, TableRef, TableSchema } from '../store/store.ts';
import { ApiError, IncompleteOperationError } from './errors.ts';
import { SERVICE_LIMITS, notSupported, tooMany } from './limits.ts';
import { type RequestOptions, callOptions } from './requests.ts';
import type { StoreDirectory } from './stores.ts';

/** A table of an instance of a named store. */
export interface TableTarget {
  readonly store: string;
  readonly instance: string;
  readonly table: string;
}

export interface TableServiceDeps {
  readonly stores: StoreDirectory;
  /** Deadline of each store call, from when the service makes it. */
  readonly storeTimeoutMs: number;
}

/**
 * TableService holds the rules for tables that do not depend on HTTP: which store and instance
 * serve them, which retention policies a store can honour, the bounds of a request, and what
 * deleting several tables means. Names have passed the request schemas already.
 */
export class TableService {
  readonly #stores: StoreDirectory;
  readonly #timeoutMs: number;

  constructor(deps: TableServiceDeps) {
    this.#stores = deps.stores;
    this.#timeoutMs = deps.storeTimeoutMs;
  }

  /** The names of the instance's tables, in byte order. */
  async list(storeName: string, instance: string, request: RequestOptions = {}): Promise<string[]> {
    const { store } = this.#stores.instance(storeName, instance);
    const names = await store.listTables(instance, callOptions(this.#timeoutMs, request));
    return names.sort(byBytes);
  }

  /**
   * Creates the table with its families (ordered by name in the result). A policy needing a
   * capability the store lacks is refused with 501 before the store is called: a family with no
   * maxVersions, or more than one, keeps several versions.
   */
  async create(target: TableTarget, families: readonly FamilySpec[], request: RequestOptions = {}): Promise<TableSchema> {
    const named = this.#stores.instance(target.store, target.instance);
    const { limits, capabilities } = named.store;
    if (families.length > limits.familiesPerTable) {
      throw tooMany('familiesPerTable', 'families', families.length, limits.familiesPerTable, 'families');
    }
    if (!capabilities.multipleVersions && families.some((family) => family.maxVersions === undefined || family.maxVersions > 1)) {
      throw notSupported(named.name, 'multipleVersions');
    }
    if (!capabilities.maxAge && families.some((family) => family.maxAgeSeconds !== undefined)) {
      throw notSupported(named.name, 'maxAge');
    }
    const sorted = [...families].sort((a, b) => byBytes(a.name, b.name));
    await named.store.createTable(ref(target), sorted, callOptions(this.#timeoutMs, request));
    return { name: target.table, families: sorted };
  }

  /** The table's families and their effective retention policies, ordered by family name. */
  describe(target: TableTarget, request: RequestOptions = {}): Promise<TableSchema> {
    const { store } = this.#stores.instance(target.store, target.instance);
    return store.describeTable(ref(target), callOptions(this.#timeoutMs, request));
  }

  async delete(target: TableTarget, request: RequestOptions = {}): Promise<void> {
    const { store } = this.#stores.instance(target.store, target.instance);
    await store.deleteTable(ref(target), callOptions(this.#timeoutMs, request));
  }

  /**
   * Deletes the named tables (distinct), in the order given. All must exist first: if any is
   * missing, nothing is deleted (404 with `notFound`). If the store fails part-way, the error
   * says which tables were deleted. A table that disappears between the check and its deletion
   * counts as deleted.
   */
  async deleteMany(storeName: string, instance: string, tables: readonly string[], request: RequestOptions = {}): Promise<string[]> {
    const { store } = this.#stores.instance(storeName, instance);
    if (tables.length > SERVICE_LIMITS.tablesPerBatchDelete) {
      throw tooMany('tablesPerBatchDelete', 'tables', tables.length, SERVICE_LIMITS.tablesPerBatchDelete, 'tables');
    }
    const existing = new Set(await store.listTables(instance, callOptions(this.#timeoutMs, request)));
    const missing = tables.filter((name) => !existing.has(name));
    if (missing.length > 0) {
      throw new ApiError(
        'TABLE_NOT_FOUND',
        `No table was deleted: ${missing.length === 1 ? 'table' : 'tables'} ${missing.map((name) => `"${name}"`).join(', ')} ` +
          `${missing.length === 1 ? 'does' : 'do'} not exist in instance "${instance}".`,
        { notFound: missing },
      );
    }

    const deleted: string[] = [];
    for (const [index, table] of tables.entries()) {
      try {
        await store.deleteTable({ instance, table }, callOptions(this.#timeoutMs, request));
      } catch (error) {
        if (!isStoreError(error, 'NOT_FOUND')) {
          throw new IncompleteOperationError(error, { deleted, notDeleted: tables.slice(index) });
        }
      }
      deleted.push(table);
    }
    return deleted;
  }
}

function ref(target: TableTarget): TableRef {
  return { instance: target.instance, table: target.table };
}

/** Names are ASCII, so code unit order is byte order. */
function byBytes(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
