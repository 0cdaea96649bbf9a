import { Bigtable, type BigtableOptions, admin as bigtableAdmin, v2, type protos } from '@google-cloud/bigtable';
import { status as GrpcStatus } from '@grpc/grpc-js';
import { ClientStart } from '../client-start.ts';
import { StoreError, callerGone, failing, familyNotFound, isStoreError, unimplemented } from '../errors.ts';
import type {
  CallOptions,
  Cell,
  ConditionalMutations,
  DataStore,
  FamilySpec,
  KeyRange,
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
  ChangeEvent,
  ChangeStart,
  FeedOptions,
} from '../store.ts';
import { type BigtableStub, type ServerStream, asIs, checkCallable, gaxOptions, grpcOptions, routingHeader, streamOf, unaryOf, withRetry } from './calls.ts';
import { readChangeFeed } from './change-feed.ts';
import { predicateOf } from './conditions.ts';
import { gcRuleFor, policyOf } from './gc-rules.ts';
import { grpcCode, isDeadline, isTransient, toStoreError } from './grpc-errors.ts';
import { BIGTABLE_CAPABILITIES, BIGTABLE_LIMITS } from './limits.ts';
import { type SendEntries, applyEntries } from './mutate-rows.ts';
import { expiredVersionsDeletions, familiesNamed, firstNonCounter, isNotACounterError, modifiedRow, toProtoRule, touchedColumns } from './modify-rules.ts';
import { encodeCheckAndMutateRow, encodeMutateRow, encodeMutateRows } from './mutation-requests.ts';
import { firstMissingFamily } from './mutations.ts';
import { readFilter } from './read-filter.ts';
import { ReadRowsDecoder, isLarge } from './read-rows-messages.ts';
import { type MergedRow, sortCells, sortCellsInSlices } from './row-chunks.ts';
import { resumedScan } from './resumed-scan.ts';
import { rowRange } from './row-ranges.ts';
import { type Families, SchemaCache } from './schema-cache.ts';
import { Turns } from '../../lib/turns.ts';
import { WriteBatches, type WriteSender } from './write-batches.ts';
import { ReadBatches, type ReadSender } from '../read-batches.ts';

type ReadRowsRequest = protos.google.bigtable.v2.IReadRowsRequest;
type RowFilter = protos.google.bigtable.v2.IRowFilter;
type CheckAndMutateRowResponse = protos.google.bigtable.v2.ICheckAndMutateRowResponse;
type ReadModifyWriteRowResponse = protos.google.bigtable.v2.IReadModifyWriteRowResponse;

export interface BigtableStoreOptions {
  projectId: string;
  instanceIds: readonly string[];
  /** host:port of an emulator. No credentials or metadata server are consulted then. */
  emulatorHost?: string;
  /** Service account key file; otherwise application default credentials. */
  credentialsFile?: string;
  /** How long a table's column families and their policies are trusted without asking the backend again. */
  schemaCacheTtlMs?: number;
  /**
   * With emulatorHost: host:port of a server for the change stream RPCs, which the emulator does
   * not serve (a stand-in, in tests). The store then publishes `changeFeed` and reads feeds there.
   */
  changeStreamHost?: string;
  /**
   * Whether single-row writes made in the same turn of the event loop go out together, per
   * table, as one MutateRows (WriteBatches), and single-key reads per table and filter as one
   * ReadRows (ReadBatches). On unless false.
   */
  coalesce?: boolean;
  /** Told the size of each coalesced call as it goes out (1 for a call made alone). */
  onBatch?: (operation: 'mutateRow' | 'readRows', size: number) => void;
}

/** Cells of a row put in order in one go: about a millisecond of work. */
const CELLS_SORTED_IN_ONE_GO = 2000;

/**
 * The largest row filter Bigtable accepts (https://cloud.google.com/bigtable/quotas#row-filters):
 * production answers INVALID_ARGUMENT "Row filter exceeds maximum size of 20480 bytes"; the
 * emulator takes any size. A columnEquals condition carries its value in the filter twice (both
 * ends of a value range), so values up to about 10 KB can be compared.
 */
const MAX_FILTER_BYTES = 20_480;

/** Any key: the existence probe (see #loadUncachedSchema) reads one row and returns no cell of it. */
const PROBE_KEY = Buffer.from([0]);

/**
 * The emulator (gcloud 528) answers a reversed ReadRows with UNIMPLEMENTED "Client doesn't
 * support reverse scans yet", and does not serve change streams (it crashes on
 * GenerateInitialChangeStreamPartitions); production Bigtable serves both.
 */
const EMULATOR_CAPABILITIES: StoreCapabilities = Object.freeze({ ...BIGTABLE_CAPABILITIES, reverseScan: false, changeFeed: false });

