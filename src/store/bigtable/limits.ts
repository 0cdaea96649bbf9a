import type { StoreCapabilities, StoreLimits } from '../store.ts';

const MIB = 1024 * 1024;

/** Cloud Bigtable keeps every version, honours GC rules for both bounds, and reads rows in reverse. */
export const BIGTABLE_CAPABILITIES: StoreCapabilities = Object.freeze({
  multipleVersions: true,
  maxAge: true,
  reverseScan: true,
});

/** Bigtable's own bounds: https://cloud.google.com/bigtable/quotas#limits-data-size */
export const BIGTABLE_LIMITS: StoreLimits = Object.freeze({
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
  // Tables are created with Bigtable's default (and only) granularity, milliseconds.
  timestampGranularityMicros: 1000,
});
