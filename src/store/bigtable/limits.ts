import type { StoreCapabilities, StoreLimits } from '../store.ts';

const MIB = 1024 * 1024;

/**
 * Cloud Bigtable keeps every version, honours GC rules for both bounds, reads rows in reverse, and
 * keeps a change stream per table (enabled at creation).
 */
export const BIGTABLE_CAPABILITIES: StoreCapabilities = Object.freeze({
  multipleVersions: true,
  maxAge: true,
  reverseScan: true,
  checkAndMutate: true,
  readModifyWrite: true,
  changeFeed: true,
});

/**
 * Bigtable's own bounds, where it has them: the hard limits on data size
 * (https://cloud.google.com/bigtable/quotas#limits-data-size) and the request bounds in the API's
 * definition (google/bigtable/v2/bigtable.proto, data.proto). The others are kvcrud's, to keep one
 * request's memory and time bounded.
 */
export const BIGTABLE_LIMITS: StoreLimits = Object.freeze({
  // data.proto, Row.key: "any non-empty byte string up to 4KiB".
  keyBytes: 4096,
  // Column qualifiers: 16 KB each.
  columnBytes: 16 * 1024,
  // Individual values: 100 MB per cell (the emulator takes as much).
  valueBytes: 100 * MIB,
  // MutateRowRequest.mutations: "at most 100000".
  mutationsPerRow: 100_000,
  // All values in a single row: 256 MB; a larger row cannot be read back.
  bytesPerRow: 256 * MIB,
  // kvcrud's: MutateRows bounds mutations, not entries; ReadRows takes any number of keys.
  entriesPerBatch: 1000,
  // MutateRowsRequest.entries: "in total the entries can contain at most 100000 mutations".
  mutationsPerBatch: 100_000,
  // No documented bound of its own beyond the row's; one batch holds no more than one full row.
  bytesPerBatch: 256 * MIB,
  // kvcrud's.
  rowsPerPage: 1000,
  // Column families: 100 per table.
  familiesPerTable: 100,
  // kvcrud's: cells_per_column_limit_filter takes any int32.
  versionsPerRead: 1000,
  // Tables are created with Bigtable's default granularity, milliseconds; a timestamp that is not a
  // multiple of 1000 µs is refused.
  timestampGranularityMicros: 1000,
  // kvcrud's: each condition nests one Condition filter in the predicate; Bigtable's bound is on
  // the filter's size, 20 KB, which the store checks per call (a condition on a long value or
  // column may exceed it alone).
  conditionsPerCheck: 16,
  // kvcrud's, within ReadModifyWriteRowRequest.rules' "at most 100000 rules": the answer holds
  // one cell per column touched, and a row's rules are applied one after another.
  rulesPerRow: 1000,
  // The change stream's retention_period, set at table creation: Bigtable takes 1 to 7 days and
  // bills the stream's storage like the table's. One day, Bigtable's own default: a day-old
  // position still resumes, and the stream costs about a day of writes in storage.
  changeRetentionSeconds: 86_400,
});
