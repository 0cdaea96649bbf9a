import type { Cell, ColumnSelector, Mutation, Row } from '../store.ts';

const COLON = 0x3a;

/**
 * The arguments of the mutateRow script after the row key: five per mutation (op, family,
 * column, timestamp, value), empty where a mutation has no such part.
 */
export function mutationArguments(mutations: readonly Mutation[]): Array<string | Buffer> {
  const args: Array<string | Buffer> = [];
  for (const mutation of mutations) {
    switch (mutation.type) {
      case 'set':
        args.push('s', mutation.family, mutation.column, mutation.timestampMicros.toString(), mutation.value);
        break;
      case 'deleteColumn':
        args.push('c', mutation.family, mutation.column, '', '');
        break;
      case 'deleteFamily':
        args.push('f', mutation.family, '', '', '');
        break;
      case 'deleteRow':
        args.push('r', '', '', '', '');
        break;
    }
  }
  return args;
}

/** What decodeRow needs to know of a table: each family's maxAge in microseconds (0n: none). */
export type MaxAges = ReadonlyMap<string, bigint>;

/**
 * decodeRow turns a row hash (HGETALL's flat field, value, field, value… reply) into a Row with
 * the cells `columns` selects (all when absent), leaving out cells past their family's maxAge at
 * `nowMicros`; null when no cell is left. Cells are ordered by family, then column bytes.
 */
export function decodeRow(
  key: Buffer,
  flat: readonly Buffer[],
  columns: readonly ColumnSelector[] | undefined,
  maxAges: MaxAges,
  nowMicros: bigint,
): Row | null {
  const cells: Cell[] = [];
  for (let i = 0; i + 1 < flat.length; i += 2) {
    const field = flat[i] as Buffer;
    const stored = flat[i + 1] as Buffer;
    const familyEnd = field.indexOf(COLON);
    const timestampEnd = stored.indexOf(COLON);
    if (familyEnd < 0 || timestampEnd < 0) continue; // not a cell of this layout
    const family = field.toString('latin1', 0, familyEnd);
    const column = field.subarray(familyEnd + 1);
    if (columns !== undefined && !columns.some((selector) => selects(selector, family, column))) continue;
    const timestampMicros = BigInt(stored.toString('latin1', 0, timestampEnd));
    const maxAge = maxAges.get(family);
    if (maxAge === undefined) continue; // a family the table does not have: never written by this store
    if (maxAge > 0n && timestampMicros < nowMicros - maxAge) continue;
    cells.push({ family, column, value: stored.subarray(timestampEnd + 1), timestampMicros });
  }
  if (cells.length === 0) return null;
  cells.sort(compareCells);
  return { key, cells };
}

function selects(selector: ColumnSelector, family: string, column: Buffer): boolean {
  return selector.family === family && (selector.column === undefined || selector.column.equals(column));
}

function compareCells(a: Cell, b: Cell): number {
  if (a.family !== b.family) return a.family < b.family ? -1 : 1;
  return Buffer.compare(a.column, b.column);
}
