/**
 * What the benchmark asks for, shared by the ceiling (gRPC, in-process) and the service (HTTP), so
 * both do the same work: read an existing row of two cells, write a new row of two cells, or a mix.
 */
import { randomBytes } from 'node:crypto';

export const CASES = ['read', 'insert', 'mix', 'v2read', 'v2write', 'v2scan', 'v2batchget', 'v2increment', 'v2increment-hot', 'v2checkandmutate', 'v2checkandmutate-hot'] as const;
export type CaseName = (typeof CASES)[number];

/** The cases of v1, which the Bigtable client's ceiling also runs. */
export const V1_CASES: readonly CaseName[] = ['read', 'insert', 'mix'];

/** Keys in one batchGet of the v2 batchGet case. */
export const BATCH_GET_KEYS = 10;

/** The operation each case exercises, for the printed table. */
export const CASE_LABELS: Record<CaseName, string> = {
  read: 'readCellData',
  insert: 'insertData',
  mix: '90% read / 10% insert',
  v2read: 'v2 rows.get (a row of 2 cells)',
  v2write: 'v2 rows.write (a new row of 2 cells)',
  v2scan: `v2 rows.scan (a page of ${100} rows)`,
  v2batchget: `v2 rows.batchGet (${BATCH_GET_KEYS} rows)`,
  v2increment: 'v2 rows.readModifyWrite (an increment of a counter in a random row)',
  'v2increment-hot': 'v2 rows.readModifyWrite (an increment of one counter, every connection)',
  v2checkandmutate: 'v2 rows.checkAndMutate (a set if a column exists, in a random row)',
  'v2checkandmutate-hot': 'v2 rows.checkAndMutate (a set if a column exists, in one row, every connection)',
};

/** The row every connection of the hot cases writes: a preloaded one, so that its `status` exists. */
export const HOT_KEY = 'order#000000';

/** Rows in one page of the v2 scan case. */
export const SCAN_PAGE_ROWS = 100;

export const TABLE = 'bench';
export const FAMILY = 'cf';
/** Rows written before the run, for reads to pick from. */
export const PRELOADED_ROWS = 1000;
/** Share of reads in the mixed case. */
export const MIX_READ_SHARE = 0.9;

/** The two cells of every row: a short status and a 100-byte text, as a typical small record. */
export const CELLS = [
  { columnName: 'status', columnValue: 'shipped' },
  { columnName: 'note', columnValue: 'x'.repeat(100) },
] as const;

/** The key of the i-th preloaded row. */
export function preloadedKey(index: number): string {
  return `order#${String(index).padStart(6, '0')}`;
}

/** A preloaded row's key, chosen uniformly. */
export function randomExistingKey(): string {
  return preloadedKey(Math.floor(Math.random() * PRELOADED_ROWS));
}

/**
 * newKeys makes keys never written before: a prefix unique to the run and the load (`tag`), then a
 * counter. Every insert of the benchmark creates a row.
 */
export function newKeys(tag: string): () => string {
  const prefix = `new#${randomBytes(4).toString('hex')}#${tag}#`;
  let counter = 0;
  return () => `${prefix}${counter++}`;
}

/** Whether the next request of a case is a read. */
export function nextIsRead(name: CaseName): boolean {
  if (name === 'read' || name === 'v2read' || name === 'v2scan' || name === 'v2batchget') return true;
  if (name === 'insert' || name === 'v2write' || name.startsWith('v2increment') || name.startsWith('v2checkandmutate')) return false;
  return Math.random() < MIX_READ_SHARE;
}

/** The first key of a page of the scan case: a preloaded row with a full page after it. */
export function randomScanStart(): string {
  return preloadedKey(Math.floor(Math.random() * (PRELOADED_ROWS - SCAN_PAGE_ROWS)));
}
