import { randomBytes } from 'node:crypto';
import { type Database, type Instance, type Snapshot, Spanner, type SpannerOptions, type Transaction, v1 } from '@google-cloud/spanner';
import { credentials, status as GrpcStatus } from '@grpc/grpc-js';
import type { Logger } from 'pino';
import { ClientStart } from '../client-start.ts';
import { bounded, deadlineExceeded } from '../bounded.ts';
import { StoreError, callerGone, failing, familyNotFound, tableExists, tableNotFound } from '../errors.ts';
import type {
  CallOptions,
  Cell,
  ConditionalMutations,
  DataStore,
  FamilyPolicy,
  FamilySpec,
  Micros,
  ModifyRule,
  Mutation,
  ReadSelection,
  Row,
  RowMutations,
  ScanRequest,
  TableRef,
  TableSchema,
  ChangeEvent,
  ChangeStart,
  FeedOptions,
} from '../store.ts';
import { queueWrites } from './client-messages.ts';
import { commitEncoder } from './commit-request.ts';
import { tolerateSpannerClientRejections } from './client-rejections.ts';
import { Turns } from '../../lib/turns.ts';
import { SPANNER_CAPABILITIES, SPANNER_LIMITS } from './limits.ts';
import { type CellRow, RowAssembler, selectedFamilies } from './row-reads.ts';
import { type StoredVersion, applyRules, checkFamilies, columnKey, columnsToCompare, conditionRanges, conditionReadLimit, conditionsHold, isLive, liveColumns, ruleColumns } from './row-checks.ts';
import { checkCommit, columnId, columnsToRead, planWrites } from './row-writes.ts';
import { ensureSchema } from './schema.ts';
import { readVersions } from './stored-versions.ts';
import { grpcCode, toStoreError } from './spanner-errors.ts';
import { type FeedPosition, type FeedTarget, decodePosition, follow, timestampNanos } from './change-feed.ts';
import { changeRowCost, changeRows } from './changes.ts';
import { TransactionQueue } from './transaction-queue.ts';
import { ReadBatches, type ReadSender } from '../read-batches.ts';

export interface SpannerStoreOptions {
  readonly projectId: string;
  /** The Spanner instance holding one database per kvcrud instance. */
  readonly instance: string;
  /** host:port of a Spanner emulator: no credentials or metadata server are consulted. */
  readonly emulatorHost?: string;
  readonly credentialsFile?: string;
  /** The kvcrud instances served: each is the Spanner database of the same ID. */
  readonly instances: readonly string[];
  readonly logger: Logger;
  /**
   * Whether single-key reads made in the same turn of the event loop, of the same table and
   * selection, are read together, in one snapshot (ReadBatches). On unless false.
   */
  readonly coalesce?: boolean;
  /** Told the size of each coalesced read as it goes out (1 for a read made alone). */
  readonly onBatch?: (operation: 'readRows', size: number) => void;
}

/** A kvcrud table as the catalog holds it. */
interface CatalogTable {
  readonly tableId: string;
  readonly families: readonly FamilySpec[];
  readonly policies: ReadonlyMap<string, FamilyPolicy>;
}

/** A long-running operation of the admin API (creating an instance). */
interface LongRunning {
  promise(): Promise<unknown>;
}

/** Longest wait for a session from the pool. */
const SESSION_WAIT_MS = 5000;
/** How often, and how long, an unreachable Spanner is probed. */
const PROBE_INTERVAL_MS = 500;
const PROBE_TIMEOUT_MS = 1000;

const READ_JSON = { json: true, jsonOptions: { wrapNumbers: true } } as const;
/** How long close() waits for cells of deleted tables to be removed before leaving them to the next start. */
const CLOSE_GRACE_MS = 5000;
/** Deletion of a deleted table's cells, in the background: bounded so that it cannot hold the queue forever. */
const RECLAIM_TIMEOUT_MS = 10 * 60_000;

/**
 * SpannerStore is the DataStore on Cloud Spanner: each kvcrud instance is a database of one
 * Spanner instance, with the fixed schema of schema.ts, created on first use. See
 * docs/stores/spanner.md for what it guarantees.
 *
 * Every write is one read-write transaction that first reads the table's catalog row, so a
 * write and a concurrent deleteTable are ordered by Spanner: the write either lands before the
 * table is gone or finds it gone. Every read is one strong read-only snapshot holding both the
 * catalog row and the cells.
 */
export class SpannerStore implements DataStore {
  readonly capabilities = SPANNER_CAPABILITIES;
  readonly limits = SPANNER_LIMITS;
  readonly #clientOptions: SpannerOptions;
  /** The client, its Spanner instance and a Database for each served instance, once started. */
  readonly #clients: ClientStart<SpannerClients>;
  /** Clients replaced after a database was found gone: closed with the store. */
  readonly #retired: SpannerClients[] = [];
  /** The kvcrud instances served: each a database of the Spanner instance. */
  readonly #instances: readonly string[];
  /** Set when a database was found gone: the next preparation starts a new client. */
  #renew = false;
  readonly #instanceId: string;
  readonly #emulator: boolean;
  readonly #logger: Logger;
  readonly #queue: TransactionQueue;
  /** Each database's schema check (and, on the emulator, its creation), done once per process. */
  readonly #prepared = new Map<string, Promise<Database>>();
  readonly #reclaims = new Set<Promise<void>>();
  #emulatorInstance: Promise<void> | undefined;
  /** Set while Spanner is found unreachable: calls fail at once instead of waiting for their deadline. */
  #unreachable: string | undefined;
  #probing: Promise<void> | undefined;
  #closed = false;
  /** Whether the store has said that the Spanner client is not shaped for encoding commits as they are queued. */
  #saidClientUnshaped = false;
  /** Single-key reads of one turn, read together per table and selection; undefined when coalescing is off. */
  readonly #reads: ReadBatches<TableRef, ReadSelection> | undefined;

