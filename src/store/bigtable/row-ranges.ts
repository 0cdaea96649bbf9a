import type { KeyRange } from '../store.ts';

/** Whether a range holds no key at all. An empty end would mean "unbounded" to Bigtable. */
export function isEmpty(range: KeyRange): boolean {
  if (range.end === undefined) return false;
  return range.end.length === 0 || (range.start !== undefined && Buffer.compare(range.start, range.end) >= 0);
}

/** Bigtable's row range for a contract range: start inclusive, end exclusive, absent unbounded. */
export function rowRange(range: KeyRange) {
  return {
    ...(range.start === undefined || range.start.length === 0 ? {} : { startKeyClosed: range.start }),
    ...(range.end === undefined ? {} : { endKeyOpen: range.end }),
  };
}

/**
 * What is left of a scan of `range` once the row `key` has been yielded: the keys after it, or
 * before it for a reverse scan. A scan resumes there after a failure, so no row comes twice.
 */
export function rangeAfter(range: KeyRange, key: Buffer, reverse: boolean): KeyRange {
  if (reverse) return { ...(range.start === undefined ? {} : { start: range.start }), end: key };
  // The smallest key greater than `key`: inclusive starts need no open bound.
  return { start: Buffer.concat([key, Buffer.from([0])]), ...(range.end === undefined ? {} : { end: range.end }) };
}
