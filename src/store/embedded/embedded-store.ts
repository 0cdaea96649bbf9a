import { mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { DatabaseSync, type StatementSync } from 'node:sqlite';
import { StoreError, callerGone } from '../errors.ts';
import type { CallOptions, Cell, CellWrite, DataStore, TableRef } from '../legacy-store.ts';
import { GroupCommit } from './group-commit.ts';
import { migrate } from './schema.ts';

export interface EmbeddedStoreOptions {
  /** Directory holding the database; created if missing. */
  readonly dataDir: string;
}

/** The database file inside the data directory. */
export const DATABASE_FILE = 'kvcrud.sqlite';

// SQLite primary result codes (https://sqlite.org/rescode.html).
const SQLITE_BUSY = 5;
const SQLITE_LOCKED = 6;

interface TableEntry {
  readonly id: number;
  readonly families: ReadonlySet<string>;
}

/**
 * EmbeddedStore is the DataStore in a SQLite database (node:sqlite) in one local directory: no
 * cloud, no emulator, one process. The process holds an exclusive lock on the database for its
 * lifetime, so a second kvcrud on the same directory refuses to start instead of sharing it.
 *
 * Durability: WAL journal with synchronous=FULL, so a write is on disk (fsync) before it is
 * acknowledged. Writes are grouped per event-loop turn into one transaction (GroupCommit).
 * Reads run directly: with the lock held nothing else changes the database, so the catalog of
 * tables and families is kept in memory and updated with every committed change.
 */
export class EmbeddedStore implements DataStore {
  readonly type = 'embedded';
  readonly dataDir: string;
  readonly #db: DatabaseSync;
  readonly #writes: GroupCommit;
  /** Tables by `${instance}/${table}` (both names are validated ASCII without "/"). */
  #catalog = new Map<string, TableEntry>();
  readonly #readRow: StatementSync;
  readonly #upsertCell: StatementSync;

  /**
   * open opens (creating if needed) the store in `dataDir`, or throws a StoreError UNAVAILABLE
   * naming the directory when another process has it open.
   */
  static open(options: EmbeddedStoreOptions): EmbeddedStore {
    const dataDir = resolve(options.dataDir);
    mkdirSync(dataDir, { recursive: true });
    // timeout 0: a locked database is another kvcrud's, and waiting would not help.
    const db = new DatabaseSync(join(dataDir, DATABASE_FILE), { timeout: 0 });
    try {
      db.exec('PRAGMA locking_mode = EXCLUSIVE; PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL');
      // The first write transaction takes the exclusive lock, kept until close().
      db.exec('BEGIN IMMEDIATE');
      migrate(db);
      db.exec('COMMIT');
    } catch (error) {
      db.close();
      if (sqliteCode(error) === SQLITE_BUSY || sqliteCode(error) === SQLITE_LOCKED) {
        throw new StoreError('UNAVAILABLE', `data directory ${dataDir} is in use by another process`, { cause: error });
      }
      throw new StoreError('INTERNAL', `cannot open the database in ${dataDir}: ${(error as Error).message}`, { cause: error });
    }
    return new EmbeddedStore(db, dataDir);
  }

  private constructor(db: DatabaseSync, dataDir: string) {
    this.#db = db;
    this.dataDir = dataDir;
    this.#writes = new GroupCommit(db, (error) => toStoreError(error, 'commit'), () => this.#loadCatalog());
    // max(ts) with bare columns takes value from the row holding the maximum: the latest version.
    this.#readRow = db.prepare(
      `SELECT family, qualifier, value, max(ts) AS ts FROM cells
       WHERE table_id = ? AND row_key = ? GROUP BY family, qualifier ORDER BY family, qualifier`,
    );
    this.#readRow.setReadBigInts(true);
    this.#upsertCell = db.prepare(
      `INSERT INTO cells (table_id, row_key, family, qualifier, ts, value) VALUES (?, ?, ?, ?, ?, ?)
       ON CONFLICT DO UPDATE SET value = excluded.value`,
    );
    this.#loadCatalog();
  }

  createTable(ref: TableRef, families: readonly string[], options: CallOptions): Promise<void> {
    return this.#write(options, () => {
      if (this.#catalog.has(key(ref))) {
        throw new StoreError('ALREADY_EXISTS', `table ${key(ref)} exists`, { resource: 'table', name: ref.table });
      }
      const { id } = this.#db
        .prepare('INSERT INTO tables (instance, name) VALUES (?, ?) RETURNING id')
        .get(ref.instance, ref.table) as { id: number };
      const addFamily = this.#db.prepare('INSERT INTO families (table_id, name) VALUES (?, ?)');
      for (const family of families) addFamily.run(id, family);
      this.#catalog.set(key(ref), { id, families: new Set(families) });
    });
  }

  deleteTable(ref: TableRef, options: CallOptions): Promise<void> {
    return this.#write(options, () => {
      const { id } = this.#table(ref);
      this.#db.prepare('DELETE FROM cells WHERE table_id = ?').run(id);
      this.#db.prepare('DELETE FROM families WHERE table_id = ?').run(id);
      this.#db.prepare('DELETE FROM tables WHERE id = ?').run(id);
      this.#catalog.delete(key(ref));
    });
  }

  listTables(instance: string, options: CallOptions): Promise<string[]> {
    return this.#read(options, () =>
      [...this.#catalog.keys()].filter((name) => name.startsWith(`${instance}/`)).map((name) => name.slice(instance.length + 1)),
    );
  }

  writeRow(ref: TableRef, rowKey: Buffer, cells: readonly CellWrite[], options: CallOptions): Promise<void> {
    return this.#write(options, () => {
      const table = this.#table(ref);
      const missing = cells.find((cell) => !table.families.has(cell.family));
      if (missing !== undefined) {
        throw new StoreError('NOT_FOUND', `column family "${missing.family}" not in table ${key(ref)}`, {
          resource: 'columnFamily',
          name: missing.family,
        });
      }
      for (const cell of cells) {
        this.#upsertCell.run(table.id, rowKey, cell.family, cell.qualifier, cell.timestampMicros, cell.value);
      }
    });
  }

  readRow(ref: TableRef, rowKey: Buffer, options: CallOptions): Promise<Cell[] | null> {
    return this.#read(options, () => {
      const rows = this.#readRow.all(this.#table(ref).id, rowKey) as Array<{
        family: string;
        qualifier: Uint8Array;
        value: Uint8Array;
        ts: bigint;
      }>;
      if (rows.length === 0) return null;
      return rows.map((row) => ({
        family: row.family,
        qualifier: asBuffer(row.qualifier),
        value: asBuffer(row.value),
        timestampMicros: row.ts,
      }));
    });
  }

  checkHealth(options: CallOptions): Promise<void> {
    return this.#read(options, () => {
      this.#db.prepare('SELECT 1').get();
    });
  }

  close(): Promise<void> {
    if (this.#db.isOpen) {
      this.#writes.flush();
      this.#db.close();
    }
    return Promise.resolve();
  }

  /** Runs a change in the next group commit; skipped if its deadline passes or its caller goes first. */
  #write<T>(options: CallOptions, change: () => T): Promise<T> {
    if (!this.#db.isOpen) return Promise.reject(closedError());
    return this.#writes.enqueue(() => {
      requireTime(options);
      return guard('write', change);
    });
  }

  /** Runs a query at once: reads need no transaction of their own and never wait for writes. */
  #read<T>(options: CallOptions, query: () => T): Promise<T> {
    // The executor turns a throw into a rejection.
    return new Promise((resolve) => {
      if (!this.#db.isOpen) throw closedError();
      requireTime(options);
      resolve(guard('read', query));
    });
  }

  #table(ref: TableRef): TableEntry {
    const table = this.#catalog.get(key(ref));
    if (table === undefined) {
      throw new StoreError('NOT_FOUND', `table ${key(ref)} not found`, { resource: 'table', name: ref.table });
    }
    return table;
  }

  #loadCatalog(): void {
    const catalog = new Map<string, { id: number; families: Set<string> }>();
    const tables = this.#db.prepare('SELECT id, instance, name FROM tables').all() as Array<{ id: number; instance: string; name: string }>;
    for (const table of tables) catalog.set(`${table.instance}/${table.name}`, { id: table.id, families: new Set() });
    const byId = new Map([...catalog.values()].map((entry) => [entry.id, entry]));
    for (const family of this.#db.prepare('SELECT table_id, name FROM families').all() as Array<{ table_id: number; name: string }>) {
      byId.get(family.table_id)?.families.add(family.name);
    }
    this.#catalog = catalog;
  }
}

