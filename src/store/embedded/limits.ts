import type { StoreCapabilities, StoreLimits } from '../store.ts';

const MIB = 1024 * 1024;

/** The embedded store keeps every version and enforces both retention bounds itself. */
export const EMBEDDED_CAPABILITIES: StoreCapabilities = Object.freeze({
  multipleVersions: true,
  maxAge: true,
  reverseScan: true,
  checkAndMutate: true,
  readModifyWrite: true,
  changeFeed: true,
});

/**
 * Bounds as Bigtable's, so that data moves between the two unchanged; SQLite itself allows more
 * (a BLOB of up to 1 GB).
 */
export const EMBEDDED_LIMITS: StoreLimits = Object.freeze({
  keyBytes: 4096,
  columnBytes: 16 * 1024,
  valueBytes: 100 * MIB,
  mutationsPerRow: 100_000,
  bytesPerRow: 256 * MIB,
  entriesPerBatch: 1000,
  mutationsPerBatch: 100_000,
  bytesPerBatch: 256 * MIB,
  rowsPerPage: 1000,
  familiesPerTable: 100,
  versionsPerRead: 1000,
  timestampGranularityMicros: 1000,
  // SQLite bounds neither (each condition is one indexed lookup, each rule one column written in
  // the writer's transaction); these are the bounds every store publishes, so that a request
  // valid here is valid on the others.
  conditionsPerCheck: 16,
  rulesPerRow: 1000,
  // A day of changes, on disk: each row write is kept a second time (its key and mutations) in
  // the changes table for this long, so the database grows by a day of writes, not more; the
  // writer trims what is older between batches. Longer would suit a feed reader offline for a
  // weekend, at the cost of that much more disk for a busy store.
  changeRetentionSeconds: 86_400,
});