  static open(options: SpannerStoreOptions): SpannerStore {
    return new SpannerStore(options);
  }

  private constructor(options: SpannerStoreOptions) {
    this.#emulator = options.emulatorHost !== undefined;
    this.#logger = options.logger;
    this.#queue = new TransactionQueue(this.#emulator);
    tolerateSpannerClientRejections(options.logger);
    if (options.emulatorHost !== undefined) {
      // The emulator hands out plain sessions where the client asks for multiplexed ones, and the
      // client then fails to release them. These variables are the client's documented switch
      // back to a session pool; they are read when a database is first used.
      for (const name of ['GOOGLE_CLOUD_SPANNER_MULTIPLEXED_SESSIONS', 'GOOGLE_CLOUD_SPANNER_MULTIPLEXED_SESSIONS_PARTITIONED_OPS', 'GOOGLE_CLOUD_SPANNER_MULTIPLEXED_SESSIONS_FOR_RW']) {
        process.env[name] ??= 'false';
      }
    }
    const [host, port] = splitHostPort(options.emulatorHost);
    const clientOptions: SpannerOptions & Record<`grpc.${string}`, unknown> = {
      projectId: options.projectId,
      // Client-side metrics would be exported to Cloud Monitoring, needing a role of their own.
      disableBuiltInMetrics: true,
      'grpc.max_reconnect_backoff_ms': 5000,
      ...(options.credentialsFile === undefined ? {} : { keyFilename: options.credentialsFile }),
      ...(host === undefined
        ? {}
        : {
            servicePath: host,
            ...(port === undefined ? {} : { port }),
            sslCreds: credentials.createInsecure(),
            // Without it the client asks application default credentials (the metadata server) for one.
            universeDomain: 'googleapis.com',
          }),
    };
    this.#clientOptions = clientOptions;
    this.#instanceId = options.instance;
    this.#instances = options.instances;
    this.#clients = new ClientStart('spanner', () => this.#startClients(), closeClients);
    this.#reads = options.coalesce === false ? undefined : new ReadBatches(this.limits, this.#readSender(options.onBatch), () => deadlineExceeded('spanner', 'readRows'));
  }

  /**
   * A key read alone is the read it always was. Several are one #readKeys: one snapshot, one
   * catalog read and one read of the cells, bounded by the latest of their callers' deadlines;
   * its failure (the table missing, Spanner unreachable) is each caller's.
   */
  #readSender(onBatch: SpannerStoreOptions['onBatch']): ReadSender<TableRef, ReadSelection> {
    return {
      single: async (ref, key, selection, options) => (await this.#readKeys(ref, [key], selection, options))[0] ?? null,
      batch: async (ref, keys, selection, options, onRow) => {
        const waiting = keys();
        if (waiting.length === 0) return;
        const rows = await this.#bounded(options, 'readRows', () => this.#readKeys(ref, waiting, selection, options));
        for (const row of rows) if (row !== null) onRow(row);
      },
      ...(onBatch === undefined ? {} : { sent: (size: number) => onBatch('readRows', size) }),
    };
  }

