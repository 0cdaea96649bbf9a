import type { Transaction } from '@google-cloud/spanner';
import type { Micros } from '../store.ts';
import { keySetOf } from './client-messages.ts';
import type { Turns } from '../../lib/turns.ts';
import { type CellRange, type ColumnRef, columnId } from './row-writes.ts';

/**
 * Columns of one row and family from which on a write reads their versions as one range (the
 * row's family) instead of one range per column: a read request of 10,000 ranges costs the
 * client some 100,000 messages to encode in one go, where one range costs nothing.
 */
const WHOLE_FAMILY_COLUMNS = 1000;

/**
 * A read of the whole family stops after this many cells per column the write names: a family
 * holding many more columns than the write names is read one range per column instead.
 */
const CELLS_PER_NAMED_COLUMN = 4;

interface StoredCell {
  readonly row_key: Buffer;
  readonly family: string;
  readonly col_hash: Buffer;
  readonly ts: { readonly value: string };
}

/** The call settings of each read (its deadline, taken when it starts). */
export type ReadSettings = () => object;

/**
 * readVersions: the stored timestamps of each of these columns, newest first, keyed by columnId,
 * read in the write's transaction.
 */
export async function readVersions(transaction: Transaction, tableId: string, columns: readonly ColumnRef[], settings: ReadSettings, slices: Turns): Promise<Map<string, Micros[]>> {
  const families = new Map<string, ColumnRef[]>();
  for (const column of columns) {
    const id = `${column.key.toString('hex')}/${column.family}`;
    const named = families.get(id) ?? [];
    named.push(column);
    families.set(id, named);
  }
  const stored = new Map<string, Micros[]>();
  const oneByOne: ColumnRef[] = [];
  for (const named of families.values()) {
    const { key, family } = named[0] as ColumnRef;
    const limit = named.length * CELLS_PER_NAMED_COLUMN;
    const cells = named.length < WHOLE_FAMILY_COLUMNS ? undefined : await readCells(transaction, await keySetOf([prefixRange([tableId, key, family])], slices), settings, limit);
    if (cells === undefined || cells.length >= limit) {
      oneByOne.push(...named);
      continue;
    }
    const wanted = new Set<string>();
    for (const column of named) {
      if (slices.dueAfterItem()) await slices.next();
      wanted.add(columnId(column.key, column.family, column.hash));
    }
    await collect(stored, cells, slices, wanted);
  }
  if (oneByOne.length > 0) {
    const keySet = await keySetOf(
      oneByOne.map((column) => prefixRange([tableId, column.key, column.family, column.hash])),
      slices,
    );
    await collect(stored, await readCells(transaction, keySet, settings, 0), slices);
  }
  return stored;
}

function prefixRange(prefix: unknown[]): CellRange {
  return { startClosed: prefix, endClosed: prefix };
}

async function readCells(transaction: Transaction, keySet: object, settings: ReadSettings, limit: number): Promise<StoredCell[]> {
  const [rows] = await transaction.read('kvcrud_cells', {
    keySet,
    columns: ['row_key', 'family', 'col_hash', 'ts'],
    limit,
    json: true,
    jsonOptions: { wrapNumbers: true },
    gaxOptions: settings(),
  });
  return rows as unknown as StoredCell[];
}

/** Adds each cell's timestamp to its column's, in key order (newest first); only the wanted columns', when given. */
async function collect(stored: Map<string, Micros[]>, cells: readonly StoredCell[], slices: Turns, wanted?: ReadonlySet<string>): Promise<void> {
  for (const cell of cells) {
    if (slices.dueAfterItem()) await slices.next();
    const id = columnId(cell.row_key, cell.family, cell.col_hash);
    if (wanted !== undefined && !wanted.has(id)) continue;
    const timestamps = stored.get(id) ?? [];
    timestamps.push(BigInt(cell.ts.value));
    stored.set(id, timestamps);
  }
}
