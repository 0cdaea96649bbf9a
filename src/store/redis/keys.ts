import { randomBytes } from 'node:crypto';

/**
 * The Redis key layout. Every key starts with `kvcrud:` and carries a hash tag (the part in
 * braces), so that in Redis Cluster each script touches one slot only:
 *
 *   kvcrud:{<instance>}:tables               hash    table name → catalog entry (JSON: generation, families)
 *   kvcrud:{<instance>}:reclaim              zset    "<table>/<generation>" → when its keys may be reclaimed (ms)
 *   kvcrud:{<instance>/<table>/<gen>}:meta   hash    family → maxAgeSeconds ("0": none); exists while the table does
 *   kvcrud:{<instance>/<table>/<gen>}:rows   zset    every row key, score 0, read with ZRANGE … BYLEX
 *   kvcrud:{<instance>/<table>/<gen>}:r:<key> hash   "<family>:<column>" → "<timestampMicros>:<value>"
 *
 * Instance, table and family names are ASCII without braces, "/" or ":" (the API validates
 * them), so the separators are unambiguous; row keys, columns and values are raw bytes.
 * A table's data lives under a generation, a random ID chosen at creation: deleting a table
 * removes its catalog entry and its meta key at once, and the rows of the old generation are
 * reclaimed afterwards, in batches, while a table of the same name can already be created anew.
 */
export const KEY_PREFIX = 'kvcrud:';

/** The keys of one instance's catalog: all in the instance's slot. */
export interface CatalogKeys {
  readonly tables: string;
  readonly reclaim: string;
}

export function catalogKeys(instance: string): CatalogKeys {
  return { tables: `${KEY_PREFIX}{${instance}}:tables`, reclaim: `${KEY_PREFIX}{${instance}}:reclaim` };
}

/** The keys of one generation of a table: all in the generation's slot. */
export interface TableKeys {
  readonly meta: string;
  readonly rows: string;
  /** The prefix of every row hash's key; the row key's bytes follow it. */
  readonly rowPrefix: Buffer;
}

export function tableKeys(instance: string, table: string, generation: string): TableKeys {
  const tag = `${KEY_PREFIX}{${instance}/${table}/${generation}}`;
  return { meta: `${tag}:meta`, rows: `${tag}:rows`, rowPrefix: Buffer.from(`${tag}:r:`) };
}

export function rowKey(keys: TableKeys, key: Buffer): Buffer {
  return Buffer.concat([keys.rowPrefix, key]);
}

/** A new generation ID: 48 random bits, so that a generation is never reused, not even after Redis lost its data. */
export function newGeneration(): string {
  return randomBytes(6).toString('hex');
}

/** The member of the reclaim set that names one generation of a table. */
export function reclaimMember(table: string, generation: string): string {
  return `${table}/${generation}`;
}

export function parseReclaimMember(member: string): { table: string; generation: string } | undefined {
  const slash = member.lastIndexOf('/');
  if (slash <= 0) return undefined;
  return { table: member.slice(0, slash), generation: member.slice(slash + 1) };
}

/** What the catalog holds for a table (families are fixed at creation, so they are kept here too). */
export interface CatalogEntry {
  readonly generation: string;
  readonly families: ReadonlyArray<{ readonly name: string; readonly maxAgeSeconds?: number }>;
}

export function parseCatalogEntry(json: string): CatalogEntry {
  return JSON.parse(json) as CatalogEntry;
}
