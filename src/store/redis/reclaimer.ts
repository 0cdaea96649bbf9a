import type { Logger } from 'pino';
import type { Catalog } from './catalog.ts';
import type { RedisConnection } from './connection.ts';
import { RECORD_DELETED, rowKey, tableKeys, tableRecordKey } from './keys.ts';

/** Row hashes removed per round trip: each UNLINK and ZREM stays small, so Redis never stalls on a large table. */
export const RECLAIM_BATCH = 256;
/** Table records read at once by a sweep. */
const RECORDS_PER_ROUND = 64;
/** How often every instance is swept, to finish what a process that died mid-reclaim left behind. */
export const SWEEP_INTERVAL_MS = 60_000;
/** A sweep that failed is tried again after this long, doubled on each failure up to the interval. */
const RETRY_FIRST_MS = 500;

/**
 * Reclaimer removes the keys of deleted table generations in the background, in bounded batches
 * (the row hashes by pages of the index, then the change stream, then the generation's mark in
 * the table's record), and
 * keeps each instance's list of tables whole and current: a sweep rebuilds a list that was lost
 * (catalog.ts), reclaims the deleted generations of every listed table, and prunes names whose
 * table has had no record for a while. Every step can be repeated, so a process that dies
 * mid-reclaim leaves the rest to the next sweep of any process serving that instance: on
 * connecting to Redis (to any primary of a cluster, again after it restarted), and once a minute.
 * A deletion reclaims its own table at once. A sweep that fails (a primary restarting, which
 * refuses commands until it has rejoined its cluster) is tried again within seconds.
 */
export class Reclaimer {
  readonly #connection: RedisConnection;
  readonly #catalog: Catalog;
  readonly #instances: readonly string[];
  readonly #logger: Logger;
  #timer: NodeJS.Timeout | undefined;
  #retry: NodeJS.Timeout | undefined;
  #failures = 0;
  #running: Promise<void> | undefined;
  #sweepAgain = false;
  /** Tables deleted by this process, to reclaim before the next sweep: "instance/table". */
  readonly #deleted = new Map<string, { instance: string; table: string }>();
  #stopped = false;

  constructor(connection: RedisConnection, catalog: Catalog, instances: readonly string[], logger: Logger) {
    this.#connection = connection;
    this.#catalog = catalog;
    this.#instances = instances;
    this.#logger = logger;
  }

  /** Sweeps every minute, and whenever a connection is (re)established. */
  start(): void {
    this.#timer = setInterval(() => this.sweep(), SWEEP_INTERVAL_MS);
    this.#timer.unref();
    this.#connection.onReady(() => this.sweep());
  }

  /** Sweeps every instance soon; a sweep already running is followed by one more. */
  sweep(): void {
    this.#sweepAgain = true;
    this.#pump();
  }

  /** Reclaims one deleted table's generations soon. */
  reclaim(instance: string, table: string): void {
    this.#deleted.set(`${instance}/${table}`, { instance, table });
    this.#pump();
  }

