import type { CallOptions, DataStore, KeyRange, Row, TableRef } from '../store/store.ts';
import type { AnswerHold } from './answer-budget.ts';
import { ApiError } from './errors.ts';
import { shortestSeparator } from './key-ranges.ts';
import { SERVICE_LIMITS } from './limits.ts';
import { type ScanPosition, type ScanQuery, encodePageToken } from './page-tokens.ts';

/** One page of a scan, and the token of the next one when the scan has more rows. */
export interface ScanPage {
  readonly rows: readonly Row[];
  readonly nextPageToken?: string | undefined;
}

/**
 * readPage reads the page of `query` that starts at `position` (the query's own range when
 * there is none) and holds at most `pageSize` rows.
 *
 * It asks the store for one row more than the page, stops reading once the rows pass
 * SERVICE_LIMITS.pageBytes (see collect), and resumes the next page at the shortest
 * separator between the page's last key and that next key (key-ranges.ts): a short position even
 * when keys are long. A page ends early, and so holds fewer rows than pageSize, where:
 * - its keys, columns and values would pass SERVICE_LIMITS.pageBytes (it keeps at least one row);
 * - the answer budget has no room for the next row (`answer`, see collect; at least one row too);
 * - the token would pass SERVICE_LIMITS.pageTokenChars, because the separator shares too little
 *   with the query's bounds: the page then ends at the last row whose separator fits.
 * If no row of the page has a separator that fits (consecutive keys share a prefix of more than
 * about 700 bytes that neither `start`, `end` nor `prefix` covers), the page grows past pageSize,
 * up to the store's rowsPerPage, to the first row whose separator fits or the end of the scan;
 * failing that, the scan is refused with a 400 asking for a `prefix` or `start` covering the shared
 * prefix.
 */
export async function readPage(
  store: DataStore,
  ref: TableRef,
  query: ScanQuery,
  pageSize: number,
  position: ScanPosition | undefined,
  options: () => CallOptions,
  answer?: AnswerHold,
): Promise<ScanPage> {
  const range = position === undefined ? query.range : resumedRange(query, position.resume);
  const remaining = position === undefined ? query.limit : position.remaining;
  const scan = (limit: number, page: PageBounds) =>
    collect(
      store.scanRows(
        ref,
        { range, reverse: query.reverse, limit, versions: query.versions, ...(query.columns === undefined ? {} : { columns: query.columns }) },
        options(),
      ),
      page,
    );
  const tokenAfter = (rows: readonly Row[], count: number): string | undefined => {
    const last = rows[count - 1]?.key ?? Buffer.alloc(0);
    const next = rows[count]?.key ?? Buffer.alloc(0);
    const resume = query.reverse ? shortestSeparator(next, last) : shortestSeparator(last, next);
    return encodePageToken(query, { resume, remaining: remaining === undefined ? undefined : remaining - count });
  };

  const wanted = Math.min(pageSize, remaining ?? Infinity);
  // One row more than the page, to know whether there is a next one and where it starts.
  const askFor = remaining !== undefined && remaining <= pageSize ? remaining : pageSize + 1;
  const { rows, fitting } = await scan(askFor, { rows: wanted, answer });
  if (fitting === rows.length) return { rows };

  for (let end = fitting; end >= 1; end -= 1) {
    const token = tokenAfter(rows, end);
    if (token !== undefined) return { rows: rows.slice(0, end), nextPageToken: token };
  }

  // No separator of the page fits: read on past pageSize for one that does. Only pageBytes ends
  // this page, not the budget (a page cut short of a separator would fail); the rows it holds
  // beyond those already taken are taken once it is cut.
  const ceiling = store.limits.rowsPerPage;
  const { rows: more, fitting: bound } = await scan(Math.min(ceiling + 1, remaining ?? Infinity), { rows: ceiling });
  const takeUpTo = (count: number) => {
    for (const row of more.slice(fitting, count)) answer?.take(rowBytes(row));
  };
  for (let count = fitting + 1; count <= bound; count += 1) {
    if (count === more.length) {
      takeUpTo(count);
      return { rows: more };
    }
    const token = tokenAfter(more, count);
    if (token !== undefined) {
      takeUpTo(count);
      return { rows: more.slice(0, count), nextPageToken: token };
    }
  }
  throw new ApiError(
    'VALIDATION_FAILED',
    'The rows here have keys that share a prefix too long for a page token to hold. Scan them with a `prefix` (or `start`) that covers the shared part of their keys.',
    { errors: [{ path: 'prefix', message: 'consecutive keys share a prefix too long for a page token; name it in prefix or start' }] },
  );
}

/** The query's range, narrowed to what is left after `resume`. */
function resumedRange(query: ScanQuery, resume: Buffer): KeyRange {
  return query.reverse ? { ...query.range, end: resume } : { ...query.range, start: resume };
}

/** How many rows a page may hold, and the budget it takes them from (none: it takes nothing). */
interface PageBounds {
  readonly rows: number;
  readonly answer?: AnswerHold | undefined;
}

/** The bytes of a row's key, columns and values: what SERVICE_LIMITS.pageBytes and the answer budget count. */
export function rowBytes(row: Row): number {
  let bytes = row.key.length;
  for (const cell of row.cells) bytes += cell.column.length + cell.value.length;
  return bytes;
}

/**
 * The rows of a scan, read until the page cannot hold more: `page.rows` rows, the rows that fit in
 * SERVICE_LIMITS.pageBytes, or those the answer budget has room for. Once a row does not fit, the
 * store is asked for no more (leaving the scan cancels its call). The page's rows, `fitting`, are
 * taken from the budget as they are read; the first always is, so that every page makes progress.
 * The row after them, when read, is kept: its key places the next page's token.
 */
async function collect(rows: AsyncIterable<Row>, page: PageBounds): Promise<{ rows: Row[]; fitting: number }> {
  const all: Row[] = [];
  let bytes = 0;
  for await (const row of rows) {
    all.push(row);
    const size = rowBytes(row);
    bytes += size;
    const first = all.length === 1;
    const fits = first || (all.length <= page.rows && bytes <= SERVICE_LIMITS.pageBytes && (page.answer?.tryTake(size) ?? true));
    if (!fits) return { rows: all, fitting: all.length - 1 };
    if (first) page.answer?.take(size);
  }
  return { rows: all, fitting: all.length };
}
