import type { FamilyPolicy } from '../store.ts';

/** A table's column families and the retention policy each one's GC rule amounts to. */
export type Families = ReadonlyMap<string, FamilyPolicy>;

/**
 * SchemaCache remembers the column families (and their policies) of tables the service has looked
 * at, so that a write need not cost an admin call (and admin API quota, which is small) to check
 * its families, nor a read one to know what to filter out. Only presence is trusted for writes: a
 * family missing from a cached entry is re-checked against the backend before the caller is told
 * it does not exist, and a failed write drops the entry. Entries expire, which bounds how long a
 * change made outside the service (a family added or deleted, a GC rule changed with cbt) goes
 * unseen: a deleted family still believed present matters only on the emulator, which applies
 * part of a mutation naming an unknown family; a changed GC rule is applied on read only from the
 * next refresh (Bigtable's own GC applies it anyway).
 */
export class SchemaCache {
  readonly #entries = new Map<string, { families: Families; expiresAt: number }>();
  readonly #ttlMs: number;

  constructor(ttlMs: number) {
    this.#ttlMs = ttlMs;
  }

  get(tableName: string): Families | undefined {
    const entry = this.#entries.get(tableName);
    if (entry === undefined) return undefined;
    if (entry.expiresAt <= Date.now()) {
      this.#entries.delete(tableName);
      return undefined;
    }
    return entry.families;
  }

  set(tableName: string, families: Families): Families {
    this.#entries.set(tableName, { families, expiresAt: Date.now() + this.#ttlMs });
    return families;
  }

  delete(tableName: string): void {
    this.#entries.delete(tableName);
  }
}
