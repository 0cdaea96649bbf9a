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
} from '../../../src/store/store.ts';
import { StoreError } from '../../../src/store/errors.ts';
import type { DriverHarnessFactory } from '../../support/driver-harness.ts';
import { FEED_PROGRESS_MS } from '../../../src/store/store.ts';
import { ContractModel } from './model.ts';

const INT64_MAX = 2n ** 63n - 1n;

/**
 * ModelStore serves the reference model (model.ts) as a DataStore, to test the driver
 * conformance suite itself: the suite must pass against it, for every combination of
 * capabilities. It is strict where a store may trust its caller: any request the service would
 * never send (beyond a limit, needing a missing capability, after the deadline) throws a plain
 * Error, so that a case asking for one fails instead of testing something undefined. And it
 * refuses to close while a scan has not been released.
 */
export class ModelStore implements DataStore {
  readonly capabilities: StoreCapabilities;
  readonly limits: StoreLimits;
  readonly #model: ContractModel;
  readonly #instances: ReadonlySet<string>;
  #openScans = 0;
  #closed = false;

  constructor(capabilities: StoreCapabilities, limits: StoreLimits, instances: readonly string[]) {
    this.capabilities = Object.freeze({ ...capabilities });
    this.limits = Object.freeze({ ...limits });
    this.#model = new ContractModel(capabilities, Date.now, limits.timestampGranularityMicros);
    this.#instances = new Set(instances);
  }

  async createTable(ref: TableRef, families: readonly FamilySpec[], options: CallOptions): Promise<void> {
    await this.#start(options, ref.instance);
    precondition(families.length >= 1 && families.length <= this.limits.familiesPerTable, `${families.length} families`);
    precondition(new Set(families.map((family) => family.name)).size === families.length, 'family names repeat');
    for (const family of families) {
      precondition(/^[\x21-\x7e]+$/.test(family.name), `family name ${family.name} is not printable ASCII`);
      precondition(family.maxVersions === undefined || (Number.isSafeInteger(family.maxVersions) && family.maxVersions >= 1), `maxVersions ${family.maxVersions}`);
      precondition(family.maxAgeSeconds === undefined || (Number.isSafeInteger(family.maxAgeSeconds) && family.maxAgeSeconds >= 1), `maxAgeSeconds ${family.maxAgeSeconds}`);
      precondition(this.capabilities.maxAge || family.maxAgeSeconds === undefined, 'maxAgeSeconds without the maxAge capability');
      precondition(this.capabilities.multipleVersions || family.maxVersions === 1, 'a family keeping several versions without the multipleVersions capability');
    }
    this.#model.createTable(ref, families);
  }

  async describeTable(ref: TableRef, options: CallOptions): Promise<TableSchema> {
    await this.#start(options, ref.instance);
    return this.#model.describeTable(ref);
  }

  async listTables(instance: string, options: CallOptions): Promise<string[]> {
    await this.#start(options, instance);
    return this.#model.listTables(instance);
  }

  async deleteTable(ref: TableRef, options: CallOptions): Promise<void> {
    await this.#start(options, ref.instance);
    this.#model.deleteTable(ref);
  }

  async mutateRow(ref: TableRef, key: Buffer, mutations: readonly Mutation[], options: CallOptions): Promise<void> {
    await this.#start(options, ref.instance);
    this.#checkRow({ key, mutations });
    this.#model.mutateRow(ref, key, mutations);
  }

  async mutateRows(ref: TableRef, entries: readonly RowMutations[], options: CallOptions): Promise<Array<StoreError | undefined>> {
    await this.#start(options, ref.instance);
    precondition(entries.length <= this.limits.entriesPerBatch, `${entries.length} entries`);
    precondition(entries.reduce((sum, entry) => sum + entry.mutations.length, 0) <= this.limits.mutationsPerBatch, 'too many mutations in the batch');
    precondition(entries.reduce((sum, entry) => sum + rowBytes(entry), 0) <= this.limits.bytesPerBatch, 'too many bytes in the batch');
    for (const entry of entries) this.#checkRow(entry);
    return this.#model.mutateRows(ref, entries);
  }

  async readRows(ref: TableRef, keys: readonly Buffer[], selection: ReadSelection, options: CallOptions): Promise<Array<Row | null>> {
    await this.#start(options, ref.instance);
    precondition(keys.length <= this.limits.entriesPerBatch, `${keys.length} keys`);
    for (const key of keys) this.#checkKey(key);
    this.#checkSelection(selection);
    return this.#model.readRows(ref, keys, selection);
  }