/**
 * BigtableStore is the DataStore on Cloud Bigtable. It uses the client library's generated
 * (low-level) data and table-admin clients: they keep row keys, qualifiers and values as bytes,
 * build no per-request objects, and leave retries and deadlines to this adapter.
 *
 * Native: GC rules for retention, MutateRow for atomic row mutations, MutateRows with per-entry
 * status for batches, ReadRows with row keys or ranges, rows_limit, reversed and filters for
 * reads and scans, CheckAndMutateRow for conditional mutations, ReadModifyWriteRow for counters
 * and appends. Added here: a check that every family a mutation, condition or rule names exists
 * before anything is written (the emulator applies part of a mutation naming an unknown family),
 * and filtering of versions a retention policy has expired (Bigtable's GC runs asynchronously),
 * on read and in predicates, and removal of them before a read-modify-write. All use the table's
 * schema, cached (SchemaCache).
 */
export class BigtableStore implements DataStore {
  readonly type = 'bigtable';
  readonly capabilities: StoreCapabilities;
  readonly limits: StoreLimits = BIGTABLE_LIMITS;
  readonly #projectId: string;
  readonly #instanceIds: readonly string[];
  readonly #clients: ClientStart<BigtableClients>;
  readonly #schemas: SchemaCache;
  /**
   * The emulator (gcloud 528) applies the rules of a ReadModifyWriteRow one by one and keeps those
   * before a failing increment, where production Bigtable applies all or none: on the emulator the
   * values the increments would find are checked first (see readModifyWriteRow).
   */
  readonly #rulesApplyOneByOne: boolean;
  /** Tables are created with a change stream, kept for the published retention; not on the emulator. */
  readonly #changeStream: boolean;
  /** The client for the change stream RPCs when they are not the data client's (changeStreamHost). */
  readonly #changeStreamData: v2.BigtableClient | undefined;
  #changeStreamStub: Promise<BigtableStub> | undefined;
  /** Single-row writes of one turn, sent together per table; undefined when coalescing is off. */
  readonly #writes: WriteBatches | undefined;
  /** Single-key reads of one turn, read together per table and filter; undefined when coalescing is off. */
  readonly #reads: ReadBatches<string, RowFilter> | undefined;

  constructor(options: BigtableStoreOptions) {
    this.#projectId = options.projectId;
    this.#instanceIds = options.instanceIds;
    this.#schemas = new SchemaCache(options.schemaCacheTtlMs ?? 10 * 60_000);
    this.capabilities =
      options.emulatorHost === undefined ? BIGTABLE_CAPABILITIES : options.changeStreamHost === undefined ? EMULATOR_CAPABILITIES : { ...EMULATOR_CAPABILITIES, changeFeed: true };
    this.#rulesApplyOneByOne = options.emulatorHost !== undefined;
    this.#changeStream = options.emulatorHost === undefined;
    this.#writes = options.coalesce === false ? undefined : new WriteBatches(this.limits, this.#writeSender(options.onBatch));
    this.#reads = options.coalesce === false ? undefined : new ReadBatches(this.limits, this.#readSender(options.onBatch), () => new StoreError('DEADLINE_EXCEEDED', 'bigtable readRows: deadline exceeded'));

    // The Bigtable class only computes the clients' settings here (endpoint, channel pool, scopes).
    const clientOptions: BigtableOptions & Record<`grpc.${string}`, unknown> = {
      projectId: options.projectId,
      // Client-side metrics are exported to Cloud Monitoring by the high-level API, unused here.
      metricsEnabled: false,
      'grpc.max_reconnect_backoff_ms': 5000,
      ...(options.credentialsFile === undefined ? {} : { keyFilename: options.credentialsFile }),
      ...(options.emulatorHost === undefined
        ? {}
        : {
            apiEndpoint: options.emulatorHost,
            // Without an explicit universe domain the client asks application default credentials
            // (and so the metadata server) for one, even though the emulator needs no credentials.
            universeDomain: 'googleapis.com',
          }),
    };
    const settings = new Bigtable(clientOptions).options;
    this.#clients = new ClientStart('bigtable', () => startClients(settings), closeClients);
    if (options.emulatorHost !== undefined && options.changeStreamHost !== undefined) {
      const standIn = new Bigtable({ ...clientOptions, apiEndpoint: options.changeStreamHost }).options;
      this.#changeStreamData = new v2.BigtableClient(standIn.BigtableClient);
    }
  }

