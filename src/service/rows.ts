import type { NamedStore } from '../store/store-set.ts';
import type { ColumnSelector, Condition, Micros, ModifyRule, ReadSelection, Row, RowMutations, TableRef } from '../store/store.ts';
import { isStoreError } from '../store/errors.ts';
import { answerSubject } from './answer-sizes.ts';
import { type ConditionalFields, type ConditionalInput, checkConditional, checkRules } from './coordination-limits.ts';
import { ApiError } from './errors.ts';
import { prefixRange } from './key-ranges.ts';
import { DEFAULT_PAGE_SIZE, SERVICE_LIMITS, notSupported, overLimit, tooMany, tooManyBytes } from './limits.ts';
import { type MutationFields, type MutationInput, checkKey, checkRowMutations, rowMutationsInSlices, withTimestamps } from './mutations.ts';
import { type ScanQuery, decodePageToken } from './page-tokens.ts';
import { type RequestOptions, callOptions } from './requests.ts';
import { ReadAdmission } from './read-admission.ts';
import { type ScanPage, readPage } from './scan-pages.ts';
import { apiErrorOf } from './store-errors.ts';
import type { StoreDirectory } from './stores.ts';
import type { TableTarget } from './tables.ts';
import { WriteClock } from './timestamps.ts';

export type { ConditionalFields, ConditionalInput, MutationFields, MutationInput, ScanPage };

/** Which cells of a row to read: some columns or families (all when absent), and how many versions of each. */
export interface Selection {
  readonly columns?: readonly ColumnSelector[] | undefined;
  readonly versions: number;
}

/** The names of the request fields a selection comes from, for errors. */
export interface SelectionFields {
  readonly columns: string;
  readonly versions: string;
}

const SELECTION_FIELDS: SelectionFields = { columns: 'columns', versions: 'versions' };

/** One entry of a batch write; with `check`, a conditional one. */
export interface EntryInput {
  readonly key: Buffer;
  readonly mutations: readonly MutationInput[];
  readonly fields: MutationFields;
  readonly check?: EntryCheck | undefined;
}

/** The conditions of a conditional batch entry, and what it applies when one does not hold. */
export interface EntryCheck {
  readonly conditions: readonly Condition[];
  readonly otherwise: readonly MutationInput[];
  readonly fields: { readonly conditions: string; readonly otherwise: MutationFields };
}

/** The outcome of one batch entry: `error` when it failed; `matched` for a conditional one applied. */
export interface EntryResult {
  readonly error?: ApiError;
  readonly matched?: boolean;
}

/** A scan as a request asks for it: `prefix` excludes `start` and `end`. */
export interface ScanInput extends Selection {
  readonly start?: Buffer | undefined;
  readonly end?: Buffer | undefined;
  readonly prefix?: Buffer | undefined;
  readonly reverse: boolean;
  /** Most rows over all pages; undefined for no limit. */
  readonly limit?: number | undefined;
  /** Most rows in this page; DEFAULT_PAGE_SIZE (at most the store's rowsPerPage) when absent. */
  readonly pageSize?: number | undefined;
  readonly pageToken?: string | undefined;
}

export interface RowServiceDeps {
  readonly stores: StoreDirectory;
  /** Deadline of each store call, from when the service makes it. */
  readonly storeTimeoutMs: number;
  /** The wall clock for write timestamps, in milliseconds; Date.now unless given. */
  readonly now?: () => number;
}

/**
 * RowService holds the rules for rows that do not depend on HTTP: every request is checked
 * against the target store's published limits and capabilities before the store is called
 * (a 400 naming the limit, a 501 naming the capability), write timestamps are assigned at the
 * store's granularity, prefixes become key ranges, and scans are paged with tokens
 * (page-tokens.ts, scan-pages.ts). Inputs have passed the request schemas already.
 */
export class RowService {
  readonly #stores: StoreDirectory;
  readonly #timeoutMs: number;
  readonly #clocks = new Map<string, WriteClock>();
  readonly #admission = new ReadAdmission();
  readonly #now: () => number;

  constructor(deps: RowServiceDeps) {
    this.#stores = deps.stores;
    this.#timeoutMs = deps.storeTimeoutMs;
    this.#now = deps.now ?? Date.now;
  }

