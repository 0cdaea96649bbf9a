import type { KeyRange } from '../store/store.ts';

/**
 * prefixRange is the key range of every key that starts with `prefix`: from the prefix itself
 * (inclusive) to the shortest key greater than all of them (exclusive), or unbounded above when
 * there is none (the prefix is empty or all 0xff bytes).
 */
export function prefixRange(prefix: Buffer): KeyRange {
  let end = prefix.length;
  while (end > 0 && prefix[end - 1] === 0xff) end -= 1;
  if (end === 0) return prefix.length === 0 ? {} : { start: prefix };
  const successor = Buffer.from(prefix.subarray(0, end));
  successor[end - 1] = (successor[end - 1] ?? 0) + 1;
  return { start: prefix, end: successor };
}

/** The length of the longest common prefix of two byte strings. */
export function commonPrefixLength(a: Buffer, b: Buffer): number {
  const length = Math.min(a.length, b.length);
  let index = 0;
  while (index < length && a[index] === b[index]) index += 1;
  return index;
}

/**
 * shortestSeparator returns the shortest byte string s with lower < s <= upper, for
 * lower < upper: the first commonPrefixLength + 1 bytes of upper. No shorter string fits, since
 * every string of at most that many bytes that does not exceed upper is a prefix of lower or
 * sorts before it.
 *
 * A forward scan that stopped after `lower` resumes at s (inclusive) and meets `upper` first; a
 * reverse scan that stopped after `upper` resumes below s (exclusive) and meets `lower` first.
 */
export function shortestSeparator(lower: Buffer, upper: Buffer): Buffer {
  return upper.subarray(0, commonPrefixLength(lower, upper) + 1);
}

/** Whether `key` lies in `range`: start inclusive, end exclusive, both in byte order. */
export function inRange(key: Buffer, range: KeyRange): boolean {
  return (range.start === undefined || Buffer.compare(key, range.start) >= 0) && (range.end === undefined || Buffer.compare(key, range.end) < 0);
}
