import { type Attributes, type Span, SpanKind, SpanStatusCode, type Tracer } from '@opentelemetry/api';
import type { Histogram } from 'prom-client';
import { isStoreError } from './errors.ts';
import type { CallOptions, Cell, CellWrite, DataStore, TableRef } from './legacy-store.ts';

export interface StoreInstrumentation {
  /** Observes each call's duration, labelled by store type, operation and outcome code. */
  readonly duration: Histogram<'store' | 'operation' | 'code'>;
  /** Opens a span per call; the backend's own calls (gRPC) become its children. */
  readonly tracer: Tracer;
}

/**
 * InstrumentedStore wraps any DataStore so that every adapter gets the same metrics and spans
 * without knowing of them. Each call is one span named `DataStore.<operation>` and one histogram
 * sample whose `code` is OK or the StoreError code it failed with. It changes nothing else:
 * results and errors pass through untouched.
 */
export class InstrumentedStore implements DataStore {
  readonly type: string;
  readonly #store: DataStore;
  readonly #instrumentation: StoreInstrumentation;

  constructor(store: DataStore, instrumentation: StoreInstrumentation) {
    this.type = store.type;
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
    const endTimer = duration.startTimer({ store: this.type, operation });
    const spanAttributes = { 'db.system.name': this.type, 'db.operation.name': operation, ...attributes };
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

/** Adapters fail only with StoreErrors; anything else is a bug, which the API reports as INTERNAL. */
function outcomeCode(error: unknown): string {
  return isStoreError(error) ? error.code : 'INTERNAL';
}

function recordFailure(span: Span, code: string, error: unknown): void {
  span.setAttribute('error.type', code);
  span.setStatus({ code: SpanStatusCode.ERROR, message: code });
  if (error instanceof Error) span.recordException(error);
}
