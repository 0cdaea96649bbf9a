import { type Attributes, SpanKind } from '@opentelemetry/api';
import { type StoreInstrumentation, outcomeCode, recordFailure } from './instrumented-store.ts';
import type { CallOptions, Cell, CellWrite, DataStore, TableRef } from './legacy-store.ts';

/**
 * LegacyInstrumentedStore measures and traces the v1 service's calls to the default store through
 * the legacy contract (legacy-store.ts), as InstrumentedStore does for DataStore. Each call is
 * one span named `DataStore.<operation>` and one histogram sample labelled by the store's name,
 * whose `code` is OK or the StoreError code it failed with. Results and errors pass through
 * untouched. It goes with the legacy contract, once the service speaks DataStore.
 */
export class LegacyInstrumentedStore implements DataStore {
  readonly type: string;
  readonly #name: string;
  readonly #store: DataStore;
  readonly #instrumentation: StoreInstrumentation;

  constructor(store: DataStore, name: string, instrumentation: StoreInstrumentation) {
    this.type = store.type;
    this.#name = name;
    this.#store = store;
    this.#instrumentation = instrumentation;
  }

  createTable(ref: TableRef, families: readonly string[], options: CallOptions): Promise<void> {
    return this.#observe('createTable', tableAttributes(ref), () => this.#store.createTable(ref, families, options));
  }

  deleteTable(ref: TableRef, options: CallOptions): Promise<void> {
    return this.#observe('deleteTable', tableAttributes(ref), () => this.#store.deleteTable(ref, options));
  }

  listTables(instance: string, options: CallOptions): Promise<string[]> {
    return this.#observe('listTables', { 'db.namespace': instance }, () => this.#store.listTables(instance, options));
  }

  writeRow(ref: TableRef, rowKey: Buffer, cells: readonly CellWrite[], options: CallOptions): Promise<void> {
    // Row keys and cell contents are the caller's data: never span attributes.
    return this.#observe('writeRow', { ...tableAttributes(ref), 'kvcrud.cells': cells.length }, () =>
      this.#store.writeRow(ref, rowKey, cells, options),
    );
  }

  readRow(ref: TableRef, rowKey: Buffer, options: CallOptions): Promise<Cell[] | null> {
    return this.#observe('readRow', tableAttributes(ref), () => this.#store.readRow(ref, rowKey, options));
  }

  checkHealth(options: CallOptions): Promise<void> {
    return this.#observe('checkHealth', {}, () => this.#store.checkHealth(options));
  }

  close(): Promise<void> {
    return this.#store.close();
  }

  #observe<T>(operation: string, attributes: Attributes, call: () => Promise<T>): Promise<T> {
    const { duration, tracer } = this.#instrumentation;
    const endTimer = duration.startTimer({ store: this.#name, operation });
    const spanAttributes = { 'db.system.name': this.type, 'db.operation.name': operation, 'kvcrud.store': this.#name, ...attributes };
    return tracer.startActiveSpan(`DataStore.${operation}`, { kind: SpanKind.INTERNAL, attributes: spanAttributes }, async (span) => {
      try {
        const result = await call();
        endTimer({ code: 'OK' });
        return result;
      } catch (error) {
        const code = outcomeCode(error);
        endTimer({ code });
        recordFailure(span, code, error);
        throw error;
      } finally {
        span.end();
      }
    });
  }
}

function tableAttributes(ref: TableRef): Attributes {
  return { 'db.namespace': ref.instance, 'db.collection.name': ref.table };
}