  /**
   * The row with the selected cells, or null when it has none. A large row is counted in the
   * request's answer budget as a batchGet of one key is (HELD_ROW_BYTES, read-admission.ts).
   */
  async read(target: TableTarget, key: Buffer, selection: Selection, keyField: string, request: RequestOptions = {}): Promise<Row | null> {
    const named = this.#stores.instance(target.store, target.instance);
    checkKey(named.store.limits, key, keyField);
    const readSelection = this.#selection(named, selection);
    const subject = answerSubject(tableName(target), readSelection);
    return this.#admission.readRow(request.answer, subject, key, () =>
      named.store.readRows(ref(target), [key], readSelection, callOptions(this.#timeoutMs, request)),
    );
  }

  /**
   * One answer per key, in the order of `keys` (which may repeat): the row, or null when it has no
   * selected cell. The answer cannot end early: it waits for room in the request's answer budget
   * for what it is expected to hold before it reads, and for all it read before it is rendered, or
   * is refused with 503 OVERLOADED (read-admission.ts).
   */
  async readMany(target: TableTarget, keys: readonly Buffer[], selection: Selection, request: RequestOptions = {}): Promise<Array<Row | null>> {
    const named = this.#stores.instance(target.store, target.instance);
    const { limits } = named.store;
    if (keys.length > limits.entriesPerBatch) throw tooMany('entriesPerBatch', 'keys', keys.length, limits.entriesPerBatch, 'keys');
    for (const [index, key] of keys.entries()) checkKey(limits, key, `keys[${index}]`);
    // Refused before it waits for room: bad input is answered at once.
    const readSelection = this.#selection(named, selection);
    const subject = answerSubject(tableName(target), readSelection);
    return this.#admission.readRows(request.answer, subject, keys, () =>
      named.store.readRows(ref(target), keys, readSelection, callOptions(this.#timeoutMs, request)),
    );
  }

  /**
   * Applies the mutations to the row atomically and in order. Sets without a timestamp all get
   * the same one, assigned now at the store's granularity. Resolves to the number applied.
   */
  async mutate(target: TableTarget, key: Buffer, mutations: readonly MutationInput[], fields: MutationFields, request: RequestOptions = {}): Promise<number> {
    const named = this.#stores.instance(target.store, target.instance);
    // A row of many cells is checked, then stamped, a slice at a time; a tall one goes to the store after a yield.
    const stamped = await rowMutationsInSlices(named.store.limits, key, mutations, fields, () => this.#clock(named).next());
    await named.store.mutateRow(ref(target), key, stamped, callOptions(this.#timeoutMs, request));
    return mutations.length;
  }

  /**
   * Applies each entry atomically on its own, the batch not. Resolves to one result per entry, in
   * entry order: `matched` for an entry with conditions, or the error of that entry alone. An
   * entry beyond a per-row limit fails on its own and is not sent to the store; a batch beyond a
   * per-batch limit is refused as a whole, and so is one the store fails as a whole (missing
   * table, deadline).
   *
   * Entries naming the same row are applied in entry order. Without conditions the batch is one
   * store call. With them it goes in waves: wave n holds the n-th entry of each row, its plain
   * entries one mutateRows call and its conditional ones a checkAndMutateRow each, all at once.
   */
  async mutateMany(target: TableTarget, entries: readonly EntryInput[], request: RequestOptions = {}): Promise<EntryResult[]> {
    const named = this.#stores.instance(target.store, target.instance);
    const { limits, capabilities } = named.store;
    if (entries.length > limits.entriesPerBatch) {
      throw tooMany('entriesPerBatch', 'entries', entries.length, limits.entriesPerBatch, 'entries');
    }
    const conditional = entries.some((entry) => entry.check !== undefined);
    if (conditional && !capabilities.checkAndMutate) throw notSupported(named.name, 'checkAndMutate');
    const mutationCount = entries.reduce((sum, entry) => sum + entry.mutations.length + (entry.check?.otherwise.length ?? 0), 0);
    if (mutationCount > limits.mutationsPerBatch) {
      throw tooMany('mutationsPerBatch', 'entries', mutationCount, limits.mutationsPerBatch, 'mutations');
    }

    const results: EntryResult[] = [];
    const accepted: number[] = [];
    let bytes = 0;
    for (const [index, entry] of entries.entries()) {
      try {
        bytes +=
          entry.check === undefined
            ? checkRowMutations(limits, entry.key, entry.mutations, entry.fields)
            : checkConditional(limits, entry.key, { ...entry.check, mutations: entry.mutations }, { ...entry.check.fields, key: entry.fields.key, mutations: entry.fields });
        accepted.push(index);
        results.push(entry.check === undefined ? {} : { matched: false });
      } catch (error) {
        if (!(error instanceof ApiError)) throw error;
        results.push({ error });
      }
    }
    if (bytes > limits.bytesPerBatch) throw tooManyBytes('bytesPerBatch', 'entries', bytes, limits.bytesPerBatch);
    if (accepted.length === 0) return results;

    const timestamp = this.#clock(named).next();
    const waves = conditional ? inWaves(accepted, (index) => (entries[index] as EntryInput).key) : [accepted];
    for (const wave of waves) {
      const plain = wave.filter((index) => entries[index]?.check === undefined);
      const checked = wave.filter((index) => entries[index]?.check !== undefined);
      await Promise.all([
        this.#applyPlain(named, target, entries, plain, timestamp, results, request),
        ...checked.map((index) => this.#applyChecked(named, target, entries[index] as EntryInput, timestamp, index, results, request)),
      ]);
    }
    return results;
  }

  /**
   * Applies the conditional mutation to the row in one atomic step of the store: `mutations` when
   * every condition holds, `otherwise` when one does not. Sets without a timestamp all get the
   * same one, assigned now. Resolves to whether the conditions held.
   */
  async checkAndMutate(target: TableTarget, key: Buffer, input: ConditionalInput, fields: ConditionalFields, request: RequestOptions = {}): Promise<boolean> {
    const named = this.#stores.instance(target.store, target.instance);
    if (!named.store.capabilities.checkAndMutate) throw notSupported(named.name, 'checkAndMutate');
    checkConditional(named.store.limits, key, input, fields);
    const timestamp = this.#clock(named).next();
    const check = { conditions: input.conditions, mutations: withTimestamps(input.mutations, timestamp), otherwise: withTimestamps(input.otherwise, timestamp) };
    return named.store.checkAndMutateRow(ref(target), key, check, callOptions(this.#timeoutMs, request));
  }

  /**
   * Applies the increments and appends to the row in one atomic step of the store, and resolves
   * to the new latest version of each column they touched.
   */
  async readModifyWrite(target: TableTarget, key: Buffer, rules: readonly ModifyRule[], keyField: string, request: RequestOptions = {}): Promise<Row> {
    const named = this.#stores.instance(target.store, target.instance);
    if (!named.store.capabilities.readModifyWrite) throw notSupported(named.name, 'readModifyWrite');
    checkRules(named.store.limits, key, rules, keyField, 'rules');
    return named.store.readModifyWriteRow(ref(target), key, rules, callOptions(this.#timeoutMs, request));
  }

  async #applyPlain(
    named: NamedStore,
    target: TableTarget,
    entries: readonly EntryInput[],
    indexes: readonly number[],
    timestamp: Micros,
    results: EntryResult[],
    request: RequestOptions,
  ): Promise<void> {
    if (indexes.length === 0) return;
    const batch: RowMutations[] = indexes.map((index) => {
      const entry = entries[index] as EntryInput;
      return { key: entry.key, mutations: withTimestamps(entry.mutations, timestamp) };
    });
    const outcomes = await named.store.mutateRows(ref(target), batch, callOptions(this.#timeoutMs, request));
    for (const [position, index] of indexes.entries()) {
      const outcome = outcomes[position];
      if (outcome !== undefined) results[index] = { error: isStoreError(outcome) ? apiErrorOf(outcome) : outcome };
    }
  }

  async #applyChecked(named: NamedStore, target: TableTarget, entry: EntryInput, timestamp: Micros, index: number, results: EntryResult[], request: RequestOptions): Promise<void> {
    const check = entry.check as EntryCheck;
    const conditional = { conditions: check.conditions, mutations: withTimestamps(entry.mutations, timestamp), otherwise: withTimestamps(check.otherwise, timestamp) };
    try {
      results[index] = { matched: await named.store.checkAndMutateRow(ref(target), entry.key, conditional, callOptions(this.#timeoutMs, request)) };
    } catch (error) {
      // A missing family is this entry's alone; anything else fails the batch, as for mutateRows.
      if (isStoreError(error, 'NOT_FOUND') && error.resource === 'columnFamily') results[index] = { error: apiErrorOf(error) };
      else throw error;
    }
  }

  /**
   * One page of rows in key byte order (descending with `reverse`), from the page token's
   * position when there is one. The token is bound to the table and to the query: range,
   * direction, columns, versions and limit (pageSize may change between pages).
   */
  async scan(target: TableTarget, input: ScanInput, request: RequestOptions = {}): Promise<ScanPage> {
    const named = this.#stores.instance(target.store, target.instance);
    const { limits, capabilities } = named.store;
    if (input.reverse && !capabilities.reverseScan) throw notSupported(named.name, 'reverseScan');
    const pageSize = input.pageSize ?? Math.min(DEFAULT_PAGE_SIZE, limits.rowsPerPage);
    if (pageSize > limits.rowsPerPage) {
      throw overLimit('rowsPerPage', 'pageSize', `pageSize is ${pageSize}, more than the ${limits.rowsPerPage} rows a page of this store holds`);
    }
    for (const [field, bound] of [['start', input.start], ['end', input.end], ['prefix', input.prefix]] as const) {
      if (bound !== undefined && bound.length > limits.keyBytes) throw tooManyBytes('keyBytes', field, bound.length, limits.keyBytes);
    }
    const selection = this.#selection(named, input);
    // An empty bound is no bound, as in Bigtable's row ranges.
    const range = input.prefix === undefined ? { ...optional('start', input.start), ...optional('end', input.end) } : prefixRange(input.prefix);
    const query: ScanQuery = { store: named.name, instance: target.instance, table: target.table, range, reverse: input.reverse, ...selection, limit: input.limit };
    const position = input.pageToken === undefined ? undefined : decodePageToken(query, input.pageToken);
    const options = () => callOptions(this.#timeoutMs, request);
    if (range.start !== undefined && range.end !== undefined && Buffer.compare(range.start, range.end) >= 0) {
      // An empty range has no rows, but a missing table is still reported.
      await named.store.describeTable(ref(target), options());
      return { rows: [] };
    }
    return readPage(named.store, ref(target), query, pageSize, position, options, request.answer);
  }

  /** The store's ReadSelection, once the request's fits the store's limits and capabilities. */
  #selection(named: NamedStore, selection: Selection, fields: SelectionFields = SELECTION_FIELDS): ReadSelection {
    const { limits, capabilities } = named.store;
    if (selection.versions > 1 && !capabilities.multipleVersions) throw notSupported(named.name, 'multipleVersions');
    if (selection.versions > limits.versionsPerRead) {
      throw overLimit('versionsPerRead', fields.versions, `${fields.versions} is ${selection.versions}, more than the ${limits.versionsPerRead} this store reads`);
    }
    const columns = selection.columns;
    if (columns === undefined) return { versions: selection.versions };
    if (columns.length > SERVICE_LIMITS.columnsPerRead) {
      throw tooMany('columnsPerRead', fields.columns, columns.length, SERVICE_LIMITS.columnsPerRead, 'column selectors');
    }
    for (const [index, selector] of columns.entries()) {
      if (selector.column !== undefined && selector.column.length > limits.columnBytes) {
        throw tooManyBytes('columnBytes', `${fields.columns}[${index}]`, selector.column.length, limits.columnBytes);
      }
    }
    return { columns, versions: selection.versions };
  }

  #clock(named: NamedStore): WriteClock {
    let clock = this.#clocks.get(named.name);
    if (clock === undefined) {
      clock = new WriteClock(this.#now, named.store.limits.timestampGranularityMicros);
      this.#clocks.set(named.name, clock);
    }
    return clock;
  }
}

/**
 * The entries as waves in which no row appears twice: wave n holds the n-th entry of each row,
 * so that waves applied one after the other apply each row's entries in entry order.
 */
function inWaves(indexes: readonly number[], keyOf: (index: number) => Buffer): number[][] {
  const seen = new Map<string, number>();
  const waves: number[][] = [];
  for (const index of indexes) {
    const id = keyOf(index).toString('latin1');
    const wave = seen.get(id) ?? 0;
    seen.set(id, wave + 1);
    (waves[wave] ??= []).push(index);
  }
  return waves;
}

/** A table's name across stores and instances (names hold no slash). */
function tableName(target: TableTarget): string {
  return `${target.store}/${target.instance}/${target.table}`;
}

function ref(target: TableTarget): TableRef {
  return { instance: target.instance, table: target.table };
}

function optional<K extends string>(name: K, value: Buffer | undefined): Partial<Record<K, Buffer>> {
  return value === undefined || value.length === 0 ? {} : ({ [name]: value } as Record<K, Buffer>);
}
