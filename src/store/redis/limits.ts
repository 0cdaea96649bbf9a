import type { StoreCapabilities, StoreLimits } from '../store.ts';

const MIB = 1024 * 1024;

/**
 * The Redis store keeps the latest version of each column (one hash field per cell), honours
 * maxAge on write and on read, scans its sorted-set index in either direction, and decides a
 * conditional mutation or a read-modify-write in one Lua script on the row, which also records
 * the change in the table's stream.
 */
export const REDIS_CAPABILITIES: StoreCapabilities = Object.freeze({
  multipleVersions: false,
  maxAge: true,
  reverseScan: true,
  checkAndMutate: true,
  readModifyWrite: true,
  changeFeed: true,
});

/**
 * Redis itself accepts keys and values of up to 512 MB (proto-max-bulk-len). The bounds here are
 * lower because a row write is one Lua script, and a script holds Redis's single thread for its
 * whole run: a 10 MiB value or a 64 MiB row is copied in tens of milliseconds, a 256 MiB row
 * would stall every other client for seconds. Keys and columns are bounded as in Bigtable so
 * that data moves between the stores unchanged.
 */
export const REDIS_LIMITS: StoreLimits = Object.freeze({
  keyBytes: 4096,
  columnBytes: 16 * 1024,
  valueBytes: 10 * MIB,
  mutationsPerRow: 100_000,
  bytesPerRow: 64 * MIB,
  entriesPerBatch: 1000,
  mutationsPerBatch: 100_000,
  bytesPerBatch: 64 * MIB,
  rowsPerPage: 1000,
  familiesPerTable: 100,
  // Only the latest version is kept.
  versionsPerRead: 1,
  // Timestamps are stored as exact decimal microseconds.
  timestampGranularityMicros: 1,
  // Redis sets no bound of its own on a script's work. These keep one conditional or counter
  // script short (a condition or a rule is one field lookup; a row or family condition reads
  // the row once), and are the bounds the other stores publish, so requests move unchanged.
  conditionsPerCheck: 16,
  rulesPerRow: 1000,
  // Changes are kept in memory, beside the rows, each with its values: a day of a busy table's
  // writes would take more memory than the table itself. An hour covers a reader's disconnect,
  // a restart or a rolling update.
  changeRetentionSeconds: 3600,
});