  #writeSender(onBatch: ((operation: 'mutateRow' | 'readRows', size: number) => void) | undefined): WriteSender {
    return {
      single: (tableName, write, options) => this.#mutateRowAlone(tableName, write, options),
      batch: async (tableName, entries, options) => {
        const { stub } = await this.#clients.clients(options);
        const { path, requestSerialize, responseDeserialize } = stub.mutateRows;
        return async function* send(indexes) {
          const request = await encodeMutateRows(requestSerialize, tableName, entries, indexes);
          yield* streamOf(() => stub.makeServerStreamRequest(path, asIs, responseDeserialize, request, routingHeader(tableName), grpcOptions(options)), options);
        };
      },
      failure: (tableName, error) => toStoreError(error, 'mutateRow', { resource: 'table', name: tableOf(tableName) }),
      ...(onBatch === undefined ? {} : { sent: (size: number) => onBatch('mutateRow', size) }),
    };
  }

  #readSender(onBatch: ((operation: 'mutateRow' | 'readRows', size: number) => void) | undefined): ReadSender<string, RowFilter> {
    return {
      single: async (tableName, key, filter, options) => {
        const rows = await withRetry(options, 'readRows', { resource: 'table', name: tableOf(tableName) }, () =>
          this.#collectRows({ tableName, rows: { rowKeys: [key] }, filter }, options),
        );
        return rows[0] ?? null;
      },
      batch: async (tableName, keys, filter, options, onRow) => {
        await withRetry(options, 'readRows', { resource: 'table', name: tableOf(tableName) }, async () => {
          const rowKeys = keys();
          if (rowKeys.length > 0) await this.#collectRows({ tableName, rows: { rowKeys }, filter }, options, onRow);
        });
      },
      ...(onBatch === undefined ? {} : { sent: (size: number) => onBatch('readRows', size) }),
    };
  }

  async createTable(ref: TableRef, specs: readonly FamilySpec[], options: CallOptions): Promise<void> {
    const columnFamilies = Object.fromEntries(specs.map((family) => [family.name, { gcRule: gcRuleFor(family) ?? null }]));
    const changeStreamConfig = this.#changeStream ? { changeStreamConfig: { retentionPeriod: { seconds: this.limits.changeRetentionSeconds } } } : {};
    try {
      // Not retried: after a lost answer a retry would report ALREADY_EXISTS for our own table.
      const { admin } = await this.#clients.clients(options);
      await admin.createTable({ parent: this.#instanceName(ref.instance), tableId: ref.table, table: { columnFamilies, ...changeStreamConfig } }, gaxOptions(options));
    } catch (error) {
      throw toStoreError(error, 'createTable', { resource: 'table', name: ref.table });
    }
    this.#schemas.set(this.#tableName(ref), new Map(specs.map(({ name, ...policy }) => [name, policyOf(gcRuleFor(policy))])));
  }

  async describeTable(ref: TableRef, options: CallOptions): Promise<TableSchema> {
    const families = await this.#loadSchema(ref, options);
    return {
      name: ref.table,
      families: [...families]
        .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
        .map(([name, policy]) => ({ name, ...policy })),
    };
  }

  async listTables(instance: string, options: CallOptions): Promise<string[]> {
    const parent = this.#instanceName(instance);
    const [tables] = await withRetry(options, 'listTables', { resource: 'instance', name: instance }, async () =>
      (await this.#clients.clients(options)).admin.listTables({ parent, view: 'NAME_ONLY' }, gaxOptions(options)),
    );
    const prefix = `${parent}/tables/`;
    return tables.map((table) => (table.name ?? '').slice(prefix.length));
  }

  async deleteTable(ref: TableRef, options: CallOptions): Promise<void> {
    const name = this.#tableName(ref);
    try {
      const { admin } = await this.#clients.clients(options);
      await admin.deleteTable({ name }, gaxOptions(options));
    } catch (error) {
      throw toStoreError(error, 'deleteTable', { resource: 'table', name: ref.table });
    } finally {
      this.#schemas.delete(name);
    }
  }

  async mutateRow(ref: TableRef, key: Buffer, mutations: readonly Mutation[], options: CallOptions): Promise<void> {
    const tableName = this.#tableName(ref);
    // The emulator applies the mutations before one naming an unknown family and then fails, so a
    // missing family must be found before writing; production Bigtable would reject all of it.
    await this.#requireFamilies(ref, [mutations], options);
    try {
      if (this.#writes !== undefined && key.length > 0 && WriteBatches.fits(mutations)) {
        checkCallable(options);
        await this.#writes.write(tableName, { key, mutations }, options);
      } else await this.#mutateRowAlone(tableName, { key, mutations }, options);
    } catch (error) {
      // The schema may have changed behind the cache: look again to say precisely what is missing.
      this.#schemas.delete(tableName);
      if (isStoreError(error, 'UNAVAILABLE') || isStoreError(error, 'DEADLINE_EXCEEDED')) throw error;
      await this.#requireFamilies(ref, [mutations], options);
      throw error;
    }
  }

  /** One MutateRow call, retried; fails with a StoreError. */
  async #mutateRowAlone(tableName: string, write: RowMutations, options: CallOptions): Promise<void> {
    const { stub } = await this.#clients.clients(options);
    const { path, requestSerialize, responseDeserialize } = stub.mutateRow;
    const request = await encodeMutateRow(requestSerialize, tableName, write.key, write.mutations);
    // Safe to retry: every set carries its timestamp, so a repeated mutation leaves the same row.
    await withRetry(options, 'mutateRow', { resource: 'table', name: tableOf(tableName) }, () =>
      unaryOf((done) => stub.makeUnaryRequest(path, asIs, responseDeserialize, request, routingHeader(tableName), grpcOptions(options), done), options),
    );
  }

  async mutateRows(ref: TableRef, entries: readonly RowMutations[], options: CallOptions): Promise<Array<StoreError | undefined>> {
    const tableName = this.#tableName(ref);
    const results = new Array<StoreError | undefined>(entries.length).fill(undefined);
    const families = await this.#requireFamilies(
      ref,
      entries.map((entry) => entry.mutations),
      options,
      { throwMissing: false },
    );
    // An entry naming a missing family fails alone, before anything is sent (see mutateRow).
    const toSend: number[] = [];
    entries.forEach((entry, index) => {
      const missing = firstMissingFamily(entry.mutations, (family) => families.has(family));
      if (missing !== undefined) results[index] = familyNotFound(missing, ref);
      else if (entry.key.length === 0) results[index] = new StoreError('INVALID_ARGUMENT', 'bigtable row keys are never empty', { limit: 'keyBytes' });
      else toSend.push(index);
    });
    if (toSend.length === 0) return results;

    const { stub } = await this.#clients.clients(options);
    const { path, requestSerialize, responseDeserialize } = stub.mutateRows;
    const send: SendEntries = async function* (indexes) {
      const request = await encodeMutateRows(requestSerialize, tableName, entries, indexes);
      yield* streamOf(() => stub.makeServerStreamRequest(path, asIs, responseDeserialize, request, routingHeader(tableName), grpcOptions(options)), options);
    };
    const subject = { resource: 'table', name: ref.table } as const;
    const failed: Array<[number, Error]> = [];
    let answered = false;
    // MutateRows may apply its entries "in arbitrary order (even between entries for the same
    // row)", so the n-th entry for a row goes in the n-th call: they are applied in entry order.
    for (const wave of waves(entries, toSend)) {
      const outcome = await applyEntries(wave, send, options);
      if (!outcome.answered && !answered) {
        const error = outcome.results.get(wave[0] as number);
        throw toStoreError(error, 'mutateRows', subject);
      }
      answered = true;
      for (const [index, error] of outcome.results) if (error !== null) failed.push([index, error]);
    }
    if (failed.length === 0) return results;

    // A family deleted behind the cache fails its entries (on the emulator, after writing part of
    // them): look again, to say which family is missing rather than pass on the backend's text.
    let now: Families | undefined;
    if (failed.some(([, error]) => !isTransient(error) && !isDeadline(error))) {
      this.#schemas.delete(tableName);
      now = await this.#loadSchema(ref, options).catch(() => undefined);
    }
    for (const [index, error] of failed) {
      const missing = now === undefined ? undefined : firstMissingFamily((entries[index] as RowMutations).mutations, (family) => now.has(family));
      results[index] = missing === undefined ? toStoreError(error, 'mutateRows', subject) : familyNotFound(missing, ref);
    }
    return results;
  }

  async readRows(ref: TableRef, keys: readonly Buffer[], selection: ReadSelection, options: CallOptions): Promise<Array<Row | null>> {
    const tableName = this.#tableName(ref);
    const families = await this.#families(ref, options);
    // Bigtable keys are never empty, and an empty row set would read the whole table.
    const unique = keys.length === 1 ? keys.filter((key) => key.length > 0) : [...new Map(keys.filter((key) => key.length > 0).map((key) => [key.toString('latin1'), key])).values()];
    if (unique.length === 0) return keys.map(() => null);

    const filter = readFilter(selection, families, Date.now());
    if (keys.length === 1 && this.#reads !== undefined) {
      checkCallable(options);
      return [await this.#reads.read(tableName, `${tableName}\u0000${JSON.stringify(filter)}`, unique[0] as Buffer, filter, options)];
    }
    const rows = await withRetry(options, 'readRows', { resource: 'table', name: ref.table }, () => this.#collectRows({ tableName, rows: { rowKeys: unique }, filter }, options));
    if (keys.length === 1) return [rows[0] ?? null];
    const found = new Map(rows.map((row) => [row.key.toString('latin1'), row]));
    return keys.map((key) => found.get(key.toString('latin1')) ?? null);
  }

  scanRows(ref: TableRef, scan: ScanRequest, options: CallOptions): AsyncIterable<Row> {
    return this.#scan(ref, scan, options);
  }

  /**
   * One CheckAndMutateRow: the conditions compiled to one predicate filter that sees only live
   * versions (conditions.ts), `mutations` and `otherwise` as its true and false mutations (swapped
   * when the predicate is built for "some condition fails"). Bigtable evaluates the predicate and
   * applies the branch atomically. Every family named is checked against the schema first: the
   * backend checks only the branch it applies, so an unknown family in the other would go unseen.
   * Not retried: after a lost answer a second call could take the other branch.
   */
  async checkAndMutateRow(ref: TableRef, key: Buffer, check: ConditionalMutations, options: CallOptions): Promise<boolean> {
    const tableName = this.#tableName(ref);
    const named = familiesNamed(check.conditions, check.mutations, check.otherwise);
    const families = await this.#requireNamedFamilies(ref, named, options);
    const predicate = predicateOf(check.conditions, families, Date.now());
    const [onMatch, onMismatch] = predicate.inverted ? [check.otherwise, check.mutations] : [check.mutations, check.otherwise];
    const { stub } = await this.#clients.clients(options);
    const { path, requestSerialize, responseDeserialize } = stub.checkAndMutateRow;
    // The filter as the request's only field: a one-byte tag and a length, three bytes from 16 KiB
    // on (so exact for the sizes that matter here).
    const predicateBytes = requestSerialize({ predicateFilter: predicate.filter }).length - 4;
    if (predicateBytes > MAX_FILTER_BYTES) {
      throw new StoreError(
        'INVALID_ARGUMENT',
        `bigtable checkAndMutateRow: the conditions make a predicate filter of ${predicateBytes} bytes; Bigtable takes at most ${MAX_FILTER_BYTES}`,
      );
    }
    const request = await encodeCheckAndMutateRow(requestSerialize, { tableName, rowKey: key, predicateFilter: predicate.filter }, onMatch, onMismatch);
    let response: CheckAndMutateRowResponse | undefined;
    try {
      response = await unaryOf<CheckAndMutateRowResponse>(
        (done) => stub.makeUnaryRequest(path, asIs, responseDeserialize, request, routingHeader(tableName), grpcOptions(options), done),
        options,
      );
    } catch (error) {
      throw await this.#afterFailedWrite(ref, named, error, 'checkAndMutateRow', options);
    }
    const matched = response?.predicateMatched === true;
    return predicate.inverted ? !matched : matched;
  }

  /**
   * One ReadModifyWriteRow, which Bigtable applies atomically, rules in order, each on the latest
   * stored version of its column, at the server's clock or the replaced version's timestamp when
   * that is later. Before it, for families with maxAgeSeconds, one MutateRow removes the touched
   * columns' versions older than the age limit (expiredVersionsDeletions): Bigtable's GC is lazy
   * and ReadModifyWriteRow would otherwise increment an expired version instead of counting from
   * 0. Those versions are expired: no read returns them, so removing them changes nothing anyone
   * sees. Not retried: a second call after a lost answer would add twice.
   */
  async readModifyWriteRow(ref: TableRef, key: Buffer, rules: readonly ModifyRule[], options: CallOptions): Promise<Row> {
    const tableName = this.#tableName(ref);
    const named = rules.map((rule) => rule.family);
    const families = await this.#requireNamedFamilies(ref, named, options);
    const { stub } = await this.#clients.clients(options);
    const subject = { resource: 'table', name: ref.table } as const;

    const deletions = expiredVersionsDeletions(rules, families, Date.now());
    const removeExpired = async () => {
      if (deletions.length === 0) return;
      const request = stub.mutateRow.requestSerialize({ tableName, rowKey: key, mutations: deletions });
      // Idempotent: removing versions below a fixed timestamp twice leaves the same row.
      await withRetry(options, 'mutateRow', subject, () =>
        unaryOf((done) => stub.makeUnaryRequest(stub.mutateRow.path, asIs, stub.mutateRow.responseDeserialize, request, routingHeader(tableName), grpcOptions(options), done), options),
      );
    };
    // On the emulator, which keeps the rules before a failing increment (see #rulesApplyOneByOne):
    // the values the increments would find, read first. A write between this read and the call can
    // still make the emulator keep part of the rules; production Bigtable needs no read.
    const checkCounters = async () => {
      if (!this.#rulesApplyOneByOne) return;
      const [row] = await this.readRows(ref, [key], touchedColumns(rules), options);
      const error = firstNonCounter(rules, row?.cells ?? []);
      if (error !== undefined) throw error;
    };
    await Promise.all([removeExpired(), checkCounters()]);

    const { path, requestSerialize, responseDeserialize } = stub.readModifyWriteRow;
    const request = requestSerialize({ tableName, rowKey: key, rules: rules.map(toProtoRule) });
    let response: ReadModifyWriteRowResponse | undefined;
    try {
      response = await unaryOf<ReadModifyWriteRowResponse>(
        (done) => stub.makeUnaryRequest(path, asIs, responseDeserialize, request, routingHeader(tableName), grpcOptions(options), done),
        options,
      );
    } catch (error) {
      if (isNotACounterError(error)) {
        throw new StoreError('FAILED_PRECONDITION', `bigtable readModifyWriteRow: ${(error as Error).message}`, { reason: 'NOT_A_COUNTER', cause: error });
      }
      throw await this.#afterFailedWrite(ref, named, error, 'readModifyWriteRow', options);
    }
    return modifiedRow(key, response?.row);
  }

  /**
   * readChanges reads the table's change stream (change-feed.ts), which createTable enables. On
   * the emulator, which does not serve the change stream RPCs, it fails with UNIMPLEMENTED.
   */
  readChanges(ref: TableRef, start: ChangeStart, options: FeedOptions): AsyncIterable<ChangeEvent> {
    if (!this.capabilities.changeFeed) return failing(unimplemented('changeFeed'));
    const stub =
      this.#changeStreamData === undefined
        ? Promise.resolve(this.#clients.clients({ deadline: Date.now() + FEED_START_MS, signal: options.signal })).then((clients) => clients.stub)
        : (this.#changeStreamStub ??= this.#changeStreamData.initialize() as unknown as Promise<BigtableStub>);
    // The feed may end before it awaits the stub (a position refused): its failure is the feed's, never the process's.
    stub.catch(() => undefined);
    return readChangeFeed({
      stub,
      tableName: this.#tableName(ref),
      table: ref.table,
      start,
      signal: options.signal,
      retentionSeconds: this.limits.changeRetentionSeconds,
    });
  }

  async checkHealth(options: CallOptions): Promise<void> {
    await Promise.all(
      this.#instanceIds.map((instance) =>
        withRetry(options, 'pingAndWarm', { resource: 'instance', name: instance }, () =>
          this.#pingAndWarm(instance, options),
        ),
      ),
    );
  }

  async close(): Promise<void> {
    await Promise.all([this.#clients.close(), this.#changeStreamData?.close()]);
  }

  async #pingAndWarm(instance: string, options: CallOptions): Promise<unknown> {
    const { data } = await this.#clients.clients(options);
    return data.pingAndWarm({ name: this.#instanceName(instance) }, gaxOptions(options));
  }

  async *#scan(ref: TableRef, scan: ScanRequest, options: CallOptions): AsyncGenerator<Row> {
    const tableName = this.#tableName(ref);
    const families = await this.#families(ref, options);
    const read = (range: KeyRange, left: number) =>
      this.#readStream(
        {
          tableName,
          rows: { rowRanges: [rowRange(range)] },
          rowsLimit: left,
          filter: readFilter(scan, families, Date.now()),
          ...(scan.reverse ? { reversed: true } : {}),
        },
        options,
      );
    yield* resumedScan(scan, read, options, (error) => {
      if (grpcCode(error) === GrpcStatus.UNIMPLEMENTED && scan.reverse) {
        return new StoreError('UNIMPLEMENTED', `bigtable readRows: ${(error as Error).message}`, { capability: 'reverseScan', cause: error });
      }
      return toStoreError(error, 'readRows', { resource: 'table', name: ref.table });
    });
  }

  /**
   * The rows of one ReadRows call, cells in contract order, collected with stream events (for
   * readRows: cheaper per call than the async iteration scans use). A large message is decoded a
   * slice at a time, with the stream paused meanwhile. No retries; the caller's signal cancels
   * the call.
   */
  async #collectRows(request: ReadRowsRequest, options: CallOptions, onRow?: (row: Row) => void): Promise<Row[]> {
    const { stub } = await this.#clients.clients(options);
    const call = this.#readRowsCall(stub, request, options);
    return new Promise((resolve, reject) => {
      const rows: Row[] = [];
      // With onRow, each row is handed on as it comes, and none is kept.
      const take = (row: Row) => (onRow === undefined ? rows.push(row) : onRow(row));
      const decoder = new ReadRowsDecoder(stub.readRows.responseDeserialize);
      // Set while a large message is decoded: later events wait for it.
      let decoding: Promise<void> | undefined;
      let settled = false;
      const cancel = () => call.cancel();
      options.signal?.addEventListener('abort', cancel, { once: true });
      const settle = (error?: Error) => {
        if (settled) return;
        settled = true;
        options.signal?.removeEventListener('abort', cancel);
        if (error === undefined) resolve(rows);
        else {
          call.cancel();
          reject(options.signal?.aborted === true ? callerGone() : error);
        }
      };
      const after = (step: () => Promise<void> | void) => {
        decoding = (decoding ?? Promise.resolve()).then(step).catch((error: unknown) => settle(protocolError(error)));
      };
      // A large message, or a row too large to order in one go: the stream waits meanwhile.
      const inSlices = (decode: (turns: Turns) => MergedRow[] | Promise<MergedRow[]>) => {
        call.pause();
        after(async () => {
          const turns = new Turns();
          for (const row of await decode(turns)) take({ key: row.key, cells: await orderCells(row.cells, turns) });
          if (!settled) call.resume();
        });
      };
      call.on('data', (message: Buffer) => {
        if (decoding !== undefined || isLarge(message)) {
          inSlices((turns) => decoder.takeInSlices(message, turns));
          return;
        }
        let merged: MergedRow[];
        try {
          merged = decoder.take(message);
        } catch (error) {
          settle(protocolError(error));
          return;
        }
        if (merged.some((row) => row.cells.length > CELLS_SORTED_IN_ONE_GO)) inSlices(() => merged);
        else for (const row of merged) take({ key: row.key, cells: sortCells(row.cells) });
      });
      call.on('error', settle);
      call.on('end', () => {
        const end = () => {
          decoder.end();
          settle();
        };
        if (decoding === undefined) {
          try {
            end();
          } catch (error) {
            settle(protocolError(error));
          }
        } else after(end);
      });
    });
  }

  /** The rows of one ReadRows call, cells in contract order, as they arrive. No retries. */
  async *#readStream(request: ReadRowsRequest, options: CallOptions): AsyncGenerator<Row> {
    const { stub } = await this.#clients.clients(options);
    const decoder = new ReadRowsDecoder(stub.readRows.responseDeserialize);
    for await (const message of streamOf(() => this.#readRowsCall(stub, request, options), options)) {
      let rows: MergedRow[];
      const turns = new Turns();
      try {
        rows = isLarge(message) ? await decoder.takeInSlices(message, turns) : decoder.take(message);
      } catch (error) {
        throw protocolError(error);
      }
      for (const row of rows) yield { key: row.key, cells: await orderCells(row.cells, turns) };
    }
    try {
      decoder.end();
    } catch (error) {
      throw protocolError(error);
    }
  }

  /** A ReadRows call whose responses come encoded, for ReadRowsDecoder. */
  #readRowsCall(stub: BigtableStub, request: ReadRowsRequest, options: CallOptions): ServerStream<Buffer> {
    const tableName = request.tableName as string;
    return stub.makeServerStreamRequest(stub.readRows.path, stub.readRows.requestSerialize, asIs, request, routingHeader(tableName), grpcOptions(options));
  }

  /** The table's families and their policies: cached, or read from the backend (NOT_FOUND table). */
  async #families(ref: TableRef, options: CallOptions): Promise<Families> {
    return this.#schemas.get(this.#tableName(ref)) ?? this.#loadUncachedSchema(ref, options);
  }

  /**
   * Loads the schema of a table that is not cached, after making sure with the data API that the
   * table exists: a point read of one row that filters out every cell. Calls naming a missing
   * table, however many, thus never spend admin API quota, which is far smaller (and shared with
   * table administration) than the data API's.
   */
  async #loadUncachedSchema(ref: TableRef, options: CallOptions): Promise<Families> {
    const tableName = this.#tableName(ref);
    await withRetry(options, 'readRows', { resource: 'table', name: ref.table }, () =>
      this.#collectRows({ tableName, rows: { rowKeys: [PROBE_KEY] }, filter: { blockAllFilter: true } }, options),
    );
    return this.#loadSchema(ref, options);
  }

  async #loadSchema(ref: TableRef, options: CallOptions): Promise<Families> {
    const tableName = this.#tableName(ref);
    const [table] = await withRetry(options, 'getTable', { resource: 'table', name: ref.table }, async () =>
      (await this.#clients.clients(options)).admin.getTable({ name: tableName, view: 'SCHEMA_VIEW' }, gaxOptions(options)),
    );
    const families = new Map(Object.entries(table.columnFamilies ?? {}).map(([name, family]) => [name, policyOf(family.gcRule)]));
    return this.#schemas.set(tableName, families);
  }

  /**
   * The table's families, known to include every family `mutationLists` name unless the backend
   * says otherwise: a family missing from the cached schema is looked up again before it is
   * reported. Throws NOT_FOUND for a missing table, and (unless told not to) for the first
   * missing family.
   */
  async #requireFamilies(
    ref: TableRef,
    mutationLists: ReadonlyArray<readonly Mutation[]>,
    options: CallOptions,
    { throwMissing = true } = {},
  ): Promise<Families> {
    const has = (families: Families) => (family: string) => families.has(family);
    const cached = this.#schemas.get(this.#tableName(ref));
    if (cached !== undefined && mutationLists.every((mutations) => firstMissingFamily(mutations, has(cached)) === undefined)) return cached;
    const families = cached === undefined ? await this.#loadUncachedSchema(ref, options) : await this.#loadSchema(ref, options);
    if (throwMissing) {
      for (const mutations of mutationLists) {
        const missing = firstMissingFamily(mutations, has(families));
        if (missing !== undefined) throw familyNotFound(missing, ref);
      }
    }
    return families;
  }

  /**
   * The table's families, known to include every family in `names` unless the backend says
   * otherwise (as #requireFamilies). Throws NOT_FOUND for a missing table, then for the first
   * missing family in `names`.
   */
  async #requireNamedFamilies(ref: TableRef, names: readonly string[], options: CallOptions): Promise<Families> {
    const cached = this.#schemas.get(this.#tableName(ref));
    if (cached !== undefined && names.every((name) => cached.has(name))) return cached;
    const families = cached === undefined ? await this.#loadUncachedSchema(ref, options) : await this.#loadSchema(ref, options);
    const missing = names.find((name) => !families.has(name));
    if (missing !== undefined) throw familyNotFound(missing, ref);
    return families;
  }

  /**
   * The error to report for a conditional write or a read-modify-write that failed: the caller's
   * own departure, or, after a failure that is not the backend's being away, a missing table or
   * family found by looking at the schema again (it may have changed behind the cache), or else
   * the backend's error as a StoreError.
   */
  async #afterFailedWrite(ref: TableRef, families: readonly string[], error: unknown, operation: string, options: CallOptions): Promise<StoreError> {
    if (options.signal?.aborted === true) return callerGone();
    const failure = toStoreError(error, operation, { resource: 'table', name: ref.table });
    if (isTransient(error) || isDeadline(error) || grpcCode(error) === GrpcStatus.CANCELLED) return failure;
    this.#schemas.delete(this.#tableName(ref));
    try {
      await this.#requireNamedFamilies(ref, families, options);
    } catch (lookup) {
      if (isStoreError(lookup, 'NOT_FOUND')) return lookup;
    }
    return failure;
  }

  #instanceName(instance: string): string {
    return `projects/${this.#projectId}/instances/${instance}`;
  }

  #tableName(ref: TableRef): string {
    return `${this.#instanceName(ref.instance)}/tables/${ref.table}`;
  }
}

