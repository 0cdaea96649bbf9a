import { randomBytes } from 'node:crypto';

/**
 * The Redis key layout. Every key starts with `kvcrud:` and carries a hash tag (the part in
 * braces), so that in Redis Cluster each script touches one slot only:
 *
 *   kvcrud:{<instance>}:tables                       hash    table name → when it was last registered (ms): the list of tables
 *   kvcrud:{<instance>}:catalog-state                string  "complete <id>" once the list is known whole; "rebuilding <id>" while it is rebuilt
 *   kvcrud:{<instance>/<table>}:table                hash    the table's record: "generation", "families" (JSON), and
 *                                                            "deleted:<generation>" → when, for each deleted generation not yet reclaimed
 *   kvcrud:{<instance>/<table>}:<generation>:rows    zset    every row key, score 0, read with ZRANGE … BYLEX
 *   kvcrud:{<instance>/<table>}:<generation>:r:<key> hash    "<family>:<column>" → "<timestampMicros>:<value>"
 *   kvcrud:{<instance>/<table>}:<generation>:changes stream  one entry per change: "key" → row key, "mutations" → packed mutations
 *
 * A table lives in one slot, named for the table alone: its record says whether it exists and
 * what its families are, and its rows are beside it. Every answer about a table (create,
 * describe, delete, every row call) consults that record and nothing else, so all of them
 * agree, whatever another slot holds or has lost, and a process that has never seen the table
 * finds it without the instance's list. The list serves listTables only; each name it holds is
 * checked against the table's record, and a list lost with its primary is rebuilt from the
 * records (catalog.ts).
 *
 * Instance, table and family names are ASCII without braces, "/" or ":" (the API validates
 * them), so the separators are unambiguous; row keys, columns and values are raw bytes.
 * A table's rows live under a generation, a random ID chosen at creation: deleting a table
 * takes the generation out of the record at once, and its rows are reclaimed afterwards, in
 * batches, while a table of the same name can already be created anew.
 */
export const KEY_PREFIX = 'kvcrud:';

/** The keys of one instance's list of tables: all in the instance's slot. */
export interface CatalogKeys {
  readonly tables: string;
  readonly state: string;
}

export function catalogKeys(instance: string): CatalogKeys {
  return { tables: `${KEY_PREFIX}{${instance}}:tables`, state: `${KEY_PREFIX}{${instance}}:catalog-state` };
}

/** The fields of a table's record. */
export const RECORD_GENERATION = 'generation';
export const RECORD_FAMILIES = 'families';
/** The prefix of a record's field naming a deleted generation whose keys are not all reclaimed yet. */
export const RECORD_DELETED = 'deleted:';

/** The key of a table's record, in the table's slot. */
export function tableRecordKey(instance: string, table: string): string {
  return `${KEY_PREFIX}{${instance}/${table}}:table`;
}

/** The SCAN pattern of every table record of an instance (it can also match row keys: see parseTableRecordKey). */
export function tableRecordPattern(instance: string): string {
  return `${KEY_PREFIX}{${instance}/*}:table`;
}

/** The table whose record `key` is, or undefined when `key` is not a record of the instance (a row key ending in "}:table", say). */
export function parseTableRecordKey(instance: string, key: Buffer): string | undefined {
  const text = key.toString('latin1');
  const head = `${KEY_PREFIX}{${instance}/`;
  if (!text.startsWith(head) || !text.endsWith('}:table')) return undefined;
  const table = text.slice(head.length, -'}:table'.length);
  return table !== '' && !/[{}/:]/.test(table) ? table : undefined;
}

/** The keys of one generation of a table: all in the table's slot, beside its record. */
export interface TableKeys {
  readonly record: string;
  readonly rows: string;
  /** The prefix of every row hash's key; the row key's bytes follow it. */
  readonly rowPrefix: Buffer;
  /** The generation's change stream. */
  readonly changes: string;
}

export function tableKeys(instance: string, table: string, generation: string): TableKeys {
  const tag = `${KEY_PREFIX}{${instance}/${table}}`;
  return { record: `${tag}:table`, rows: `${tag}:${generation}:rows`, rowPrefix: Buffer.from(`${tag}:${generation}:r:`), changes: `${tag}:${generation}:changes` };
}

export function rowKey(keys: TableKeys, key: Buffer): Buffer {
  return Buffer.concat([keys.rowPrefix, key]);
}

/** A new generation ID: 48 random bits, so that a generation is never reused, not even after Redis lost its data. */
export function newGeneration(): string {
  return randomBytes(6).toString('hex');
}

/** What a table's record holds while the table exists (families are fixed at creation). */
export interface TableRecord {
  readonly generation: string;
  readonly families: ReadonlyArray<{ readonly name: string; readonly maxAgeSeconds?: number }>;
}

export function parseFamilies(json: string): TableRecord['families'] {
  return JSON.parse(json) as TableRecord['families'];
}
