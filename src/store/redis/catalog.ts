import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import type { RedisConnection } from './connection.ts';
import { RECORD_GENERATION, catalogKeys, parseTableRecordKey, tableRecordKey, tableRecordPattern } from './keys.ts';
import { BEGIN_REBUILD, FINISH_REBUILD, PRUNE_CATALOG, READ_CATALOG, REGISTER_FOUND, REGISTER_TABLE } from './scripts.ts';

/** How long a creation may take from registering its name to writing the table's record. */
export const REGISTRATION_GRACE_MS = 5 * 60_000;
/**
 * A name registered longer ago than this whose table has no record is pruned from the list. Twice
 * the grace, so that the clocks of two primaries may differ by up to a grace period.
 */
const PRUNE_AFTER_MS = 2 * REGISTRATION_GRACE_MS;
/** Names registered per script by a rebuild. */
const REGISTER_BATCH = 500;

/** The instance's list as one script read it. */
export interface CatalogSnapshot {
  /** Redis's time (ms) on the instance's primary when it was read. */
  readonly now: number;
  readonly complete: boolean;
  /** Table name → the time (ms, as stored) it was last registered. */
  readonly entries: ReadonlyMap<string, string>;
}

/**
 * Catalog keeps each instance's list of tables, for listTables alone: whether a table exists is
 * its record's to say (keys.ts). A name is registered before its table is created, and pruned
 * only once its table has had no record for a while, so that the list names every table, and
 * perhaps a few that are gone: listTables checks each name against its table's record.
 *
 * If the instance's primary loses its data, the list is lost and the tables are not (they live
 * in slots of their own). The catalog state, beside the list, is lost with it: a list without a
 * complete state is rebuilt from the table records found by SCAN on every primary, before
 * listTables answers and on the next sweep (reclaimer.ts).
 */
export class Catalog {
  readonly #connection: RedisConnection;
  readonly #logger: Logger;
  readonly #rebuilds = new Map<string, Promise<void>>();

  constructor(connection: RedisConnection, logger: Logger) {
    this.#connection = connection;
    this.#logger = logger;
  }

  /** Registers the table's name; resolves to the time (ms, the instance's primary's clock) after which its record may not be created. */
  async register(instance: string, table: string): Promise<number> {
    const registered = (await this.#connection.run(REGISTER_TABLE, [catalogKeys(instance).tables], [table])) as number;
    return registered + REGISTRATION_GRACE_MS;
  }

  /** The names of the instance's tables that exist: the list, made whole if it was lost, each name checked against its record. */
  async list(instance: string): Promise<string[]> {
    let snapshot = await this.read(instance);
    if (!snapshot.complete) {
      await this.complete(instance);
      snapshot = await this.read(instance);
    }
    const names = [...snapshot.entries.keys()];
    const exists = await Promise.all(names.map((table) => this.#connection.send(['HEXISTS', tableRecordKey(instance, table), RECORD_GENERATION])));
    return names.filter((_, index) => exists[index] === 1);
  }

  /** Reads the instance's list and its state in one step. */
  async read(instance: string): Promise<CatalogSnapshot> {
    const keys = catalogKeys(instance);
    const [now, state, flat] = (await this.#connection.run(READ_CATALOG, [keys.tables, keys.state], [])) as [number, Buffer, Buffer[]];
    const entries = new Map<string, string>();
    for (let i = 0; i < flat.length; i += 2) entries.set((flat[i] as Buffer).toString(), (flat[i + 1] as Buffer).toString());
    return { now, complete: state.toString().startsWith('complete '), entries };
  }

  /**
   * Prunes `table` from the list if its registration, read in `snapshot`, is old enough and has
   * not been renewed: the caller has found the table's record empty since that read.
   */
  async pruneIfStale(instance: string, table: string, snapshot: CatalogSnapshot): Promise<boolean> {
    const registered = snapshot.entries.get(table);
    if (registered === undefined || snapshot.now - Number(registered) < PRUNE_AFTER_MS) return false;
    return (await this.#connection.run(PRUNE_CATALOG, [catalogKeys(instance).tables], [table, registered])) === 1;
  }

  /** Makes the instance's list complete, rebuilding it if it is not; one rebuild per instance at a time in this process. */
  complete(instance: string): Promise<void> {
    let rebuild = this.#rebuilds.get(instance);
    if (rebuild === undefined) {
      rebuild = this.#rebuild(instance).finally(() => this.#rebuilds.delete(instance));
      this.#rebuilds.set(instance, rebuild);
    }
    return rebuild;
  }

  /**
   * Registers every table that has a record (live, or with deleted generations still to reclaim)
   * and marks the list complete, unless it was lost again meanwhile: then once more. Several
   * processes may rebuild at once; registering is idempotent.
   */
  async #rebuild(instance: string): Promise<void> {
    const keys = catalogKeys(instance);
    for (;;) {
      const id = (await this.#connection.run(BEGIN_REBUILD, [keys.state], [randomBytes(6).toString('hex')])) as Buffer | null;
      if (id === null) return;
      const started = Date.now();
      let found = 0;
      for await (const batch of this.#connection.scan(tableRecordPattern(instance))) {
        const tables = [...new Set(batch.map((key) => parseTableRecordKey(instance, key)).filter((table) => table !== undefined))];
        for (let first = 0; first < tables.length; first += REGISTER_BATCH) {
          const names = tables.slice(first, first + REGISTER_BATCH);
          if (names.length > 0) await this.#connection.run(REGISTER_FOUND, [keys.tables], names);
        }
        found += tables.length;
      }
      if ((await this.#connection.run(FINISH_REBUILD, [keys.state], [id])) === 1) {
        this.#logger.info({ event: 'redis.catalog.rebuilt', instance, tables: found, ms: Date.now() - started }, 'rebuilt the list of tables from their records');
        return;
      }
    }
  }
}