  /** Resolves when no work is running (tests and close use it). */
  async idle(): Promise<void> {
    while (this.#running !== undefined) await this.#running;
  }

  /** Stops between two batches (or when the command in flight fails); what is left is finished by a later sweep. */
  async stop(): Promise<void> {
    this.#stopped = true;
    clearInterval(this.#timer);
    clearTimeout(this.#retry);
    await this.#running;
  }

  #pump(): void {
    if (this.#stopped || this.#running !== undefined) return;
    this.#running = this.#work().finally(() => {
      this.#running = undefined;
      if (this.#sweepAgain || this.#deleted.size > 0) this.#pump();
    });
  }

  async #work(): Promise<void> {
    let failed = false;
    for (const [name, ref] of this.#deleted) {
      this.#deleted.delete(name);
      if (this.#stopped) return;
      if (!(await this.#guard(ref.instance, () => this.#reclaimTable(ref.instance, ref.table)))) failed = true;
    }
    if (this.#sweepAgain) {
      this.#sweepAgain = false;
      for (const instance of this.#instances) {
        if (this.#stopped) return;
        if (!(await this.#guard(instance, () => this.#sweep(instance)))) failed = true;
      }
    }
    if (!failed) {
      this.#failures = 0;
      return;
    }
    clearTimeout(this.#retry);
    this.#retry = setTimeout(() => this.sweep(), Math.min(RETRY_FIRST_MS * 2 ** this.#failures++, SWEEP_INTERVAL_MS));
    this.#retry.unref();
  }

  /** Runs one instance's work; false (logged) when it failed. */
  async #guard(instance: string, work: () => Promise<void>): Promise<boolean> {
    try {
      await work();
      return true;
    } catch (error) {
      if (this.#stopped) return true;
      this.#logger.warn({ event: 'redis.reclaim.failed', instance, err: error }, 'sweeping the tables failed; it is tried again shortly');
      return false;
    }
  }

  /**
   * Makes the list whole, then reclaims and prunes, reading the tables' records a round at a
   * time. A primary that does not answer leaves its tables (or the rebuild) to the next sweep;
   * the others are swept all the same, and the first failure is reported at the end.
   */
  async #sweep(instance: string): Promise<void> {
    let failure: unknown;
    await this.#catalog.complete(instance).catch((error: unknown) => {
      failure = error;
    });
    const snapshot = await this.#catalog.read(instance);
    const tables = [...snapshot.entries.keys()];
    for (let first = 0; first < tables.length; first += RECORDS_PER_ROUND) {
      const round = tables.slice(first, first + RECORDS_PER_ROUND);
      const records = await Promise.allSettled(round.map((table) => this.#deletedGenerations(instance, table)));
      for (const [index, table] of round.entries()) {
        if (this.#stopped) return;
        const record = records[index] as PromiseSettledResult<{ exists: boolean; deleted: string[] }>;
        if (record.status === 'rejected') {
          failure ??= record.reason;
          continue;
        }
        for (const generation of record.value.deleted) {
          if (!(await this.#reclaimGeneration(instance, table, generation))) return; // stopped
        }
        if (!record.value.exists) await this.#catalog.pruneIfStale(instance, table, snapshot);
      }
    }
    if (failure !== undefined) throw failure;
  }

  async #reclaimTable(instance: string, table: string): Promise<void> {
    for (const generation of (await this.#deletedGenerations(instance, table)).deleted) {
      if (!(await this.#reclaimGeneration(instance, table, generation))) return;
    }
  }

  /** Whether the table's record exists at all, and the deleted generations it names. */
  async #deletedGenerations(instance: string, table: string): Promise<{ exists: boolean; deleted: string[] }> {
    const fields = ((await this.#connection.send(['HKEYS', tableRecordKey(instance, table)])) as Buffer[]).map((field) => field.toString());
    return { exists: fields.length > 0, deleted: fields.filter((field) => field.startsWith(RECORD_DELETED)).map((field) => field.slice(RECORD_DELETED.length)) };
  }

  /** Removes one deleted generation's keys, then its mark; false when stopped before the end. */
  async #reclaimGeneration(instance: string, table: string, generation: string): Promise<boolean> {
    const keys = tableKeys(instance, table, generation);
    let rows = 0;
    for (;;) {
      if (this.#stopped) return false;
      const members = (await this.#connection.send(['ZRANGE', keys.rows, '0', String(RECLAIM_BATCH - 1)])) as Buffer[];
      if (members.length === 0) break;
      const [first, ...rest] = members.map((member) => rowKey(keys, member)) as [Buffer, ...Buffer[]];
      await this.#connection.send(['UNLINK', first, ...rest]);
      await this.#connection.send(['ZREM', keys.rows, ...members]);
      rows += members.length;
    }
    // The change stream last: UNLINK frees it off Redis's main thread, however long it is.
    await this.#connection.send(['UNLINK', keys.changes]);
    await this.#connection.send(['HDEL', keys.record, `${RECORD_DELETED}${generation}`]);
    this.#logger.info({ event: 'redis.reclaimed', instance, table, generation, rows }, 'reclaimed a deleted table');
    return true;
  }
}
