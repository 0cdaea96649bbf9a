import type { Logger } from 'pino';
import { bounded, deadlineExceeded } from '../bounded.ts';
import { StoreError, familyNotFound, notACounter, tableExists, tableNotFound } from '../errors.ts';
import type {
  CallOptions,
  Condition,
  ConditionalMutations,
  DataStore,
  FamilySpec,
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
import { FeedConnections, followChanges } from './change-feed.ts';
import { Catalog } from './catalog.ts';
import { type RedisConnection, openConnection } from './connection.ts';
import { RECORD_FAMILIES, RECORD_GENERATION, type TableKeys, type TableRecord, newGeneration, parseFamilies, rowKey, tableKeys, tableRecordKey } from './keys.ts';
import { REDIS_CAPABILITIES, REDIS_LIMITS } from './limits.ts';
import { Reclaimer } from './reclaimer.ts';
import { toStoreError } from './redis-errors.ts';
import { Turns } from '../../lib/turns.ts';
import { type TableFamilies, decodeRow, packConditions, packMutations, packRules, tableFamilies } from './row-codec.ts';
import { CHECK_AND_MUTATE_ROW, CREATE_TABLE, DELETE_TABLE, MUTATE_ROW, READ_MODIFY_WRITE_ROW, READ_ROWS, SCAN_ROWS } from './scripts.ts';

export interface RedisStoreOptions {
  readonly url: string;
  readonly cluster?: boolean;
  readonly authStringFile?: string;
  readonly caFile?: string;
  readonly instances: readonly string[];
  readonly logger: Logger;
  /** Feeds that block on a connection of their own (the others poll the shared one); FEED_CONNECTIONS by default. */
  readonly feedConnections?: number;
}

/** Rows one read script reads at most (in a cluster), so that none holds Redis for long. */
const ROWS_PER_SCRIPT = 100;
/** Index entries one scan script reads at most (each with its row hash), and at least. */
const SCAN_BATCH_MAX = 250;
const SCAN_BATCH_MIN = 16;

/** A table as this process last saw its record. Families and policies never change for a generation. */
interface TableGeneration {
  readonly generation: string;
  readonly keys: TableKeys;
  readonly families: TableFamilies;
  /** Whether any family has a maxAge: reads need the clock only then. */
  readonly hasMaxAge: boolean;
  /** The mutateRow script's maxAge argument: "<family> <seconds> …" for the families that have one. */
  readonly maxAgePolicy: string;
}

/** A script's answer when the generation it was given is no longer the table's (deleted, or lost with its primary's data). */
const GONE = Symbol('generation gone');

/**
 * RedisStore is the DataStore on Redis (Memorystore for Redis): one hash per row, a sorted set
 * per table as its ordered index, a record per table saying that it exists and with which
 * families, a list of tables per instance, and one Lua script per row write. See keys.ts for the
 * layout and docs/stores/redis.md for what it guarantees.
 *
 * Whether a table exists is its record's to say, and every call about a table asks that record,
 * in the table's own slot, beside its rows: never the instance's list (catalog.ts), which only
 * listTables reads. Table generations are cached per process. A cached generation is only a
 * hint: every call checks that the record still names it, a write or scan script atomically
 * with its work, a read right after its rows; on GONE the record is read again. So a table
 * deleted, recreated, or lost with its primary's data is never served from a stale entry, and a
 * read costs one round trip.
 */
export class RedisStore implements DataStore {
  readonly capabilities = REDIS_CAPABILITIES;
  readonly limits = REDIS_LIMITS;
  readonly #connection: RedisConnection;
  readonly #catalog: Catalog;
  readonly #reclaimer: Reclaimer;
  readonly #tables = new Map<string, TableGeneration>();
  readonly #cluster: boolean;
  readonly #feeds: FeedConnections;

  /** Opens the store and starts connecting; a Redis that is down now is reported by each call and by checkHealth. */
  static open(options: RedisStoreOptions): RedisStore {
    return new RedisStore(options);
  }

  private constructor(options: RedisStoreOptions) {
    this.#cluster = options.cluster === true;
    this.#connection = openConnection(options);
    this.#feeds = new FeedConnections(this.#connection, options.feedConnections);
    this.#catalog = new Catalog(this.#connection, options.logger);
    this.#reclaimer = new Reclaimer(this.#connection, this.#catalog, options.instances, options.logger);
    this.#reclaimer.start();
  }

  createTable(ref: TableRef, families: readonly FamilySpec[], options: CallOptions): Promise<void> {
    return this.#bounded(options, 'createTable', async () => {
      // The name first, so that listTables finds every table that has a record.
      const notAfter = await this.#catalog.register(ref.instance, ref.table);
      const record: TableRecord = {
        generation: newGeneration(),
        families: families.map((family) => (family.maxAgeSeconds === undefined ? { name: family.name } : { name: family.name, maxAgeSeconds: family.maxAgeSeconds })),
      };
      const created = await this.#connection.run(CREATE_TABLE, [tableRecordKey(ref.instance, ref.table)], [record.generation, JSON.stringify(record.families), String(notAfter)]);
      if (created === 0) throw tableExists(ref);
      if (created === 2) throw new StoreError('UNAVAILABLE', `redis createTable: creating ${ref.instance}/${ref.table} took too long; nothing was created`);
      this.#tables.set(cacheKey(ref), generationOf(ref, record));
    });
  }

  describeTable(ref: TableRef, options: CallOptions): Promise<TableSchema> {
    return this.#bounded(options, 'describeTable', async () => {
      const record = await this.#readRecord(ref);
      if (record === undefined) throw tableNotFound(ref);
      const families = [...record.families]
        .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
        // Only the latest version is kept, whatever was asked at creation.
        .map((family) => (family.maxAgeSeconds === undefined ? { name: family.name, maxVersions: 1 } : { name: family.name, maxVersions: 1, maxAgeSeconds: family.maxAgeSeconds }));
      return { name: ref.table, families };
    });
  }

  listTables(instance: string, options: CallOptions): Promise<string[]> {
    return this.#bounded(options, 'listTables', () => this.#catalog.list(instance));
  }

  deleteTable(ref: TableRef, options: CallOptions): Promise<void> {
    return this.#bounded(options, 'deleteTable', async () => {
      // From here on every call on this generation, in any process, answers "gone".
      const generation = (await this.#connection.run(DELETE_TABLE, [tableRecordKey(ref.instance, ref.table)], [])) as Buffer | null;
      this.#tables.delete(cacheKey(ref));
      if (generation === null) throw tableNotFound(ref);
      this.#reclaimer.reclaim(ref.instance, ref.table);
    });
  }

  mutateRow(ref: TableRef, key: Buffer, mutations: readonly Mutation[], options: CallOptions): Promise<void> {
    return this.#bounded(options, 'mutateRow', () =>
      this.#withTable(ref, async (table) => {
        const missing = missingFamily(table, mutations);
        if (missing !== undefined) {
          return this.#familyMissing(ref, table, (): undefined => {
            throw familyNotFound(missing);
          });
        }
        return this.#mutate(table, key, await packMutations(mutations, new Turns()));
      }),
    );
  }

  mutateRows(ref: TableRef, entries: readonly RowMutations[], options: CallOptions): Promise<Array<StoreError | undefined>> {
    return this.#bounded(options, 'mutateRows', () =>
      this.#withTable(ref, async (table) => {
        const missing = entries.map((entry) => missingFamily(table, entry.mutations));
        if (missing.some((family) => family !== undefined)) {
          // Before anything is written: is the cached generation still the table's?
          const current = await this.#familyMissing(ref, table, () => undefined);
          if (current === GONE) return GONE;
        }
        // Every entry packed first, one after the other, so that the packing of a large batch is paced as a whole.
        const turns = new Turns();
        const packed: Array<Buffer | undefined> = [];
        for (const [index, entry] of entries.entries()) packed.push(missing[index] === undefined ? await packMutations(entry.mutations, turns) : undefined);
        // One script per entry, all pipelined on the connection: each entry is atomic, the batch is not.
        const settled = await Promise.allSettled(
          entries.map((entry, index) => {
            const mutations = packed[index];
            return mutations === undefined ? Promise.resolve(familyNotFound(missing[index] ?? '')) : this.#mutate(table, entry.key, mutations);
          }),
        );
        const written = settled.filter((_, index) => missing[index] === undefined);
        const gone = written.filter((result) => result.status === 'fulfilled' && result.value === GONE).length;
        if (gone > 0 && gone === written.length) return GONE; // deleted (or recreated) before any entry: resolve the table again
        if (gone > 0) throw new StoreError('NOT_FOUND', `table ${ref.instance}/${ref.table} was deleted during the batch`, { resource: 'table', name: ref.table });
        const failed = written.filter((result) => result.status === 'rejected');
        if (failed.length > 0 && failed.length === entries.length) throw toStoreError((failed[0] as PromiseRejectedResult).reason, 'mutateRows');
        return settled.map((result) => (result.status === 'fulfilled' ? (result.value as StoreError | undefined) : toStoreError(result.reason, 'mutateRows')));
      }),
    );
  }

  readRows(ref: TableRef, keys: readonly Buffer[], selection: ReadSelection, options: CallOptions): Promise<Array<Row | null>> {
    return this.#bounded(options, 'readRows', () => this.#withTable(ref, (table) => this.#readRows(table, keys, selection)));
  }

  async #readRows(table: TableGeneration, keys: readonly Buffer[], selection: ReadSelection): Promise<Array<Row | null> | typeof GONE> {
    const now = table.hasMaxAge ? BigInt(Date.now()) * 1000n : 0n;
    const decode = async (rows: readonly unknown[]) => {
      const turns = new Turns();
      const decoded: Array<Row | null> = [];
      for (const [index, key] of keys.entries()) decoded.push(await decodeRow(key, rows[index] as Buffer[], selection.columns, table.families, now, turns));
      return decoded;
    };
    if (!this.#cluster) {
      // The rows, then the table's record, in one round trip of plain commands, which Redis runs
      // in order. A generation's rows are removed only after it has left the record: if the
      // record still names it after the last row was read, no row was read from a table being deleted.
      const replies = keys.map((key) => this.#connection.send(['HGETALL', rowKey(table.keys, key)]));
      replies.push(this.#connection.send(['HGET', table.keys.record, RECORD_GENERATION]));
      const rows = await Promise.all(replies);
      return (rows[keys.length] as Buffer | null)?.toString() === table.generation ? decode(rows) : GONE;
    }
    return this.#readRowsAtomically(table, keys, decode);
  }

  async #readRowsAtomically(
    table: TableGeneration,
    keys: readonly Buffer[],
    decode: (rows: readonly unknown[]) => Promise<Array<Row | null>>,
  ): Promise<Array<Row | null> | typeof GONE> {
    // In a cluster, a slot that is being moved can take commands of one connection out of order:
    // each script checks the record and reads its rows atomically instead. A script holds
    // Redis's single thread while it runs, so a batch of keys is read by several of them.
    const chunks: Array<readonly Buffer[]> = [];
    for (let first = 0; first < keys.length; first += ROWS_PER_SCRIPT) chunks.push(keys.slice(first, first + ROWS_PER_SCRIPT));
    const replies = (await Promise.all(
      chunks.map((chunk) => this.#connection.run(READ_ROWS, [table.keys.record, ...chunk.map((key) => rowKey(table.keys, key))], [table.generation])),
    )) as Array<Buffer[][] | null>;
    if (replies.some((reply) => reply === null)) return GONE;
    return decode(replies.flatMap((reply) => reply as Buffer[][]));
  }

  async *scanRows(ref: TableRef, scan: ScanRequest, options: CallOptions): AsyncGenerator<Row> {
    let table = await this.#bounded(options, 'scanRows', () => this.#table(ref));
    let lower: Buffer | string = scan.range.start === undefined ? '-' : Buffer.concat([Buffer.from('['), scan.range.start]);
    let upper: Buffer | string = scan.range.end === undefined ? '+' : Buffer.concat([Buffer.from('('), scan.range.end]);
    let remaining = scan.limit;
    let first = true;
    while (remaining > 0) {
      const batch = Math.min(SCAN_BATCH_MAX, Math.max(remaining, SCAN_BATCH_MIN));
      const args = [table.generation, table.keys.rowPrefix, lower, upper, scan.reverse ? '1' : '0', String(batch)];
      const reply = (await this.#bounded(options, 'scanRows', () => this.#connection.run(SCAN_ROWS, [table.keys.record, table.keys.rows], args))) as
        | Array<Buffer | Buffer[]>
        | null;
      if (reply === null) {
        // A stale generation before anything was read: the table may have been recreated.
        const fresh = first ? await this.#bounded(options, 'scanRows', () => this.#table(ref, true)) : undefined;
        if (fresh === undefined || fresh.generation === table.generation) throw tableNotFound(ref);
        table = fresh;
        continue;
      }
      first = false;
      const now = table.hasMaxAge ? BigInt(Date.now()) * 1000n : 0n;
      const entries = reply.length / 2;
      const turns = new Turns();
      for (let i = 0; i < reply.length; i += 2) {
        const row = await decodeRow(reply[i] as Buffer, reply[i + 1] as Buffer[], scan.columns, table.families, now, turns);
        if (row === null) continue;
        yield row;
        if (--remaining === 0) return;
      }
      if (entries < batch) return;
      // Go on after the last key read, whichever way the scan runs.
      const last = Buffer.concat([Buffer.from('('), reply[reply.length - 2] as Buffer]);
      if (scan.reverse) upper = last;
      else lower = last;
    }
  }

  checkAndMutateRow(ref: TableRef, key: Buffer, check: ConditionalMutations, options: CallOptions): Promise<boolean> {
    return this.#bounded(options, 'checkAndMutateRow', () =>
      this.#withTable(ref, async (table) => {
        const missing = missingConditionFamily(table, check.conditions) ?? missingFamily(table, check.mutations) ?? missingFamily(table, check.otherwise);
        if (missing !== undefined) {
          return this.#familyMissing(ref, table, (): boolean => {
            throw familyNotFound(missing);
          });
        }
        const turns = new Turns();
        const mutations = await packMutations(check.mutations, turns);
        const otherwise = await packMutations(check.otherwise, turns);
        // The conditions are decided and the branch applied in one script: nothing comes between.
        const reply = await this.#connection.run(CHECK_AND_MUTATE_ROW, this.#rowScriptKeys(table, key), [
          ...this.#rowScriptArgs(table, key),
          packConditions(check.conditions),
          mutations,
          otherwise,
        ]);
        return reply === -1 ? GONE : reply === 1;
      }),
    );
  }

  readModifyWriteRow(ref: TableRef, key: Buffer, rules: readonly ModifyRule[], options: CallOptions): Promise<Row> {
    return this.#bounded(options, 'readModifyWriteRow', () =>
      this.#withTable(ref, async (table) => {
        const missing = rules.find((rule) => !table.families.has(rule.family))?.family;
        if (missing !== undefined) {
          return this.#familyMissing(ref, table, (): Row => {
            throw familyNotFound(missing);
          });
        }
        // Read, modify and write in one script: no other write to the row comes between.
        const reply = (await this.#connection.run(READ_MODIFY_WRITE_ROW, this.#rowScriptKeys(table, key), [...this.#rowScriptArgs(table, key), packRules(rules)])) as
          | [1, ...Buffer[]]
          | [0, Buffer, number]
          | null;
        if (reply === null) return GONE;
        if (reply[0] === 0) throw notACounter(reply[1].toString(), reply[2]);
        // The cells as the script stored them: each is the column's latest version, none expired.
        const row = await decodeRow(key, reply.slice(1) as Buffer[], undefined, table.families, 0n, new Turns());
        if (row === null) throw new StoreError('INTERNAL', 'redis readModifyWriteRow: the script answered no cell');
        return row;
      }),
    );
  }

  readChanges(ref: TableRef, start: ChangeStart, options: FeedOptions): AsyncIterable<ChangeEvent> {
    return followChanges(ref, start, options, {
      connection: this.#connection,
      feeds: this.#feeds,
      generation: async (table, fresh) => (await this.#table(table, fresh)).generation,
    });
  }

  checkHealth(options: CallOptions): Promise<void> {
    // Every instance is a key namespace of the same server (or cluster): PING answers for all of them.
    return this.#bounded(options, 'checkHealth', () => this.#connection.ping());
  }

  async close(): Promise<void> {
    const reclaiming = this.#reclaimer.stop();
    // Closing the connection fails the reclaimer's command in flight, so closing never waits for
    // a Redis that does not answer.
    this.#feeds.closeAll();
    this.#connection.close();
    await reclaiming;
  }

  /** Waits for background reclaiming to finish (for tests). */
  reclaimed(): Promise<void> {
    return this.#reclaimer.idle();
  }

  /** Applies one row's packed mutations (their families checked): undefined when applied, or GONE. */
  async #mutate(table: TableGeneration, key: Buffer, packed: Buffer): Promise<undefined | typeof GONE> {
    const reply = await this.#connection.run(MUTATE_ROW, this.#rowScriptKeys(table, key), [...this.#rowScriptArgs(table, key), packed]);
    return reply === 1 ? GONE : undefined;
  }

  /** The KEYS of every row script: the table's record, its index, the row, the change stream. */
  #rowScriptKeys(table: TableGeneration, key: Buffer): [Buffer | string, Buffer | string, Buffer | string, Buffer | string] {
    return [table.keys.record, table.keys.rows, rowKey(table.keys, key), table.keys.changes];
  }

  /** The first ARGV of every row script: generation, row key, this process's clock (µs), the maxAge policy. */
  #rowScriptArgs(table: TableGeneration, key: Buffer): [string, Buffer, string, string] {
    return [table.generation, key, String(Date.now() * 1000), table.maxAgePolicy];
  }

  /**
   * A mutation names a family the cached generation lacks. Families never change within a
   * generation, but the cache may hold one that was deleted or replaced by a table of the same
   * name: the record decides. GONE when the table is no longer that generation; otherwise what
   * `answer` says.
   */
  async #familyMissing<T>(ref: TableRef, table: TableGeneration, answer: () => T): Promise<T | typeof GONE> {
    const record = await this.#readRecord(ref);
    return record?.generation === table.generation ? answer() : GONE;
  }

  #withTable<T>(ref: TableRef, work: (table: TableGeneration) => Promise<T | typeof GONE>): Promise<T> {
    const cached = this.#tables.get(cacheKey(ref));
    if (cached === undefined) return this.#table(ref).then((table) => this.#withGeneration(ref, table, work));
    return this.#withGeneration(ref, cached, work);
  }

  #withGeneration<T>(ref: TableRef, table: TableGeneration, work: (table: TableGeneration) => Promise<T | typeof GONE>): Promise<T> {
    return work(table).then((result) => (result === GONE ? this.#retryFresh(ref, table, work) : result));
  }

  /** The work found the generation gone: read the record again, and retry on a new generation if there is one. */
  async #retryFresh<T>(ref: TableRef, table: TableGeneration, work: (table: TableGeneration) => Promise<T | typeof GONE>): Promise<T> {
    const fresh = await this.#table(ref, true);
    if (fresh.generation !== table.generation) {
      const retried = await work(fresh);
      if (retried !== GONE) return retried;
    }
    this.#tables.delete(cacheKey(ref));
    throw tableNotFound(ref);
  }

  /** The table's generation: from the cache, or (fresh) from its record. */
  async #table(ref: TableRef, fresh = false): Promise<TableGeneration> {
    const cached = fresh ? undefined : this.#tables.get(cacheKey(ref));
    if (cached !== undefined) return cached;
    const record = await this.#readRecord(ref);
    if (record === undefined) {
      this.#tables.delete(cacheKey(ref));
      throw tableNotFound(ref);
    }
    const table = generationOf(ref, record);
    this.#tables.set(cacheKey(ref), table);
    return table;
  }

  /** The table's record: its live generation and families, or undefined when there is no such table. */
  async #readRecord(ref: TableRef): Promise<TableRecord | undefined> {
    const [generation, families] = (await this.#connection.send(['HMGET', tableRecordKey(ref.instance, ref.table), RECORD_GENERATION, RECORD_FAMILIES])) as [
      Buffer | null,
      Buffer | null,
    ];
    return generation === null || families === null ? undefined : { generation: generation.toString(), families: parseFamilies(families.toString()) };
  }

  /**
   * Runs one call against the deadline and the caller's signal, once the connection's first
   * attempt has settled. node-redis cannot take back a command it has written, so the call is
   * abandoned instead: its answer, when it comes, is dropped, and the connection stays in step.
   */
  #bounded<T>(options: CallOptions, operation: string, work: () => Promise<T>): Promise<T> {
    return bounded(options, { store: 'redis', operation, toStoreError: (error) => toStoreError(error, operation) }, () => {
      const connecting = this.#connection.firstAttempt;
      if (connecting === undefined) return work();
      return connecting.then(() => {
        if (Date.now() >= options.deadline || options.signal?.aborted === true) throw deadlineExceeded('redis', operation);
        return work();
      });
    });
  }
}

function generationOf(ref: TableRef, record: TableRecord): TableGeneration {
  return {
    generation: record.generation,
    keys: tableKeys(ref.instance, ref.table, record.generation),
    families: tableFamilies(record.families),
    hasMaxAge: record.families.some((family) => (family.maxAgeSeconds ?? 0) > 0),
    maxAgePolicy: record.families
      .filter((family) => (family.maxAgeSeconds ?? 0) > 0)
      .map((family) => `${family.name} ${family.maxAgeSeconds}`)
      .join(' '),
  };
}

/** The first family, in mutation order, that the table lacks. */
function missingFamily(table: TableGeneration, mutations: readonly Mutation[]): string | undefined {
  for (const mutation of mutations) {
    if (mutation.type !== 'deleteRow' && !table.families.has(mutation.family)) return mutation.family;
  }
  return undefined;
}

/** The first family, in condition order, that the table lacks. */
function missingConditionFamily(table: TableGeneration, conditions: readonly Condition[]): string | undefined {
  for (const condition of conditions) {
    if (condition.type !== 'rowExists' && !table.families.has(condition.family)) return condition.family;
  }
  return undefined;
}

function cacheKey(ref: TableRef): string {
  return `${ref.instance}/${ref.table}`;
}
