import { type Attributes, type Context, type Span, SpanKind, SpanStatusCode, type Tracer, context, trace } from '@opentelemetry/api';
import type { Histogram } from 'prom-client';
import { StoreError, callerGone, isStoreError } from './errors.ts';
import type {
  CallOptions,
  ChangeEvent,
  ChangeStart,
  ConditionalMutations,
  DataStore,
  FeedOptions,
  FamilySpec,
  ModifyRule,
  Mutation,
  ReadSelection,
  Row,
  RowMutations,
  ScanRequest,
  StoreCapabilities,
  StoreLimits,
  TableRef,
  TableSchema,
} from './store.ts';
import { type NamedStore, type StoreSet, createStoreSet } from './store-set.ts';

export interface StoreInstrumentation {
  /** Observes each call's duration, labelled by store name, operation and outcome code. */
  readonly duration: Histogram<'store' | 'operation' | 'code'>;
  /** Opens a span per call; the backend's own calls (gRPC) become its children. */
  readonly tracer: Tracer;
}

/** Who the wrapped store is, for labels: the operator's name for it and its driver's. */
export interface StoreIdentity {
  readonly name: string;
  readonly driver: string;
}

/**
 * InstrumentedStore wraps a DataStore so that every driver gets the same checks, metrics and
 * spans without knowing of them. Before each call it refuses one whose deadline has passed or
 * whose caller has gone (so drivers need not check); each call is then one span named
 * `DataStore.<operation>` and one histogram sample labelled by the store's name, whose `code` is
 * OK or the StoreError code it failed with. Results and errors pass through untouched.
 *
 * Spans name the store, instance and table, and count what a call carries; row keys, key ranges,
 * columns and values are the caller's data and never become attributes.
 */
export class InstrumentedStore implements DataStore {
  readonly capabilities: StoreCapabilities;
  readonly limits: StoreLimits;
  readonly #store: DataStore;
  readonly #identity: StoreIdentity;
  readonly #instrumentation: StoreInstrumentation;

  constructor(store: DataStore, identity: StoreIdentity, instrumentation: StoreInstrumentation) {
    this.capabilities = store.capabilities;
    this.limits = store.limits;
    this.#store = store;
    this.#identity = identity;
    this.#instrumentation = instrumentation;
  }

  createTable(ref: TableRef, families: readonly FamilySpec[], options: CallOptions): Promise<void> {
    return this.#observe('createTable', tableAttributes(ref), options, () => this.#store.createTable(ref, families, options));
  }

  describeTable(ref: TableRef, options: CallOptions): Promise<TableSchema> {
    return this.#observe('describeTable', tableAttributes(ref), options, () => this.#store.describeTable(ref, options));
  }

  listTables(instance: string, options: CallOptions): Promise<string[]> {
    return this.#observe('listTables', { 'db.namespace': instance }, options, () => this.#store.listTables(instance, options));
  }

  deleteTable(ref: TableRef, options: CallOptions): Promise<void> {
    return this.#observe('deleteTable', tableAttributes(ref), options, () => this.#store.deleteTable(ref, options));
  }

  mutateRow(ref: TableRef, key: Buffer, mutations: readonly Mutation[], options: CallOptions): Promise<void> {
    const attributes = { ...tableAttributes(ref), 'kvcrud.mutations': mutations.length };
    return this.#observe('mutateRow', attributes, options, () => this.#store.mutateRow(ref, key, mutations, options));
  }

