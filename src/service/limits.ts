import type { StoreCapabilities, StoreLimits } from '../store/store.ts';
import { ApiError } from './errors.ts';
import { MAX_PAGE_TOKEN_CHARS } from './page-tokens.ts';

const MIB = 1024 * 1024;

/**
 * The service's own bounds, the same for every store; published with each store's limits, so
 * that a caller finds every bound of a request in one place.
 */
export const SERVICE_LIMITS = Object.freeze({
  /** Most tables in one batch delete. */
  tablesPerBatchDelete: 100,
  /** Most column selectors (`columns`) in one read or scan. */
  columnsPerRead: 100,
  /**
   * Most bytes of keys, columns and values in one scan page: the page ends before the row that
   * would pass it (a page always holds at least one row, however large). A long poll of a change
   * feed ends before the change that would pass it alike (keeping at least one).
   */
  pageBytes: 16 * MIB,
  /** Longest page token, in characters. */
  pageTokenChars: MAX_PAGE_TOKEN_CHARS,
});

/** Rows in a scan page when the request does not say. */
export const DEFAULT_PAGE_SIZE = 100;

export type PublishedLimits = StoreLimits & typeof SERVICE_LIMITS;

/** What GET /v2/stores publishes as a store's `limits`: its own and the service's. */
export function publishedLimits(limits: StoreLimits): PublishedLimits {
  return { ...limits, ...SERVICE_LIMITS };
}

/**
 * overLimit is the 400 for a request beyond a published bound, naming the bound (`limit`) and the
 * field (`errors[0].path`). Nothing was sent to the store.
 */
export function overLimit(limit: keyof PublishedLimits, path: string, message: string): ApiError {
  return new ApiError('VALIDATION_FAILED', `${message} (limit ${limit}).`, { limit, errors: [{ path, message }] });
}

/** What each published limit bounds, for the API's documentation. */
export const LIMIT_DESCRIPTIONS: Readonly<Record<keyof PublishedLimits, string>> = {
  keyBytes: 'Longest row key, in bytes (also start, end and prefix of a scan).',
  columnBytes: 'Longest column name, in bytes.',
  valueBytes: 'Largest value of one cell, in bytes.',
  mutationsPerRow: 'Most cells in one row write, or mutations in one row mutation or batch entry.',
  bytesPerRow: 'Most bytes (key, columns and values) one row write or mutation may carry.',
  entriesPerBatch: 'Most entries in one batch write, and keys in one batch get.',
  mutationsPerBatch: 'Most mutations over all entries of one batch write.',
  bytesPerBatch: 'Most bytes (keys, columns and values) over all entries of one batch write.',
  rowsPerPage: 'Largest pageSize of a scan.',
  familiesPerTable: 'Most column families in one table.',
  versionsPerRead: 'Largest `versions` of a read.',
  timestampGranularityMicros: 'Timestamps written are multiples of this many microseconds (1000: milliseconds).',
  conditionsPerCheck: 'Most conditions in one checkAndMutate, or in one conditional batch write entry.',
  rulesPerRow: 'Most rules in one readModifyWrite.',
  changeRetentionSeconds: 'How long a change stays in the table\'s change feed: a cursor or `since` older than this is 410 CURSOR_EXPIRED.',
  tablesPerBatchDelete: 'Most tables in one batch delete (the same for every store).',
  columnsPerRead: 'Most column selectors (`columns`) in one read (the same for every store).',
  pageBytes:
    'Most bytes of keys, columns and values in one scan page: the page ends before the row that would pass it, or earlier while the service ' +
    'holds as many rows for answers as its memory allows (a page holds at least one row). A long poll of a change feed ' +
    '(`GET …/changes` as JSON) ends before the change that would pass it, or earlier alike, holding at least one change. The same for every store.',
  pageTokenChars: 'Longest page token, in characters (the same for every store).',
};

/** What each capability lets a request do. */
export const CAPABILITY_DESCRIPTIONS: Readonly<Record<keyof StoreCapabilities, string>> = {
  multipleVersions: 'More than the latest version of a column is kept and readable: `versions` above 1, and families keeping several versions (or all).',
  maxAge: 'Families with `maxAgeSeconds`.',
  reverseScan: 'Scans with `reverse=true`.',
  checkAndMutate: 'Conditional mutations: `:checkAndMutate`, and batch write entries with `conditions`.',
  readModifyWrite: 'Counters and appends: `:readModifyWrite`.',
  changeFeed: 'A change feed per table: `GET …/tables/{table}/changes`.',
};

/** overLimit for a byte string longer than `max`. */
export function tooManyBytes(limit: keyof PublishedLimits, path: string, bytes: number, max: number): ApiError {
  return overLimit(limit, path, `${path || 'the request'} is ${bytes} bytes, more than the ${max} this store takes`);
}

/** overLimit for a list longer than `max`. */
export function tooMany(limit: keyof PublishedLimits, path: string, count: number, max: number, what: string): ApiError {
  return overLimit(limit, path, `${path || 'the request'} has ${count} ${what}, more than the ${max} this store takes`);
}

/** What each capability lets a request do, for the 501's detail. */
const CAPABILITY_USES: Readonly<Record<keyof StoreCapabilities, string>> = {
  multipleVersions: 'keep or read more than the latest version of a column',
  maxAge: 'expire versions by age (maxAgeSeconds)',
  reverseScan: 'scan in reverse key order',
  checkAndMutate: 'apply mutations conditionally',
  readModifyWrite: 'increment counters or append to values',
  changeFeed: 'follow a table\'s changes',
};

/**
 * notSupported is the 501 for a request that needs a capability the store lacks; nothing was
 * sent to the store. `capability` names the field of the store's published capabilities.
 */
export function notSupported(store: string, capability: keyof StoreCapabilities): ApiError {
  return new ApiError(
    'NOT_SUPPORTED_BY_STORE',
    `Store "${store}" cannot ${CAPABILITY_USES[capability]} (capability ${capability}).`,
    { capability },
  );
}