  /**
   * A new Spanner client, its generated clients started (see ClientStart). Its Databases are
   * opened by #prepare, each once its database is known to exist: a Database starts making
   * sessions as soon as it exists, so none exists before the generated clients have started, nor
   * (on the emulator, which starts empty) before its database is created; a session pool that
   * met "database not found" keeps its callers waiting.
   */
  async #startClients(): Promise<SpannerClients> {
    const spanner = new Spanner(this.#clientOptions);
    const started: Array<{ close(): Promise<void> }> = [];
    try {
      for (const name of GENERATED_CLIENTS) {
        // The options the Spanner client gives its generated clients (its own, completed).
        const client = new v1[name](spanner.options as unknown as ConstructorParameters<(typeof v1)[typeof name]>[0]);
        await client.initialize();
        started.push(client);
        // Where the Spanner client looks for its generated client before making one itself.
        spanner.clients_.set(name, client);
      }
    } catch (error) {
      await Promise.allSettled(started.map((client) => client.close()));
      throw error;
    }
    return { spanner, instance: spanner.instance(this.#instanceId), databases: new Map() };
  }

  #openDatabase(spannerInstance: Instance, instance: string): Database {
    {
      // A session the pool cannot create (the database is gone) fails the call after a while
      // instead of keeping it waiting; the pool itself ignores "database not found".
      const database = spannerInstance.database(instance, { min: 10, max: 100, incStep: 10, acquireTimeout: SESSION_WAIT_MS });
      // The session pool reports sessions it failed to create here; calls report their own failures.
      let warned = 0;
      (database as unknown as NodeJS.EventEmitter).on('error', (error: unknown) => {
        // Once a minute at most: while Spanner is down, every pending session fails this way.
        if (Date.now() - warned < 60_000) return;
        warned = Date.now();
        this.#logger.warn({ database: instance, code: grpcCode(error), error: firstLine(error) }, 'spanner: the session pool could not create sessions');
      });
      return database;
    }
  }

  createTable(ref: TableRef, families: readonly FamilySpec[], options: CallOptions): Promise<void> {
    return this.#bounded(options, 'createTable', async () => {
      const database = await this.#ready(ref.instance, options);
      try {
        await this.#transact(database, options, async (transaction) => {
          if ((await readCatalog(transaction, ref.table, options)) !== undefined) {
            throw tableExists(ref);
          }
          const stored = families.map((family) => ({ name: family.name, ...policyOf(family) }));
          transaction.insert('kvcrud_tables', { name: ref.table, table_id: randomBytes(16).toString('hex'), families: JSON.stringify(stored) });
          await transaction.commit({ gaxOptions: gaxOptions(options) });
        });
      } catch (error) {
        if (grpcCode(error) === GrpcStatus.ALREADY_EXISTS) throw tableExists(ref);
        throw error;
      }
    });
  }

  describeTable(ref: TableRef, options: CallOptions): Promise<TableSchema> {
    return this.#bounded(options, 'describeTable', async () => {
      const database = await this.#ready(ref.instance, options);
      const [snapshot] = await database.getSnapshot({ strong: true });
      try {
        const table = await readCatalog(snapshot, ref.table, options);
        if (table === undefined) throw tableNotFound(ref);
        return { name: ref.table, families: [...table.families].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0)) };
      } finally {
        snapshot.end();
      }
    });
  }

  listTables(instance: string, options: CallOptions): Promise<string[]> {
    return this.#bounded(options, 'listTables', async () => {
      const database = await this.#ready(instance, options);
      const [rows] = await database.run({ sql: 'SELECT name FROM kvcrud_tables', json: true, gaxOptions: gaxOptions(options) });
      return (rows as Array<{ name: string }>).map((row) => row.name);
    });
  }

  deleteTable(ref: TableRef, options: CallOptions): Promise<void> {
    return this.#bounded(options, 'deleteTable', async () => {
      const database = await this.#ready(ref.instance, options);
      const tableId = await this.#transact(database, options, async (transaction) => {
        const table = await readCatalog(transaction, ref.table, options);
        if (table === undefined) {
          throw tableNotFound(ref);
        }
        // Gone for every reader once this commits; the cells follow in the background.
        transaction.deleteRows('kvcrud_tables', [ref.table]);
        transaction.insert('kvcrud_dropped', { table_id: table.tableId });
        await transaction.commit({ gaxOptions: gaxOptions(options) });
        return table.tableId;
      });
      this.#reclaim(ref.instance, database, [tableId]);
    });
  }

  mutateRow(ref: TableRef, key: Buffer, mutations: readonly Mutation[], options: CallOptions): Promise<void> {
    return this.#bounded(options, 'mutateRow', async () => {
      const [result] = await this.#write(ref, [{ key, mutations }], options, false);
      if (result !== undefined) throw result;
    });
  }

  mutateRows(ref: TableRef, entries: readonly RowMutations[], options: CallOptions): Promise<Array<StoreError | undefined>> {
    return this.#bounded(options, 'mutateRows', () => this.#write(ref, entries, options, true));
  }

  /**
   * Applies the entries whose families the table has, all in one read-write transaction: each
   * entry is atomic (the batch is too, which the contract allows). An entry naming a missing
   * family fails alone; for a single row (`batch` false) it fails the call before anything is written.
   */
  async #write(ref: TableRef, entries: readonly RowMutations[], options: CallOptions, batch: boolean): Promise<Array<StoreError | undefined>> {
    const database = await this.#ready(ref.instance, options);
    return this.#transact(database, options, async (transaction) => {
      const table = await readCatalog(transaction, ref.table, options);
      if (table === undefined) {
        throw tableNotFound(ref);
      }
      const results = entries.map((entry) => missingFamily(table, entry.mutations));
      if (!batch && results[0] !== undefined) {
        await transaction.rollback();
        return results;
      }
      await this.#commitMutations(database, transaction, table, entries.filter((_, index) => results[index] === undefined), options, new Turns());
      return results;
    });
  }

  /**
   * Ends a read-write transaction that has read the catalog row: buffers `entries` (their families
   * checked) as writes of kvcrud_cells with the trimming retention needs, and commits; or rolls
   * back when there is nothing to write. `stored`: the stored timestamps of the columns the
   * entries write, when the transaction has read them already (else they are read here).
   */
  async #commitMutations(
    database: Database,
    transaction: Transaction,
    table: CatalogTable,
    entries: readonly RowMutations[],
    options: CallOptions,
    slices: Turns,
    stored?: ReadonlyMap<string, readonly Micros[]>,
  ): Promise<void> {
    if (stored === undefined) {
      const reads = await columnsToRead(table.policies, entries, slices);
      stored = reads.length === 0 ? new Map<string, Micros[]>() : await readVersions(transaction, table.tableId, reads, () => gaxOptions(options), slices);
    }
    const writes = await planWrites(table.tableId, table.policies, entries, stored, BigInt(Date.now()) * 1000n, slices);
    if (writes.length === 0) {
      await transaction.rollback();
      return;
    }
    // The change feed's record of these writes, in the same commit (changes.ts).
    const changes = changeRows(table.tableId, entries);
    checkCommit(writes, changeRowCost(changes));
    await queueWrites(transaction, writes, slices, await commitEncoder((database.parent as Instance).parent as Spanner, (why) => this.#clientUnshaped(why)));
    transaction.insert('kvcrud_changes', changes);
    await transaction.commit({ gaxOptions: gaxOptions(options) });
  }

  /**
   * The client is not the one commit-request.ts was written for (a new release of it): writes stay
   * correct, but each commit's request is serialized in one stretch of the event loop, long for a
   * wide write (docs/stores/spanner.md). Said once, as a warning, rather than left for a latency
   * graph to find.
   */
  #clientUnshaped(why: string): void {
    if (this.#saidClientUnshaped) return;
    this.#saidClientUnshaped = true;
    this.#logger.warn({ why }, 'spanner: commits are serialized by the client in one go, which holds the event loop on large writes: the client is not shaped as this release expects');
  }

  readRows(ref: TableRef, keys: readonly Buffer[], selection: ReadSelection, options: CallOptions): Promise<Array<Row | null>> {
    const reads = this.#reads;
    if (keys.length === 1 && reads !== undefined) {
      return this.#bounded(options, 'readRows', async () => [await reads.read(ref, readGroup(ref, selection), keys[0] as Buffer, selection, options)]);
    }
    return this.#bounded(options, 'readRows', () => this.#readKeys(ref, keys, selection, options));
  }

  /** The rows of `keys`, in their order (null for a row with no selected cell), from one strong snapshot. */
  async #readKeys(ref: TableRef, keys: readonly Buffer[], selection: ReadSelection, options: CallOptions): Promise<Array<Row | null>> {
    const database = await this.#ready(ref.instance, options);
    const [snapshot] = await database.getSnapshot({ strong: true });
    try {
      const table = await readCatalog(snapshot, ref.table, options);
      if (table === undefined) throw tableNotFound(ref);
      const distinct = [...new Map(keys.map((key) => [key.toString('hex'), key])).values()];
      const families = selectedFamilies(selection);
      // Key ranges through the Read API: Spanner (and its emulator, which would scan the whole
      // table for the same query in SQL) seeks to each row, or to each selected family of it.
      const prefixes = distinct.flatMap((key) => (families === undefined ? [[table.tableId, key]] : families.map((family) => [table.tableId, key, family])));
      const [cells] = await snapshot.read('kvcrud_cells', {
        ranges: prefixes.map((prefix) => ({ startClosed: prefix, endClosed: prefix })),
        columns: CELL_COLUMNS,
        ...READ_JSON,
        gaxOptions: gaxOptions(options),
      });
      const assembler = new RowAssembler(table.policies, selection, BigInt(Date.now()) * 1000n);
      const rows = new Map<string, Row>();
      const slices = new Turns();
      for (const cell of cells as CellRow[]) {
        if (slices.dueAfterItem()) await slices.next();
        const row = assembler.add(cell);
        if (row !== undefined) rows.set(row.key.toString('hex'), row);
      }
      const last = assembler.finish();
      if (last !== undefined) rows.set(last.key.toString('hex'), last);
      return keys.map((key) => rows.get(key.toString('hex')) ?? null);
    } finally {
      snapshot.end();
    }
  }

  async *scanRows(ref: TableRef, scan: ScanRequest, options: CallOptions): AsyncGenerator<Row> {
    const database = await this.#bounded(options, 'scanRows', () => this.#ready(ref.instance, options));
    const [snapshot] = await this.#bounded(options, 'scanRows', () => database.getSnapshot({ strong: true }));
    const aborter = new AbortController();
    try {
      const table = await this.#bounded(options, 'scanRows', () => readCatalog(snapshot, ref.table, options));
      if (table === undefined) throw tableNotFound(ref);
      // A reverse scan is one query stream, destroyed to stop it; a forward scan reads in batches,
      // and stops between them.
      const stream = scan.reverse ? reverseScan(snapshot, table.tableId, scan, options) : undefined;
      const cells = (stream as AsyncIterable<CellRow> | undefined) ?? forwardScan(snapshot, table.tableId, scan, options, aborter.signal);
      const stop = (error: StoreError) => {
        aborter.abort(error);
        stream?.destroy(error);
      };
      const timer = setTimeout(() => {
        this.#suspect();
        stop(deadlineExceeded('spanner', 'scanRows'));
      }, Math.max(0, options.deadline - Date.now()));
      const onAbort = () => stop(callerGone());
      options.signal?.addEventListener('abort', onAbort, { once: true });
      try {
        const assembler = new RowAssembler(table.policies, scan, BigInt(Date.now()) * 1000n);
        let left = scan.limit;
        try {
          for await (const cell of cells) {
            // The client pushes an empty chunk to test whether the reader is ready for more after
            // backpressure; in object mode it arrives as undefined. It is not a row.
            if (cell === undefined) continue;
            const row = assembler.add(cell);
            if (row === undefined) continue;
            yield row;
            if (--left === 0) return;
          }
        } catch (error) {
          throw aborter.signal.aborted ? (aborter.signal.reason as StoreError) : toStoreError(error, 'scanRows');
        }
        const last = assembler.finish();
        if (last !== undefined) yield last;
      } finally {
        clearTimeout(timer);
        options.signal?.removeEventListener('abort', onAbort);
        stream?.destroy();
      }
    } finally {
      snapshot.end();
    }
  }

  /**
   * One read-write transaction: the catalog row, every family named checked, the cells that decide
   * the conditions (their timestamps; then the values of the live columns a condition compares),
   * the branch's mutations buffered as mutateRow's are, and the commit. Spanner's locks on what the
   * transaction read keep any other write to those cells from coming between the reads and the
   * commit; an aborted transaction runs again from the start, reading again.
   */
  checkAndMutateRow(ref: TableRef, key: Buffer, check: ConditionalMutations, options: CallOptions): Promise<boolean> {
    return this.#bounded(options, 'checkAndMutateRow', async () => {
      const database = await this.#ready(ref.instance, options);
      return this.#transact(database, options, async (transaction) => {
        const table = await readCatalog(transaction, ref.table, options);
        if (table === undefined) throw tableNotFound(ref);
        const missing = checkFamilies(check).find((family) => !table.policies.has(family));
        if (missing !== undefined) throw familyNotFound(missing);
        const nowMicros = BigInt(Date.now()) * 1000n;
        const [versions] = await transaction.read('kvcrud_cells', {
          ranges: conditionRanges(table.tableId, key, check.conditions),
          columns: ['family', 'col_hash', 'ts'],
          limit: conditionReadLimit(check.conditions, table.policies),
          ...READ_JSON,
          gaxOptions: gaxOptions(options),
        });
        const live = liveColumns(versions as unknown as StoredVersion[], table.policies, nowMicros);
        const compared = columnsToCompare(check.conditions, live);
        const values = new Map<string, Buffer>();
        if (compared.length > 0) {
          const [cells] = await transaction.read('kvcrud_cells', {
            keys: compared.map((column) => [table.tableId, key, column.family, column.hash, column.timestampMicros.toString()]) as never,
            columns: ['family', 'col_hash', 'value'],
            json: true,
            gaxOptions: gaxOptions(options),
          });
          for (const cell of cells as Array<{ family: string; col_hash: Buffer; value: Buffer }>) values.set(columnKey(cell.family, cell.col_hash), cell.value);
        }
        const matched = conditionsHold(check.conditions, live, values);
        const mutations = matched ? check.mutations : check.otherwise;
        if (mutations.length === 0) {
          await transaction.rollback();
          return matched;
        }
        await this.#commitMutations(database, transaction, table, [{ key, mutations }], options, new Turns());
        return matched;
      });
    });
  }

  /**
   * One read-write transaction: the catalog row, every family named checked, the stored
   * timestamps of each column touched (which retention on write needs as well), the value of each
   * live latest version, the new versions computed here, and the commit. Two calls on the same
   * column are ordered by Spanner's locks; an aborted transaction runs again from the start,
   * reading the values again, so no increment is lost.
   */
  readModifyWriteRow(ref: TableRef, key: Buffer, rules: readonly ModifyRule[], options: CallOptions): Promise<Row> {
    return this.#bounded(options, 'readModifyWriteRow', async () => {
      const database = await this.#ready(ref.instance, options);
      return this.#transact(database, options, async (transaction) => {
        const table = await readCatalog(transaction, ref.table, options);
        if (table === undefined) throw tableNotFound(ref);
        const missing = rules.find((rule) => !table.policies.has(rule.family));
        if (missing !== undefined) throw familyNotFound(missing.family);
        const slices = new Turns();
        const columns = ruleColumns(key, rules);
        const stored = await readVersions(transaction, table.tableId, columns, () => gaxOptions(options), slices);
        const nowMicros = BigInt(Date.now()) * 1000n;
        const latest = columns.flatMap((column) => {
          const newest = stored.get(columnId(key, column.family, column.hash))?.[0];
          const policy = table.policies.get(column.family) ?? {};
          return newest !== undefined && isLive(policy, newest, nowMicros) ? [{ ...column, timestampMicros: newest }] : [];
        });
        const before = new Map<string, Cell>();
        if (latest.length > 0) {
          const [cells] = await transaction.read('kvcrud_cells', {
            keys: latest.map((column) => [table.tableId, key, column.family, column.hash, column.timestampMicros.toString()]) as never,
            columns: ['family', 'col_hash', 'ts', 'value'],
            ...READ_JSON,
            gaxOptions: gaxOptions(options),
          });
          const byId = new Map(latest.map((column) => [columnKey(column.family, column.hash), column]));
          for (const cell of cells as Array<{ family: string; col_hash: Buffer; ts: { value: string }; value: Buffer }>) {
            const id = columnKey(cell.family, cell.col_hash);
            const column = byId.get(id);
            if (column !== undefined) before.set(id, { family: column.family, column: column.column, value: cell.value, timestampMicros: BigInt(cell.ts.value) });
          }
        }
        const cells = applyRules(rules, before, nowMicros);
        const long = cells.find((cell) => cell.value.length > SPANNER_LIMITS.valueBytes);
        if (long !== undefined) {
          throw new StoreError('INVALID_ARGUMENT', `spanner: the append makes a ${long.value.length}-byte value in family ${long.family}; a value is at most ${SPANNER_LIMITS.valueBytes} bytes`, {
            limit: 'valueBytes',
          });
        }
        const mutations: Mutation[] = cells.map((cell) => ({ type: 'set', family: cell.family, column: cell.column, value: cell.value, timestampMicros: cell.timestampMicros }));
        await this.#commitMutations(database, transaction, table, [{ key, mutations }], options, slices, stored);
        return { key, cells };
      });
    });
  }

  /**
   * Follows the table's changes on the change stream kvcrud_feed (change-feed.ts). The start is
   * one strong snapshot of the catalog row: its read timestamp is `now`, and it finds the table.
   */
  readChanges(ref: TableRef, start: ChangeStart, options: FeedOptions): AsyncIterable<ChangeEvent> {
    const decoded = start.type === 'after' ? decodePosition(start.position) : undefined;
    if (start.type === 'after' && decoded === undefined) return failing(new StoreError('INVALID_ARGUMENT', 'spanner readChanges: not a position of this store'));
    const oldest = BigInt(Date.now() - this.limits.changeRetentionSeconds * 1000) * 1_000_000n;
    const from = start.type === 'since' ? start.sinceMicros * 1000n - 1n : decoded?.nanos;
    if (from !== undefined && from < oldest) return failing(new StoreError('OUT_OF_RANGE', 'spanner readChanges: the start is older than the retention'));
    if (decoded !== undefined && decoded.nanos > BigInt(Date.now() + 3_600_000) * 1_000_000n) return failing(new StoreError('INVALID_ARGUMENT', 'spanner readChanges: not a position of this store'));
    return this.#follow(ref, start, decoded, options);
  }

  async *#follow(ref: TableRef, start: ChangeStart, decoded: FeedPosition | undefined, options: FeedOptions): AsyncGenerator<ChangeEvent> {
    const call = { deadline: Date.now() + 30_000, signal: options.signal };
    const found = await this.#bounded(call, 'readChanges', async () => {
      const database = await this.#ready(ref.instance, call);
      const [snapshot] = await database.getSnapshot({ strong: true, returnReadTimestamp: true });
      try {
        const table = await readCatalog(snapshot, ref.table, call);
        return { database, table, readNanos: timestampNanos(snapshot.readTimestamp) };
      } finally {
        snapshot.end();
      }
    });
    const { database, table, readNanos } = found;
    let target: FeedTarget;
    let position: FeedPosition;
    if (decoded !== undefined) {
      position = decoded;
      target = { database, name: ref.table, tableId: decoded.tableId, ...(table?.tableId === decoded.tableId ? {} : { goneBy: readNanos }) };
    } else {
      if (table === undefined) throw tableNotFound(ref);
      position = { tableId: table.tableId, nanos: start.type === 'since' ? start.sinceMicros * 1000n - 1n : readNanos };
      target = { database, name: ref.table, tableId: table.tableId };
    }
    yield* follow(target, position, options.signal);
  }

  checkHealth(options: CallOptions): Promise<void> {
    return this.#bounded(options, 'checkHealth', async () => {
      await Promise.all(
        this.#instances.map(async (instance) => {
          const database = await this.#ready(instance, options);
          await database.run({ sql: 'SELECT 1', gaxOptions: gaxOptions(options) });
        }),
      );
    });
  }

  async close(): Promise<void> {
    this.#closed = true;
    if (this.#reclaims.size > 0) {
      await Promise.race([Promise.allSettled([...this.#reclaims]), new Promise((resolve) => setTimeout(resolve, CLOSE_GRACE_MS).unref())]);
    }
    await Promise.allSettled([this.#clients.close(), ...this.#retired.map(closeClients)]);
  }

  /** Waits for background removal of deleted tables' cells (for tests). */
  async reclaimed(): Promise<void> {
    while (this.#reclaims.size > 0) await Promise.allSettled([...this.#reclaims]);
  }

  /** The instance's database with its schema checked (and, on the emulator, created); once per process. */
  #ready(instance: string, options: CallOptions): Promise<Database> {
    if (!this.#instances.includes(instance)) return Promise.reject(new StoreError('NOT_FOUND', `instance ${instance} is not served by this store`, { resource: 'instance', name: instance }));
    let prepared = this.#prepared.get(instance);
    if (prepared === undefined) {
      prepared = this.#prepare(instance, options);
      this.#prepared.set(instance, prepared);
      // A failure is not remembered: the next call tries again (the database may be back).
      prepared.catch((error: unknown) => {
        this.#prepared.delete(instance);
        this.#logger.warn({ database: instance, code: grpcCode(error), error: firstLine(error) }, 'spanner: the database cannot be prepared; the next call tries again');
      });
    }
    return prepared;
  }

  async #prepare(instance: string, options: CallOptions): Promise<Database> {
    this.#logger.debug({ database: instance }, 'spanner: preparing the database');
    if (this.#renew) this.#renewClient();
    const clients = await this.#clients.clients(options);
    if (this.#emulator) await this.#createOnEmulator(clients.instance, instance);
    let database = clients.databases.get(instance);
    if (database === undefined) {
      database = this.#openDatabase(clients.instance, instance);
      clients.databases.set(instance, database);
    }
    const timeout = Math.max(remaining(options), 30_000);
    try {
      await ensureSchema(database, { timeout, transact: (work) => this.#queue.run(work, Date.now() + timeout) });
    } catch (error) {
      if (grpcCode(error) === GrpcStatus.NOT_FOUND) {
        throw new StoreError(
          'UNAVAILABLE',
          `spanner database ${database.formattedName_} not found: create it (gcloud spanner databases create ${instance} --instance=${this.#instanceId}); kvcrud creates its tables in it`,
          { cause: error },
        );
      }
      throw error;
    }
    void this.#reclaimLeftovers(instance, database);
    this.#logger.debug({ database: instance }, 'spanner: the database is ready');
    return database;
  }

  /** The emulator starts empty: its instance and each database are created on first use. */
  async #createOnEmulator(spannerInstance: Instance, instance: string): Promise<void> {
    this.#emulatorInstance ??= (async () => {
      try {
        const admin = spannerInstance as unknown as { create(config: object): Promise<[unknown, LongRunning]> };
        const [, operation] = await admin.create({ config: 'emulator-config', nodes: 1, displayName: this.#instanceId });
        await operation.promise();
      } catch (error) {
        if (grpcCode(error) !== GrpcStatus.ALREADY_EXISTS) throw error;
      }
    })();
    try {
      await this.#emulatorInstance;
    } catch (error) {
      this.#emulatorInstance = undefined;
      throw error;
    }
    try {
      const [, operation] = await spannerInstance.createDatabase(instance);
      await operation.promise();
    } catch (error) {
      if (grpcCode(error) !== GrpcStatus.ALREADY_EXISTS) throw error;
    }
  }

  /** Cells of tables deleted by a process that stopped before removing them. */
  async #reclaimLeftovers(instance: string, database: Database): Promise<void> {
    try {
      const [rows] = await database.run({ sql: 'SELECT table_id FROM kvcrud_dropped', json: true });
      const ids = (rows as Array<{ table_id: string }>).map((row) => row.table_id);
      if (ids.length > 0) this.#reclaim(instance, database, ids);
    } catch (error) {
      this.#logger.warn({ err: error, database: instance }, 'spanner: cannot list deleted tables whose cells remain; will try at the next start');
    }
  }

  /** Removes the cells of deleted tables in the background: a partitioned DELETE each, then its kvcrud_dropped row. */
  #reclaim(instance: string, database: Database, tableIds: readonly string[]): void {
    const work = (async () => {
      for (const tableId of tableIds) {
        const deadline = Date.now() + RECLAIM_TIMEOUT_MS;
        try {
          await this.#queue.run(() => database.runPartitionedUpdate({ sql: 'DELETE FROM kvcrud_cells WHERE table_id = @table', params: { table: tableId } }), deadline);
          await this.#queue.run(
            () =>
              database.runTransactionAsync({ timeout: RECLAIM_TIMEOUT_MS }, async (transaction) => {
                transaction.deleteRows('kvcrud_dropped', [tableId]);
                await transaction.commit();
              }),
            deadline,
          );
        } catch (error) {
          this.#logger.warn({ err: error, database: instance, tableId }, 'spanner: the cells of a deleted table remain; they are removed at the next start');
        }
      }
    })();
    this.#reclaims.add(work);
    void work.finally(() => this.#reclaims.delete(work));
  }

  /**
   * A call found no answer before its deadline. The client retries a Spanner it cannot reach
   * (streaming reads without end), so that alone cannot tell a slow Spanner from one that is down:
   * a probe of one unary call without retries can. While probes find it unreachable, calls fail
   * at once with UNAVAILABLE (a fast 503) instead of each waiting out its deadline; probing goes
   * on every half second until it answers.
   */
  #suspect(): void {
    if (this.#probing !== undefined || this.#closed) return;
    this.#probing = (async () => {
      while (!this.#closed) {
        const failure = await this.#probe();
        if (failure === undefined) {
          if (this.#unreachable !== undefined) this.#logger.info('spanner: reachable again');
          this.#unreachable = undefined;
          return;
        }
        if (this.#unreachable === undefined) this.#logger.warn({ error: failure }, 'spanner: unreachable; calls fail at once until it answers');
        this.#unreachable = failure;
        await new Promise((resolve) => setTimeout(resolve, PROBE_INTERVAL_MS));
      }
    })().finally(() => (this.#probing = undefined));
  }

  /** Creates (and drops) a session: why Spanner cannot be reached, or undefined when it answered. */
  async #probe(): Promise<string | undefined> {
    const database = this.#clients.started?.databases.values().next().value;
    if (database === undefined) return undefined;
    try {
      const [session] = await database.createSession({ gaxOptions: { timeout: PROBE_TIMEOUT_MS, maxRetries: 0 } });
      void session.delete().catch(() => undefined);
      return undefined;
    } catch (error) {
      // Reachable, but the database is gone (an emulator restarted empty): the session pool
      // waits for it without end, so it is prepared again instead.
      this.#forgetIfGone(error);
      const code = grpcCode(error);
      // Any answer from Spanner, even a refusal, means it is reachable.
      return code === GrpcStatus.UNAVAILABLE || code === GrpcStatus.DEADLINE_EXCEEDED || code === undefined ? firstLine(error) : undefined;
    }
  }

  /**
   * A database (or the Spanner instance) that was there is gone: deleted, or an emulator restarted
   * empty. Each database is prepared again on its next call, so the store recovers when it is back
   * (on the emulator, by creating it again) without a restart of the service.
   */
  #forgetIfGone(error: unknown): void {
    if (grpcCode(error) !== GrpcStatus.NOT_FOUND || !/(Database|Instance) not found/i.test(firstLine(error))) return;
    this.#prepared.clear();
    this.#emulatorInstance = undefined;
    if (!this.#renew) this.#logger.info({ error: firstLine(error) }, 'spanner: a database is gone; each is prepared again on its next call, with a new client');
    this.#renew = true;
  }

  /**
   * The session pools of a database that is gone keep sessions that no longer exist and wait
   * without end for new ones; and a pool cannot be closed while calls still hold its sessions.
   * So the client is replaced, once the database is there again (its new pool then fills at
   * once), and the old one is closed with the store.
   */
  #renewClient(): void {
    this.#renew = false;
    const current = this.#clients.started;
    if (current !== undefined) this.#retired.push(current);
    this.#clients.forget();
  }

  /** One read-write transaction within the call's deadline, with the client's retry of aborted ones; queued on the emulator. */
  #transact<T>(database: Database, options: CallOptions, work: (transaction: Transaction) => Promise<T>): Promise<T> {
    return this.#queue.run(() => {
      if (options.signal?.aborted === true) return Promise.reject(callerGone());
      const timeout = remaining(options);
      if (timeout <= 0) return Promise.reject(deadlineExceeded('spanner', 'transaction'));
      return database.runTransactionAsync({ timeout }, async (transaction) => {
        // A call abandoned at its deadline may get its session much later (Spanner was
        // unreachable): it must not write then, behind its caller's back.
        if (Date.now() >= options.deadline || options.signal?.aborted === true) throw deadlineExceeded('spanner', 'transaction');
        try {
          return await work(transaction);
        } catch (error) {
          // An open transaction holds its locks until Spanner times it out (the emulator, which
          // runs one at a time, holds every other): roll it back. An aborted one is retried.
          if (grpcCode(error) !== GrpcStatus.ABORTED) await transaction.rollback().catch(() => undefined);
          throw error;
        }
      });
    }, options.deadline, options.signal);
  }

  /**
   * Runs one call against the deadline and the caller's signal. A call the client cannot take
   * back is abandoned instead: its answer, when it comes, is dropped.
   */
  #bounded<T>(options: CallOptions, operation: string, work: () => Promise<T>): Promise<T> {
    return bounded(
      options,
      {
        store: 'spanner',
        operation,
        refuse: () => (this.#unreachable === undefined ? undefined : new StoreError('UNAVAILABLE', `spanner ${operation}: Spanner is unreachable (${this.#unreachable})`)),
        // Still starting the client (loading credentials): no call has reached Spanner.
        unreached: () =>
          this.#clients.starting
            ? new StoreError('UNAVAILABLE', `spanner ${operation}: the client did not start before the deadline (its credentials did not load: check the credentials file, or that the metadata server answers)`)
            : undefined,
        onTimeout: () => this.#suspect(),
        toStoreError: (error) => {
          this.#forgetIfGone(error);
          return toStoreError(error, operation);
        },
      },
      work,
    );
  }
}

/** The generated clients the Spanner client calls, started before it is used. */
const GENERATED_CLIENTS = ['SpannerClient', 'DatabaseAdminClient', 'InstanceAdminClient'] as const;

interface SpannerClients {
  readonly spanner: Spanner;
  readonly instance: Instance;
  /** Each served instance's Database, opened on its first use (#prepare). */
  readonly databases: Map<string, Database>;
}

async function closeClients(clients: SpannerClients): Promise<void> {
  await Promise.allSettled([...clients.databases.values()].map((database) => database.close()));
  await clients.spanner.close();
}

const CELL_COLUMNS = ['row_key', 'family', 'col', 'ts', 'value'];

/** Cells one batch of a forward scan reads at first; doubled while a single row does not fit. */
const SCAN_BATCH_CELLS = 1000;

/**
 * A scan in key order: reads of the table's key range through the Read API (which Spanner serves
 * by seeking, as it is the primary key's order), a batch of cells at a time, so that a scan that
 * stops after a page never has more than a batch in memory. All from one snapshot: every row is
 * read whole, and the scan is consistent. A batch that ends inside a row holds that row back and
 * reads it again, whole, in the next.
 */
async function* forwardScan(snapshot: Snapshot, tableId: string, scan: ScanRequest, options: CallOptions, stopped?: AbortSignal): AsyncGenerator<CellRow> {
  const end = scan.range.end === undefined ? { endClosed: [tableId] } : { endOpen: [tableId, scan.range.end] };
  let start: { startClosed: unknown[] } = { startClosed: scan.range.start === undefined ? [tableId] : [tableId, scan.range.start] };
  let batch = SCAN_BATCH_CELLS;
  while (stopped?.aborted !== true) {
    const [rows] = await snapshot.read('kvcrud_cells', { ranges: [{ ...start, ...end }] as never, columns: CELL_COLUMNS, limit: batch, ...READ_JSON, gaxOptions: gaxOptions(options) });
    const cells = rows as unknown as CellRow[];
    if (cells.length < batch) {
      yield* cells;
      return;
    }
    const lastKey = (cells[cells.length - 1] as CellRow).row_key;
    const firstOfLast = cells.findIndex((cell) => cell.row_key.equals(lastKey));
    if (firstOfLast === 0) {
      batch *= 2; // one row larger than the batch
      continue;
    }
    yield* cells.slice(0, firstOfLast);
    start = { startClosed: [tableId, lastKey] };
  }
}

/** A scan in descending key order: the Read API reads forward only, so a query ordered by row_key DESC. */
function reverseScan(snapshot: Snapshot, tableId: string, scan: ScanRequest, options: CallOptions): NodeJS.ReadableStream & { destroy(error?: Error): void } {
  const families = selectedFamilies(scan);
  const conditions = ['table_id = @table'];
  if (scan.range.start !== undefined) conditions.push('row_key >= @start');
  if (scan.range.end !== undefined) conditions.push('row_key < @end');
  if (families !== undefined) conditions.push('family IN UNNEST(@families)');
  return snapshot.runStream({
    sql: `SELECT row_key, family, col, ts, value FROM kvcrud_cells WHERE ${conditions.join(' AND ')} ORDER BY row_key DESC, family, col_hash, ts DESC`,
    params: {
      table: tableId,
      ...(scan.range.start === undefined ? {} : { start: scan.range.start }),
      ...(scan.range.end === undefined ? {} : { end: scan.range.end }),
      ...(families === undefined ? {} : { families }),
    },
    types: {
      table: 'string',
      ...(scan.range.start === undefined ? {} : { start: 'bytes' }),
      ...(scan.range.end === undefined ? {} : { end: 'bytes' }),
      ...(families === undefined ? {} : { families: { type: 'array', child: 'string' } }),
    },
    ...READ_JSON,
    gaxOptions: gaxOptions(options),
  });
}

/** The table's catalog row, read in a transaction or snapshot. */
async function readCatalog(reader: Snapshot, name: string, options: CallOptions): Promise<CatalogTable | undefined> {
  const [rows] = await reader.read('kvcrud_tables', { keys: [name], columns: ['table_id', 'families'], json: true, gaxOptions: gaxOptions(options) });
  const row = rows[0] as { table_id: string; families: string } | undefined;
  if (row === undefined) return undefined;
  const families = (JSON.parse(row.families) as FamilySpec[]).map((family) => ({ name: family.name, ...policyOf(family) }));
  return { tableId: row.table_id, families, policies: new Map(families.map((family) => [family.name, policyOf(family)])) };
}

/** What single-key reads share to be read together: the table and the selection. */
function readGroup(ref: TableRef, selection: ReadSelection): string {
  const columns = selection.columns?.map((selector) => (selector.column === undefined ? selector.family : `${selector.family}:${selector.column.toString('hex')}`)).join(',');
  return [ref.instance, ref.table, selection.versions, columns ?? '*'].join('\u0000');
}

function policyOf(family: FamilyPolicy): FamilyPolicy {
  return {
    ...(family.maxVersions === undefined ? {} : { maxVersions: family.maxVersions }),
    ...(family.maxAgeSeconds === undefined ? {} : { maxAgeSeconds: family.maxAgeSeconds }),
  };
}

function missingFamily(table: CatalogTable, mutations: readonly Mutation[]): StoreError | undefined {
  for (const mutation of mutations) {
    if (mutation.type !== 'deleteRow' && !table.policies.has(mutation.family)) return familyNotFound(mutation.family);
  }
  return undefined;
}

/**
 * Call settings for one RPC of a call: its deadline, and no retries of the client's own. A
 * Spanner that does not answer is reported at once (503), as for Bigtable, instead of being
 * retried until the deadline; aborted transactions are still retried, by the transaction runner.
 */
function gaxOptions(options: CallOptions): { timeout: number; maxRetries: 0 } {
  return { timeout: remaining(options), maxRetries: 0 };
}

function firstLine(error: unknown): string {
  return (error instanceof Error ? error.message : String(error)).split('\n')[0]?.slice(0, 300) ?? '';
}

function remaining(options: CallOptions): number {
  return Math.max(0, options.deadline - Date.now());
}

function splitHostPort(hostPort: string | undefined): [string | undefined, number | undefined] {
  if (hostPort === undefined) return [undefined, undefined];
  const colon = hostPort.lastIndexOf(':');
  return [hostPort.slice(0, colon), Number(hostPort.slice(colon + 1))];
}
