/**
 * FamilyCache remembers the column families of tables the service has looked at, so a write does
 * not cost an admin call (and admin API quota) every time. Only presence is trusted: a family
 * missing from a cached entry is re-checked against the backend before the caller is told it does
 * not exist, and any failed write drops the entry, so answers stay right when the schema changes
 * outside the service. Entries also expire, which bounds how long a family deleted elsewhere is
 * still believed present (it matters only on the emulator, which applies part of a mutation that
 * names an unknown family; production Bigtable rejects all of it).
 */
export class FamilyCache {
  readonly #entries = new Map<string, { families: ReadonlySet<string>; expiresAt: number }>();
  readonly #ttlMs: number;

  constructor(ttlMs: number) {
    this.#ttlMs = ttlMs;
  }

  get(tableName: string): ReadonlySet<string> | undefined {
    const entry = this.#entries.get(tableName);
    if (entry === undefined) return undefined;
    if (entry.expiresAt <= Date.now()) {
      this.#entries.delete(tableName);
      return undefined;
    }
    return entry.families;
  }

  set(tableName: string, families: Iterable<string>): ReadonlySet<string> {
    const entry = { families: new Set(families), expiresAt: Date.now() + this.#ttlMs };
    this.#entries.set(tableName, entry);
    return entry.families;
  }

  delete(tableName: string): void {
    this.#entries.delete(tableName);
  }
}
