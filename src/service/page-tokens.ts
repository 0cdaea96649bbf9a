import { createHash } from 'node:crypto';
import type { ColumnSelector, KeyRange } from '../store/store.ts';
import { readVarint, varint } from '../lib/varint.ts';
import { ApiError } from './errors.ts';
import { commonPrefixLength } from './key-ranges.ts';

/**
 * Page tokens: where a scan resumes, held by the caller rather than the service, so that any
 * replica can serve the next page and nothing is left behind when a caller stops paging.
 *
 * A token is base64url (no padding) of:
 *   version (1 byte) | flags (1 byte) | remaining rows (varint, when the scan has a limit)
 *   | bytes shared with a bound of the query (varint) | the rest of the resume key | tag (12 bytes)
 * The resume key is stored as the bytes it does not share with the query's start or end bound
 * (whichever shares more; flag bit 0 says which), so a scan of keys with a long common prefix
 * named by `prefix` or `start` keeps small tokens. The tag is the first 12 bytes of SHA-256 over
 * the query the token belongs to (store, instance, table, range, direction, columns, versions,
 * limit) and the rest of the token: a token of another table or query, or an altered one, fails
 * the check and is refused, never read as a position in this scan. It is no signature: a caller
 * who forges a position can only start the scan where `start` could have started it anyway.
 */

/** Longest token, in characters: under 1 KiB, so it fits any URL or header comfortably. */
export const MAX_PAGE_TOKEN_CHARS = 1000;
const MAX_PAYLOAD_BYTES = Math.floor((MAX_PAGE_TOKEN_CHARS * 3) / 4);
const VERSION = 1;
const TAG_BYTES = 12;
const FLAG_BASE_IS_END = 1;
const FLAG_HAS_LIMIT = 2;

/** Everything that makes two scans the same scan, for binding tokens to it. */
export interface ScanQuery {
  readonly store: string;
  readonly instance: string;
  readonly table: string;
  readonly range: KeyRange;
  readonly reverse: boolean;
  readonly columns?: readonly ColumnSelector[] | undefined;
  readonly versions: number;
  /** Most rows over all pages; undefined for no limit. */
  readonly limit?: number | undefined;
}

/** Where the next page starts, and what is left of the limit. */
export interface ScanPosition {
  /** Forward: the next page's start (inclusive). Reverse: the next page's end (exclusive). */
  readonly resume: Buffer;
  /** Rows still allowed by the query's limit; undefined when it has none. */
  readonly remaining?: number | undefined;
}

/**
 * encodePageToken returns the token of `position` in `query`, or undefined when it would be
 * longer than MAX_PAGE_TOKEN_CHARS (the resume key shares too little with the query's bounds).
 */
export function encodePageToken(query: ScanQuery, position: ScanPosition): string | undefined {
  const { base, baseIsEnd } = closestBound(query.range, position.resume);
  const shared = base === undefined ? 0 : commonPrefixLength(base, position.resume);
  const hasLimit = query.limit !== undefined;
  const header = Buffer.from([
    VERSION,
    (baseIsEnd ? FLAG_BASE_IS_END : 0) | (hasLimit ? FLAG_HAS_LIMIT : 0),
    ...(hasLimit ? varint(position.remaining ?? 0) : []),
    ...varint(shared),
  ]);
  const rest = position.resume.subarray(shared);
  if (header.length + rest.length + TAG_BYTES > MAX_PAYLOAD_BYTES) return undefined;
  const body = Buffer.concat([header, rest]);
  return Buffer.concat([body, tag(query, body)]).toString('base64url');
}

/**
 * decodePageToken reads a token made by encodePageToken for this same query, or throws
 * INVALID_PAGE_TOKEN: for a token of another table or query, an altered or truncated one, or
 * text that is no token at all.
 */