function key(ref: TableRef): string {
  return `${ref.instance}/${ref.table}`;
}

function closedError(): StoreError {
  return new StoreError('UNAVAILABLE', 'the embedded store is closed');
}

function requireTime(options: CallOptions): void {
  if (options.signal?.aborted === true) throw callerGone();
  if (Date.now() >= options.deadline) {
    throw new StoreError('DEADLINE_EXCEEDED', 'deadline passed before the store was called');
  }
}

/** Lets StoreErrors through and turns anything SQLite throws into one. */
function guard<T>(operation: string, run: () => T): T {
  try {
    return run();
  } catch (error) {
    if (error instanceof StoreError) throw error;
    throw toStoreError(error, operation);
  }
}

function toStoreError(error: unknown, operation: string): StoreError {
  const code = sqliteCode(error);
  const transient = code === SQLITE_BUSY || code === SQLITE_LOCKED;
  return new StoreError(transient ? 'UNAVAILABLE' : 'INTERNAL', `sqlite ${operation}: ${(error as Error).message}`, { cause: error });
}

function sqliteCode(error: unknown): number | undefined {
  const errcode = (error as { errcode?: unknown }).errcode;
  // Extended result codes carry the primary code in their low byte.
  return typeof errcode === 'number' ? errcode & 0xff : undefined;
}

function asBuffer(bytes: Uint8Array): Buffer {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}
