import type { StoreCapabilities, StoreLimits } from '../store.ts';

const MIB = 1024 * 1024;

/**
 * Cloud Spanner keeps every version (one row per cell version), honours both bounds, reads in
 * either order, and runs conditional mutations and counters each as one read-write transaction.
 */
export const SPANNER_CAPABILITIES: StoreCapabilities = Object.freeze({
  multipleVersions: true,
  maxAge: true,
  reverseScan: true,
  checkAndMutate: true,
  readModifyWrite: true,
  changeFeed: true,
});

/**
 * Spanner's own bounds (https://cloud.google.com/spanner/quotas#limits-for-creating-reading-updating-and-deleting-data)
 * are per commit and per key, and kvcrud's cells are rows of one table keyed
 * (table_id, row_key, family, col_hash, ts) (schema.ts).
 * - A key is at most 8 KiB over all its parts: a 32-byte table ID, the row key, a family of up to
 *   64 bytes, a 32-byte column hash and 8 bytes of timestamp. 4 KiB of row key (Bigtable's
 *   bound) fits with room for Spanner's own encoding; the column is not in the key, so it may be
 *   16 KiB as in Bigtable.
 * - A commit holds at most 80,000 mutations, where writing one cell counts once per column it
 *   writes (seven) and each range deleted counts once. 10,000 cells are 70,000, and leave room
 *   for the trimming that retention needs.
 * - A commit is at most 100 MiB, keys included: every cell repeats its row key; and its request
 *   is one gRPC message of at most 100 MiB, in which the client sends each BYTES value as base64
 *   (4/3 of its bytes). The change feed records each write's mutations, values included, in the
 *   same commit, as JSON with base64 values (changes.ts), sent as base64 again: a write of B bytes
 *   is a request of some 4/3 B + 16/9 B = 3.1 B. 30 MiB a row and a batch (93 MiB) leave room
 *   for the keys; a larger bound was measured not to fit (figures: docs/performance.md).
 * - A BYTES value is at most 10 MiB.
 * The write itself is checked against the commit's bounds before it is sent (row-writes.ts), so
 * a write within these limits that still does not fit (10,000 columns of 16 KiB, each with
 * expired versions to trim) is refused, naming the limit, and nothing is written.
 */
export const SPANNER_LIMITS: StoreLimits = Object.freeze({
  keyBytes: 4096,
  columnBytes: 16 * 1024,
  valueBytes: 10 * MIB,
  mutationsPerRow: 10_000,
  bytesPerRow: 30 * MIB,
  entriesPerBatch: 1000,
  mutationsPerBatch: 10_000,
  bytesPerBatch: 30 * MIB,
  rowsPerPage: 1000,
  familiesPerTable: 100,
  versionsPerRead: 1000,
  // INT64 microseconds, kept exactly.
  timestampGranularityMicros: 1,
  // Spanner bounds neither: a check reads one key range per condition at most, in its
  // transaction, and a readModifyWriteRow writes one cell per column its rules touch (1,000 cells
  // are 7,000 of a commit's 80,000 mutations). The bounds are the other stores', for one meaning.
  conditionsPerCheck: 16,
  rulesPerRow: 1000,
  // The change stream's retention_period and kvcrud_changes' row deletion policy (schema.ts): one
  // day, Spanner's default for change streams. Spanner keeps up to 30 days, at the cost of the
  // storage of every change (values included) for that long, twice: the stream's and the table's.
  changeRetentionSeconds: 86_400,
});

/** Spanner's bounds on one commit, which every write is checked against before it is sent. */
export const MUTATIONS_PER_COMMIT = 80_000;
export const BYTES_PER_COMMIT = 100 * MIB;