  mutateRows(ref: TableRef, entries: readonly RowMutations[], options: CallOptions): Promise<Array<StoreError | undefined>> {
    const attributes = { ...tableAttributes(ref), 'db.operation.batch.size': entries.length };
    return this.#observe('mutateRows', attributes, options, async (span) => {
      const results = await this.#store.mutateRows(ref, entries, options);
      // The call succeeded as a whole; the entries that did not are counted, not listed.
      span.setAttribute('kvcrud.entries.failed', results.filter((result) => result !== undefined).length);
      return results;
    });
  }

  readRows(ref: TableRef, keys: readonly Buffer[], selection: ReadSelection, options: CallOptions): Promise<Array<Row | null>> {
    const attributes = { ...tableAttributes(ref), 'db.operation.batch.size': keys.length, 'kvcrud.versions': selection.versions };
    return this.#observe('readRows', attributes, options, () => this.#store.readRows(ref, keys, selection, options));
  }

  checkAndMutateRow(ref: TableRef, key: Buffer, check: ConditionalMutations, options: CallOptions): Promise<boolean> {
    const attributes = {
      ...tableAttributes(ref),
      'kvcrud.conditions': check.conditions.length,
      'kvcrud.mutations': check.mutations.length,
      'kvcrud.mutations.otherwise': check.otherwise.length,
    };
    return this.#observe('checkAndMutateRow', attributes, options, async (span) => {
      const matched = await this.#store.checkAndMutateRow(ref, key, check, options);
      span.setAttribute('kvcrud.matched', matched);
      return matched;
    });
  }

  readModifyWriteRow(ref: TableRef, key: Buffer, rules: readonly ModifyRule[], options: CallOptions): Promise<Row> {
    const attributes = { ...tableAttributes(ref), 'kvcrud.rules': rules.length };
    return this.#observe('readModifyWriteRow', attributes, options, () => this.#store.readModifyWriteRow(ref, key, rules, options));
  }

  /**
   * A feed lasts as long as its reader: its time is not a store call's, and it is not measured
   * or traced as one. Its start is checked as every call's is.
   */
  readChanges(ref: TableRef, start: ChangeStart, options: FeedOptions): AsyncIterable<ChangeEvent> {
    if (options.signal.aborted) throw callerGone();
    return this.#store.readChanges(ref, start, options);
  }

  /**
   * The span and the measured time cover the whole iteration: from the first next() until the
   * store has no more rows, fails, or the caller stops (break, return()), which is then passed
   * on so that the store releases the scan.
   */
  scanRows(ref: TableRef, scan: ScanRequest, options: CallOptions): AsyncIterable<Row> {
    return { [Symbol.asyncIterator]: () => this.#scan(ref, scan, options) };
  }

  checkHealth(options: CallOptions): Promise<void> {
    return this.#observe('checkHealth', {}, options, () => this.#store.checkHealth(options));
  }

  close(): Promise<void> {
    return this.#store.close();
  }

  async *#scan(ref: TableRef, scan: ScanRequest, options: CallOptions): AsyncGenerator<Row, void, undefined> {
    const attributes = { ...tableAttributes(ref), 'kvcrud.scan.limit': scan.limit, 'kvcrud.scan.reverse': scan.reverse, 'kvcrud.versions': scan.versions };
    const { spanContext, end, span } = this.#start('scanRows', attributes);
    let rows = 0;
    let iterator: AsyncIterator<Row> | undefined;
    let finished = false;
    const finish = (code: string, error?: unknown) => {
      finished = true;
      span.setAttribute('kvcrud.rows', rows);
      end(code, error);
    };
    try {
      checkCallable(options);
      const source = context.with(spanContext, () => this.#store.scanRows(ref, scan, options)[Symbol.asyncIterator]());
      iterator = source;
      for (;;) {
        const next = await context.with(spanContext, () => source.next());
        if (next.done === true) break;
        rows += 1;
        yield next.value;
      }
      finish('OK');
    } catch (error) {
      finish(outcomeCode(error), error);
      throw error;
    } finally {
      // The caller stopped early (break, return()): release the store's scan, then end the call.
      if (!finished) {
        try {
          await context.with(spanContext, () => iterator?.return?.());
          finish('OK');
        } catch (error) {
          finish(outcomeCode(error), error);
        }
      }
    }
  }

  #observe<T>(operation: string, attributes: Attributes, options: CallOptions, call: (span: Span) => Promise<T>): Promise<T> {
    const { span, spanContext, end } = this.#start(operation, attributes);
    return context.with(spanContext, async () => {
      try {
        checkCallable(options);
        const result = await call(span);
        end('OK');
        return result;
      } catch (error) {
        end(outcomeCode(error), error);
        throw error;
      }
    });
  }

  /** Opens the call's span and timer; `end` closes both once, with the outcome. */
  #start(operation: string, attributes: Attributes): { span: Span; spanContext: Context; end: (code: string, error?: unknown) => void } {
    const { duration, tracer } = this.#instrumentation;
    const endTimer = duration.startTimer({ store: this.#identity.name, operation });
    const span = tracer.startSpan(`DataStore.${operation}`, {
      kind: SpanKind.INTERNAL,
      attributes: { 'db.system.name': this.#identity.driver, 'db.operation.name': operation, 'kvcrud.store': this.#identity.name, ...attributes },
    });
    let ended = false;
    const end = (code: string, error?: unknown) => {
      if (ended) return;
      ended = true;
      endTimer({ code });
      if (code !== 'OK') recordFailure(span, code, error);
      span.end();
    };
    return { span, spanContext: trace.setSpan(context.active(), span), end };
  }
}

/**
 * instrumentStores wraps every store of `stores` in an InstrumentedStore labelled by its name:
 * the StoreSet the service calls.
 */
export function instrumentStores(stores: StoreSet, instrumentation: StoreInstrumentation): StoreSet {
  const wrapped: NamedStore[] = stores.all.map((named) => ({
    ...named,
    store: new InstrumentedStore(named.store, named, instrumentation),
  }));
  return createStoreSet(wrapped, stores.default.name);
}

/**
 * The check every call passes before it reaches a store: a caller that has gone, or a deadline
 * already past, starts no work.
 */
function checkCallable(options: CallOptions): void {
  if (options.signal?.aborted === true) throw callerGone();
  if (Date.now() >= options.deadline) throw new StoreError('DEADLINE_EXCEEDED', 'the deadline passed before the call started');
}

function tableAttributes(ref: TableRef): Attributes {
  return { 'db.namespace': ref.instance, 'db.collection.name': ref.table };
}

/** Drivers fail only with StoreErrors; anything else is a bug, which the API reports as INTERNAL. */
export function outcomeCode(error: unknown): string {
  return isStoreError(error) ? error.code : 'INTERNAL';
}

export function recordFailure(span: Span, code: string, error: unknown): void {
  span.setAttribute('error.type', code);
  span.setStatus({ code: SpanStatusCode.ERROR, message: code });
  if (error instanceof Error) span.recordException(error);
}
