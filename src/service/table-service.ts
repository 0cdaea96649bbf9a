import { isStoreError } from '../store/errors.ts';
import type { CallOptions, DataStore } from '../store/legacy-store.ts';
import { type CellInput, type CellOutput, cellBytes, toCellOutput } from './cells.ts';
import { ApiError, IncompleteOperationError } from './errors.ts';
import { WriteClock } from './timestamps.ts';

export interface CreateTableInput {
  readonly tableName: string;
  readonly columnFamily: string;
}
export interface CreateTableResult extends CreateTableInput {
  readonly instanceID: string;
}

export interface InsertDataInput {
  readonly tableName: string;
  readonly rowKeyId: string;
  readonly data: readonly CellInput[];
}
export interface InsertDataResult {
  readonly instanceID: string;
  readonly tableName: string;
  readonly rowKeyId: string;
  readonly cellsWritten: number;
}

export interface ReadCellDataInput {
  readonly tableName: string;
  readonly id: string;
}
export interface ReadCellDataResult {
  readonly instanceID: string;
  readonly tableName: string;
  readonly rowKeyId: string;
  readonly data: CellOutput[];
}

export interface DeleteTableInput {
  readonly tableList: readonly string[];
}
export interface DeleteTableResult {
  readonly instanceID: string;
  readonly deleted: string[];
}

/** What the service needs to know about the request it works for. */
export interface RequestOptions {
  /** Aborted when the caller has gone: store calls are then cancelled rather than finished. */
  readonly signal?: AbortSignal;
}

export interface TableServiceDeps {
  readonly store: DataStore;
  readonly instanceIds: readonly string[];
  /** Deadline of each store call, from when the service makes it. */
  readonly storeTimeoutMs: number;
  readonly clock?: WriteClock;
}

/**
 * TableService holds the rules of the v1 API that do not depend on HTTP: which instances are
 * served, how cells map to bytes, who assigns timestamps, and what deleting several tables means.
 * Its inputs have passed the request schemas already.
 */
export class TableService {
  readonly #store: DataStore;
  readonly #instanceIds: ReadonlySet<string>;
  readonly #storeTimeoutMs: number;
  readonly #clock: WriteClock;

  constructor(deps: TableServiceDeps) {
    this.#store = deps.store;
    this.#instanceIds = new Set(deps.instanceIds);
    this.#storeTimeoutMs = deps.storeTimeoutMs;
    this.#clock = deps.clock ?? new WriteClock();
  }

  /** Throws INSTANCE_NOT_FOUND unless the service is configured to serve the instance. */
  requireInstance(instanceID: string): void {
    if (!this.#instanceIds.has(instanceID)) {
      throw new ApiError('INSTANCE_NOT_FOUND', `Instance "${shorten(instanceID)}" is not served by this service.`);
    }
  }

  async createTable(instanceID: string, input: CreateTableInput, options: RequestOptions = {}): Promise<CreateTableResult> {
    this.requireInstance(instanceID);
    await this.#store.createTable({ instance: instanceID, table: input.tableName }, [input.columnFamily], this.#callOptions(options));
    return { instanceID, tableName: input.tableName, columnFamily: input.columnFamily };
  }

  /** Writes every cell of the request to the row in one atomic mutation, all with one timestamp. */
  async insertData(instanceID: string, input: InsertDataInput, options: RequestOptions = {}): Promise<InsertDataResult> {
    this.requireInstance(instanceID);
    const timestampMicros = this.#clock.next();
    const cells = input.data.map((cell) => ({ family: cell.columnFamily, ...cellBytes(cell), timestampMicros }));
    await this.#store.writeRow(
      { instance: instanceID, table: input.tableName },
      Buffer.from(input.rowKeyId, 'utf8'),
      cells,
      this.#callOptions(options),
    );
    return { instanceID, tableName: input.tableName, rowKeyId: input.rowKeyId, cellsWritten: cells.length };
  }

  /** Returns the latest version of each column of the row. */
  async readCellData(instanceID: string, input: ReadCellDataInput, options: RequestOptions = {}): Promise<ReadCellDataResult> {
    this.requireInstance(instanceID);
    const cells = await this.#store.readRow(
      { instance: instanceID, table: input.tableName },
      Buffer.from(input.id, 'utf8'),
      this.#callOptions(options),
    );
    if (cells === null) {
      throw new ApiError('ROW_NOT_FOUND', `Row "${shorten(input.id)}" does not exist in table "${input.tableName}".`);
    }
    return { instanceID, tableName: input.tableName, rowKeyId: input.id, data: cells.map(toCellOutput) };
  }

  /**
   * Deletes the named tables, in the order given. All must exist first: if any is missing,
   * nothing is deleted. If the store fails part-way, the error says which tables were deleted.
   * A table that disappears between the check and its deletion counts as deleted.
   */
  async deleteTables(instanceID: string, input: DeleteTableInput, options: RequestOptions = {}): Promise<DeleteTableResult> {
    this.requireInstance(instanceID);
    const existing = new Set(await this.#store.listTables(instanceID, this.#callOptions(options)));
    const missing = input.tableList.filter((name) => !existing.has(name));
    if (missing.length > 0) {
      throw new ApiError(
        'TABLE_NOT_FOUND',
        `No table was deleted: ${missing.length === 1 ? 'table' : 'tables'} ${missing.map((name) => `"${name}"`).join(', ')} ` +
          `${missing.length === 1 ? 'does' : 'do'} not exist in instance "${instanceID}".`,
        { notFound: missing },
      );
    }

    const deleted: string[] = [];
    for (const [index, table] of input.tableList.entries()) {
      try {
        await this.#store.deleteTable({ instance: instanceID, table }, this.#callOptions(options));
      } catch (error) {
        if (!isStoreError(error, 'NOT_FOUND')) {
          throw new IncompleteOperationError(error, { deleted, notDeleted: input.tableList.slice(index) });
        }
      }
      deleted.push(table);
    }
    return { instanceID, deleted };
  }

  #callOptions(request: RequestOptions): CallOptions {
    const deadline = Date.now() + this.#storeTimeoutMs;
    return request.signal === undefined ? { deadline } : { deadline, signal: request.signal };
  }
}

/** Caller input quoted in a detail message, cut so a 4 KiB row key does not flood the answer. */
function shorten(text: string): string {
  return text.length <= 100 ? text : `${text.slice(0, 100)}…`;
}