/**
 * The generated data and table-admin clients, started, and the data client's own gRPC stub
 * (authenticated like the client). Data calls are made on the stub directly, as this adapter does
 * its own retries and deadlines anyway: gax's streaming wrapper (a proxy stream, retry-request,
 * pipes) cost more CPU per single-row read than the bare call itself, and its unary wrapper a good
 * part of a MutateRow's (bench/mutate-row-path.ts; figures: docs/performance.md). Admin calls,
 * which are rare, and pingAndWarm keep using gax.
 */
interface BigtableClients {
  readonly data: v2.BigtableClient;
  readonly admin: bigtableAdmin.v2.BigtableTableAdminClient;
  readonly stub: BigtableStub;
}

type ClientSettings = Bigtable['options'];

/**
 * Makes both clients and starts them (credentials, stubs), the data client first: the admin
 * client starts a stub of its own (long-running operations) as soon as it is made, so it is made
 * only once credentials are known to load. A client that failed to start is dropped uncalled.
 */
async function startClients(settings: ClientSettings): Promise<BigtableClients> {
  const data = new v2.BigtableClient(settings.BigtableClient);
  const stub = (await data.initialize()) as unknown as BigtableStub;
  const admin = new bigtableAdmin.v2.BigtableTableAdminClient(settings.BigtableTableAdminClient);
  try {
    await admin.initialize();
  } catch (error) {
    await data.close().catch(() => undefined);
    throw error;
  }
  return { data, admin, stub };
}

