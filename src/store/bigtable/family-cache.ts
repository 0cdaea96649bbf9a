/**
 * FamilyCache remembers the column families of tables the service has looked at, so a write does
 * not cost an admin call every time. Only presence is trusted: a family missing from a cached
 * entry is re-checked against the backend before the caller is told it does not exist, and any
 * failed write drops the entry. Entries also expire, so schema changes made outside the service
 * are seen within the TTL even when no write fails.
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
