import type { StoreCapabilities, StoreLimits } from '../store.ts';

const MIB = 1024 * 1024;

/** Cloud Spanner keeps every version (one row per cell version), honours both bounds, and reads in either order. */
export const SPANNER_CAPABILITIES: StoreCapabilities = Object.freeze({
  multipleVersions: true,
  maxAge: true,
  reverseScan: true,
});

/**
 * Spanner's own bounds (https://cloud.google.com/spanner/quotas#limits-for-creating-reading-updating-and-deleting-data)
 * are per commit and per key, and kvcrud's cells are rows of one table keyed
 * (table_id, row_key, family, col, ts): so each bound here is chosen so that whatever passes
 * them fits one commit.
 * - A key is at most 8 KiB over all its parts: a 32-byte table ID, the row key, a family of up to
 *   64 bytes, the column and 8 bytes of timestamp. 4 KiB of row key (Bigtable's bound) leaves
 *   2 KiB for the column, with room for Spanner's own encoding.
 * - A commit holds at most 80,000 mutations, where writing one cell counts once per column it
 *   writes (six) and each range deleted counts once. A write of N cells is N six-column writes
 *   plus at most two trimming deletes per column (maxVersions, maxAge): 8 N mutations, so
 *   N ≤ 10,000; 8,000 leaves a margin.
 * - A commit is at most 100 MiB. Every cell repeats its row key (up to 4 KiB × 8,000 cells =
 *   32 MiB), so the data itself is bounded at 32 MiB.
 * - A BYTES value is at most 10 MiB.
 */
export const SPANNER_LIMITS: StoreLimits = Object.freeze({
  keyBytes: 4096,
  columnBytes: 2048,
  valueBytes: 10 * MIB,
  mutationsPerRow: 8000,
  bytesPerRow: 32 * MIB,
  entriesPerBatch: 1000,
  mutationsPerBatch: 8000,
  bytesPerBatch: 32 * MIB,
  rowsPerPage: 1000,
  familiesPerTable: 100,
  versionsPerRead: 1000,
  // INT64 microseconds, kept exactly.
  timestampGranularityMicros: 1,
});

/** Spanner's bound on the mutations of one commit, which the limits above keep every write under. */
export const MUTATIONS_PER_COMMIT = 80_000;