  scanRows(ref: TableRef, scan: ScanRequest, options: CallOptions): AsyncIterable<Row> {
    precondition(!this.#closed, 'the store is closed');
    precondition(this.#instances.has(ref.instance), `instance ${ref.instance} is not served`);
    precondition(Number.isSafeInteger(scan.limit) && scan.limit >= 1 && scan.limit <= this.limits.rowsPerPage + 1, `scan limit ${scan.limit}`);
    precondition(this.capabilities.reverseScan || !scan.reverse, 'a reverse scan without the reverseScan capability');
    if (scan.range.start !== undefined) this.#checkKey(scan.range.start);
    if (scan.range.end !== undefined) this.#checkKey(scan.range.end);
    this.#checkSelection(scan);
    return this.#scan(ref, scan, options);
  }

  async checkAndMutateRow(ref: TableRef, key: Buffer, check: ConditionalMutations, options: CallOptions): Promise<boolean> {
    await this.#start(options, ref.instance);
    precondition(this.capabilities.checkAndMutate, 'checkAndMutateRow without the checkAndMutate capability');
    precondition(check.conditions.length >= 1 && check.conditions.length <= this.limits.conditionsPerCheck, `${check.conditions.length} conditions`);
    precondition(check.mutations.length > 0 || check.otherwise.length > 0, 'no mutation in either branch');
    for (const condition of check.conditions) {
      if (condition.type === 'columnExists' || condition.type === 'columnEquals') precondition(condition.column.length <= this.limits.columnBytes, 'a long column');
      if (condition.type === 'columnEquals') precondition(condition.value.length <= this.limits.valueBytes, 'a long value');
    }
    for (const mutations of [check.mutations, check.otherwise]) if (mutations.length > 0) this.#checkRow({ key, mutations });
    return this.#model.checkAndMutateRow(ref, key, check);
  }

  async readModifyWriteRow(ref: TableRef, key: Buffer, rules: readonly ModifyRule[], options: CallOptions): Promise<Row> {
    await this.#start(options, ref.instance);
    precondition(this.capabilities.readModifyWrite, 'readModifyWriteRow without the readModifyWrite capability');
    precondition(rules.length >= 1 && rules.length <= this.limits.rulesPerRow, `${rules.length} rules`);
    this.#checkKey(key);
    for (const rule of rules) {
      precondition(rule.column.length <= this.limits.columnBytes, 'a long column');
      if (rule.type === 'increment') precondition(rule.amount >= -(2n ** 63n) && rule.amount <= INT64_MAX, `increment ${rule.amount}`);
      else precondition(rule.value.length <= this.limits.valueBytes, 'a long value');
    }
    return this.#model.readModifyWriteRow(ref, key, rules);
  }

  readChanges(ref: TableRef, start: ChangeStart, options: FeedOptions): AsyncIterable<ChangeEvent> {
    precondition(!this.#closed, 'the store is closed');
    precondition(this.capabilities.changeFeed, 'readChanges without the changeFeed capability');
    precondition(this.#instances.has(ref.instance), `instance ${ref.instance} is not served`);
    return this.#follow(ref, start, options);
  }

  async *#follow(ref: TableRef, start: ChangeStart, options: FeedOptions): AsyncGenerator<ChangeEvent> {
    this.#openScans += 1;
    try {
      await new Promise((resolve) => setImmediate(resolve));
      const log = this.#model.changeLog(ref);
      const oldest = BigInt(Date.now() - this.limits.changeRetentionSeconds * 1000) * 1000n;
      let seen: number;
      if (start.type === 'now') seen = log.changes.length;
      else if (start.type === 'since') {
        if (start.sinceMicros < oldest) throw new StoreError('OUT_OF_RANGE', 'since is older than the retention');
        seen = log.changes.findIndex((change) => change.commitMicros >= start.sinceMicros);
        if (seen === -1) seen = log.changes.length;
      } else {
        seen = /^[1-9][0-9]*$|^0$/.test(start.position) ? Number(start.position) : Number.NaN;
        if (!Number.isSafeInteger(seen) || seen > log.changes.length) throw new StoreError('INVALID_ARGUMENT', `no position ${start.position}`);
        const after = log.changes[seen];
        if (after !== undefined && after.commitMicros < oldest) throw new StoreError('OUT_OF_RANGE', 'the position is older than the retention');
      }
      yield { type: 'progress', position: String(seen) };
      while (!options.signal.aborted) {
        const change = log.changes[seen];
        if (change !== undefined) {
          seen += 1;
          yield { type: 'change', change, position: String(seen) };
          continue;
        }
        if (log.deleted) throw new StoreError('NOT_FOUND', `table ${ref.table} was deleted`, { resource: 'table', name: ref.table });
        const waited = await changeOrTimeout(() => log.changes.length > seen || log.deleted, FEED_PROGRESS_MS, options.signal);
        if (!waited) yield { type: 'progress', position: String(seen) };
      }
    } finally {
      this.#openScans -= 1;
    }
  }

  async checkHealth(options: CallOptions): Promise<void> {
    await this.#start(options);
  }

  close(): Promise<void> {
    precondition(!this.#closed, 'closed twice');
    precondition(this.#openScans === 0, `${this.#openScans} scans were never released`);
    this.#closed = true;
    return Promise.resolve();
  }

  async *#scan(ref: TableRef, scan: ScanRequest, options: CallOptions): AsyncGenerator<Row> {
    this.#openScans += 1;
    try {
      await this.#start(options, ref.instance);
      for (const row of this.#model.scanRows(ref, scan)) {
        yield row;
        await Promise.resolve();
      }
    } finally {
      this.#openScans -= 1;
    }
  }

  /** Each call answers asynchronously, as a real store does. */
  async #start(options: CallOptions, instance?: string): Promise<void> {
    precondition(!this.#closed, 'the store is closed');
    precondition(options.deadline > Date.now(), 'the deadline has passed');
    precondition(instance === undefined || this.#instances.has(instance), `instance ${instance} is not served`);
    await new Promise((resolve) => setImmediate(resolve));
  }

  #checkRow(entry: RowMutations): void {
    this.#checkKey(entry.key);
    precondition(entry.mutations.length >= 1 && entry.mutations.length <= this.limits.mutationsPerRow, `${entry.mutations.length} mutations`);
    precondition(rowBytes(entry) <= this.limits.bytesPerRow, 'too many bytes in one row');
    const granularity = BigInt(this.limits.timestampGranularityMicros);
    for (const mutation of entry.mutations) {
      if (mutation.type === 'deleteRow') continue;
      if (mutation.type !== 'deleteFamily') precondition(mutation.column.length <= this.limits.columnBytes, `a column of ${mutation.column.length} bytes`);
      if (mutation.type !== 'set') continue;
      precondition(mutation.value.length <= this.limits.valueBytes, `a value of ${mutation.value.length} bytes`);
      const timestamp = mutation.timestampMicros;
      precondition(timestamp >= 0n && timestamp <= INT64_MAX && timestamp % granularity === 0n, `timestamp ${timestamp}`);
    }
  }

  #checkKey(key: Buffer): void {
    precondition(Buffer.isBuffer(key) && key.length <= this.limits.keyBytes, `a key of ${key.length} bytes`);
  }

  #checkSelection(selection: ReadSelection): void {
    precondition(Number.isSafeInteger(selection.versions) && selection.versions >= 1 && selection.versions <= this.limits.versionsPerRead, `versions ${selection.versions}`);
    precondition(this.capabilities.multipleVersions || selection.versions === 1, 'versions > 1 without the multipleVersions capability');
    precondition(selection.columns === undefined || selection.columns.length >= 1, 'an empty column selection');
  }
}

/** Waits until `ready()`, polling, or `timeoutMs`, or the abort; true when ready. */
async function changeOrTimeout(ready: () => boolean, timeoutMs: number, signal: AbortSignal): Promise<boolean> {
  const until = Date.now() + timeoutMs;
  while (!signal.aborted && Date.now() < until) {
    if (ready()) return true;
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  return ready();
}

function rowBytes(entry: RowMutations): number {
  return entry.key.length + entry.mutations.reduce((sum, mutation) => sum + (mutation.type === 'set' ? mutation.column.length + mutation.value.length : 0), 0);
}

function precondition(condition: boolean, what: string): asserts condition {
  if (!condition) throw new Error(`the caller broke the contract's preconditions: ${what}`);
}

/**
 * A harness serving the reference model with the given capabilities and limits: only for testing
 * the conformance suite itself (test/conformance/driver/model.test.ts), never a store.
 */
export function modelHarness(name: string, capabilities: StoreCapabilities, limits: StoreLimits): DriverHarnessFactory {
  return {
    driver: name,
    make: () =>
      Promise.resolve({
        traits: { fastWideWrites: true, propertyRuns: 100 },
        open: (instances) => Promise.resolve(new ModelStore(capabilities, limits, instances)),
        close: (store) => store.close(),
      }),
  };
}
