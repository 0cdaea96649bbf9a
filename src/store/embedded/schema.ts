import type { DatabaseSync } from 'node:sqlite';

/**
 * The embedded store's schema, one SQLite database per data directory. Each entry of MIGRATIONS
 * moves the database from version i to i + 1 (PRAGMA user_version); a database written by a newer
 * kvcrud is refused rather than guessed at.
 *
 * cells is keyed like a Bigtable row: by table, row key, family, qualifier, then timestamp
 * descending, so the newest versions of a column are the first ones met and a read seeks to them
 * instead of walking older ones. Row keys, qualifiers and values are BLOBs and family names TEXT;
 * SQLite compares both bytewise (memcmp), which is Bigtable's order.
 *
 * Version 2 gives each family its retention policy (NULL: unbounded; families of version 1 keep
 * every version, as they did) and never reuses a table's id, so that a scan resumed after the
 * table was deleted and created again notices it is not the same table.
 *
 * Version 3 adds the change feed: changes holds one entry per row write, inserted in the same
 * transaction as the write, its seq (AUTOINCREMENT: never reused, even once trimmed) being the
 * feed's position and commit order; commit_us never decreases with seq (the writer sees to it), so
 * a start time is found by bisecting seq. change_trim remembers the highest seq trimmed, below
 * which a position is too old. A changes entry outlives its table, so that a feed behind the
 * deletion still yields it; it goes with age, like every other.
 */
const MIGRATIONS: readonly string[] = [
  `CREATE TABLE tables (
     id       INTEGER PRIMARY KEY,
     instance TEXT NOT NULL,
     name     TEXT NOT NULL,
     UNIQUE (instance, name)
   );
   CREATE TABLE families (
     table_id INTEGER NOT NULL,
     name     TEXT NOT NULL,
     gc_rule  TEXT,
     PRIMARY KEY (table_id, name)
   ) WITHOUT ROWID;
   CREATE TABLE cells (
     table_id  INTEGER NOT NULL,
     row_key   BLOB NOT NULL,
     family    TEXT NOT NULL,
     qualifier BLOB NOT NULL,
     ts        INTEGER NOT NULL,
     value     BLOB NOT NULL,
     PRIMARY KEY (table_id, row_key, family, qualifier, ts DESC)
   ) WITHOUT ROWID;`,
  `CREATE TABLE tables_v2 (
     id       INTEGER PRIMARY KEY AUTOINCREMENT,
     instance TEXT NOT NULL,
     name     TEXT NOT NULL,
     UNIQUE (instance, name)
   );
   INSERT INTO tables_v2 (id, instance, name) SELECT id, instance, name FROM tables;
   DROP TABLE tables;
   ALTER TABLE tables_v2 RENAME TO tables;
   ALTER TABLE families DROP COLUMN gc_rule;
   ALTER TABLE families ADD COLUMN max_versions INTEGER CHECK (max_versions >= 1);
   ALTER TABLE families ADD COLUMN max_age_seconds INTEGER CHECK (max_age_seconds >= 1);`,
  `CREATE TABLE changes (
     seq       INTEGER PRIMARY KEY AUTOINCREMENT,
     table_id  INTEGER NOT NULL,
     commit_us INTEGER NOT NULL,
     row_key   BLOB NOT NULL,
     mutations BLOB NOT NULL
   );
   CREATE INDEX changes_by_table ON changes (table_id, seq);
   CREATE TABLE change_trim (
     id      INTEGER PRIMARY KEY CHECK (id = 1),
     through INTEGER NOT NULL
   );
   INSERT INTO change_trim (id, through) VALUES (1, 0);`,
];

export const SCHEMA_VERSION = MIGRATIONS.length;

/** migrate brings the database to SCHEMA_VERSION inside the caller's transaction. */
export function migrate(db: DatabaseSync): void {
  const { user_version: version } = db.prepare('PRAGMA user_version').get() as { user_version: number };
  if (version > SCHEMA_VERSION) {
    throw new Error(`the database has schema version ${version}; this kvcrud knows versions up to ${SCHEMA_VERSION}`);
  }
  for (let next = version; next < SCHEMA_VERSION; next++) {
    db.exec(MIGRATIONS[next] ?? '');
  }
  db.exec(`PRAGMA user_version = ${SCHEMA_VERSION}`);
}