export function decodePageToken(query: ScanQuery, token: string): ScanPosition {
  if (token.length > MAX_PAGE_TOKEN_CHARS || !/^[A-Za-z0-9_-]+$/.test(token)) throw invalidToken();
  const bytes = Buffer.from(token, 'base64url');
  // Buffer.from is lenient: only the canonical text of the bytes is a token.
  if (bytes.toString('base64url') !== token || bytes.length < 2 + TAG_BYTES) throw invalidToken();
  const body = bytes.subarray(0, bytes.length - TAG_BYTES);
  if (!tag(query, body).equals(bytes.subarray(bytes.length - TAG_BYTES)) || body[0] !== VERSION) throw invalidToken();

  const flags = body[1] ?? 0;
  let offset = 2;
  let remaining: number | undefined;
  if ((flags & FLAG_HAS_LIMIT) !== 0) {
    [remaining, offset] = readTokenVarint(body, offset);
    if (remaining < 1) throw invalidToken();
  }
  const [shared, restStart] = readTokenVarint(body, offset);
  const base = (flags & FLAG_BASE_IS_END) !== 0 ? query.range.end : query.range.start;
  if (shared > (base?.length ?? 0)) throw invalidToken();
  const resume = Buffer.concat([base?.subarray(0, shared) ?? Buffer.alloc(0), body.subarray(restStart)]);
  if (!resumesInside(query, resume)) throw invalidToken();
  return { resume, remaining };
}

function invalidToken(): ApiError {
  return new ApiError(
    'INVALID_PAGE_TOKEN',
    'pageToken is not a token of this scan: send the nextPageToken of the previous page, with the same table and query parameters (pageSize may change).',
    { errors: [{ path: 'pageToken', message: 'pageToken does not belong to this scan' }] },
  );
}

/** The bound of the range sharing the longest prefix with `key`. */
function closestBound(range: KeyRange, key: Buffer): { base: Buffer | undefined; baseIsEnd: boolean } {
  const fromStart = range.start === undefined ? -1 : commonPrefixLength(range.start, key);
  const fromEnd = range.end === undefined ? -1 : commonPrefixLength(range.end, key);
  return fromEnd > fromStart ? { base: range.end, baseIsEnd: true } : { base: range.start, baseIsEnd: false };
}

/** A resume point the scan itself could have produced: inside the query's range. */
function resumesInside(query: ScanQuery, resume: Buffer): boolean {
  const { start, end } = query.range;
  if (query.reverse) {
    // The next page's exclusive end: above start, at most the old end.
    return (start === undefined || Buffer.compare(resume, start) > 0) && (end === undefined || Buffer.compare(resume, end) <= 0);
  }
  return (start === undefined || Buffer.compare(resume, start) >= 0) && (end === undefined || Buffer.compare(resume, end) < 0);
}

function tag(query: ScanQuery, body: Buffer): Buffer {
  const hash = createHash('sha256');
  const field = (bytes: Buffer | string | undefined) => {
    if (bytes === undefined) {
      hash.update(Buffer.from([0]));
      return;
    }
    const data = typeof bytes === 'string' ? Buffer.from(bytes, 'utf8') : bytes;
    hash.update(Buffer.from([1, ...varint(data.length)]));
    hash.update(data);
  };
  field('kvcrud page token');
  field(query.store);
  field(query.instance);
  field(query.table);
  field(query.range.start);
  field(query.range.end);
  field(query.reverse ? 'reverse' : 'forward');
  field(query.columns === undefined ? undefined : String(query.columns.length));
  for (const column of query.columns ?? []) {
    field(column.family);
    field(column.column);
  }
  field(String(query.versions));
  field(query.limit === undefined ? undefined : String(query.limit));
  field(body);
  return hash.digest().subarray(0, TAG_BYTES);
}

/** The varint at `start`: at most 7 bytes, which hold any count a token carries. */
function readTokenVarint(bytes: Buffer, start: number): [number, number] {
  const read = readVarint(bytes, start, 7);
  if (read === undefined) throw invalidToken();
  return read;
}
