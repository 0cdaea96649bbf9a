import { isStoreError } from '../errors.ts';
import type { CallOptions, KeyRange, Row, ScanRequest } from '../store.ts';
import { backoff } from './calls.ts';
import { isDeadline, isTransient } from './grpc-errors.ts';
import { isEmpty, rangeAfter } from './row-ranges.ts';

/** Reads the rows of `range`, at most `left` of them, in one ReadRows call. */
export type ReadRange = (range: KeyRange, left: number) => AsyncIterable<Row>;

/**
 * resumedScan yields the rows of a scan, calling `read` again after a transient failure for what
 * is left of it (the keys after the last row yielded, and the rows still wanted), with backoff,
 * so no row comes twice. Any other failure goes to `fail`. A scan that failed transiently and then
 * ran out of time, in the backoff or before the next call could start (a timer late on a busy
 * process), fails with its transient error rather than the deadline's, as withRetry does.
 */
export async function* resumedScan(scan: Pick<ScanRequest, 'range' | 'limit' | 'reverse'>, read: ReadRange, options: CallOptions, fail: (error: unknown) => Error): AsyncGenerator<Row> {
  let range = scan.range;
  let left = scan.limit;
  let lastTransient: unknown;
  for (let attempt = 0; ; attempt++) {
    if (isEmpty(range) || left <= 0) return;
    try {
      for await (const row of read(range, left)) {
        left -= 1;
        range = rangeAfter(range, row.key, scan.reverse);
        yield row;
        if (left <= 0) return;
      }
      return;
    } catch (error) {
      const outOfTime = lastTransient !== undefined && isDeadline(error);
      if (isStoreError(error) && !outOfTime) throw error;
      if (isTransient(error) && (await backoff(attempt, options))) {
        lastTransient = error;
        continue;
      }
      throw fail(outOfTime ? lastTransient : error);
    }
  }
}