async function closeClients(clients: BigtableClients): Promise<void> {
  await Promise.all([clients.data.close(), clients.admin.close()]);
}

/** How long a feed waits for the clients to start (credentials, stubs) before it fails. */
const FEED_START_MS = 30_000;

/** A ReadRows stream that broke the protocol: a bug on one side or the other, never retried. */
function protocolError(error: unknown): StoreError {
  return new StoreError('INTERNAL', `bigtable readRows: ${(error as Error).message}`, { cause: error });
}

/** A row's cells in contract order: for a large row, a slice at a time. */
function orderCells(cells: Cell[], turns: Turns): Promise<Cell[]> | Cell[] {
  return cells.length > CELLS_SORTED_IN_ONE_GO ? sortCellsInSlices(cells, turns) : sortCells(cells);
}

/** Splits `indexes` into calls so that no call holds two entries for one row (see mutateRows). */
function waves(entries: readonly RowMutations[], indexes: readonly number[]): number[][] {
  const seen = new Map<string, number>();
  const result: number[][] = [];
  for (const index of indexes) {
    const key = (entries[index] as RowMutations).key.toString('latin1');
    const wave = seen.get(key) ?? 0;
    seen.set(key, wave + 1);
    (result[wave] ??= []).push(index);
  }
  return result;
}

/** The table's own name in a full table name (projects/p/instances/i/tables/t). */
function tableOf(tableName: string): string {
  return tableName.slice(tableName.lastIndexOf('/') + 1);
}
