import type { DatabaseSync } from 'node:sqlite';

/**
 * The embedded store's schema, one SQLite database per data directory. Each entry of MIGRATIONS
 * moves the database from version i to i + 1 (PRAGMA user_version); a database written by a newer
 * kvcrud is refused rather than guessed at.
 *
 * cells is keyed like a Bigtable row: by table, row key, family, qualifier, then timestamp
 * descending, so the latest version of a column is the first one met. Row keys, qualifiers and
 * values are BLOBs and family names TEXT; SQLite compares both bytewise (memcmp), which is
 * Bigtable's order. families.gc_rule is reserved for a per-family garbage-collection policy.
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
