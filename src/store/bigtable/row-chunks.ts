import type { protos } from '@google-cloud/bigtable';
import type { Cell } from '../store.ts';
import type { Turns } from '../../lib/turns.ts';

type CellChunk = protos.google.bigtable.v2.ReadRowsResponse.ICellChunk;
type Bytes = Uint8Array | string | null | undefined;

/** A row as it came from ReadRows: its cells in stream order. */
export interface MergedRow {
  readonly key: Buffer;
  readonly cells: Cell[];
}

/**
 * RowMerger reassembles rows from a ReadRows response stream, chunk by chunk.
 *
 * ReadRows sends a row as a sequence of chunks: the row key comes with the first, family and
 * qualifier are repeated only when they change, a large value is split over several chunks
 * (valueSize > 0 on all but the last), resetRow discards what was sent of the row so far, and
 * commitRow ends it. The client library's own merger turns qualifiers into object keys, which
 * mangles bytes that are not UTF-8, so the adapter merges chunks itself and keeps keys, qualifiers
 * and values as Buffers. Cells come out in stream order (Bigtable's: family by family, columns in
 * byte order, newest version first); the order of families is Bigtable's, not by name.
 *
 * Throws on a stream that breaks the protocol.
 */
export class RowMerger {
  #key: Buffer | undefined;
  #cells: Cell[] = [];
  #family: string | undefined;
  #column: Buffer | undefined;
  #partial: { timestampMicros: bigint; parts: Buffer[] } | undefined;

  /** Takes the next chunk; returns the row it commits, if it commits one. */
  push(chunk: CellChunk): MergedRow | undefined {
    if (chunk.resetRow) {
      this.#reset();
      return undefined;
    }
    if (chunk.rowKey !== null && chunk.rowKey !== undefined && chunk.rowKey.length > 0) {
      const key = toBuffer(chunk.rowKey);
      if (this.#key !== undefined && !this.#key.equals(key)) throw new Error('ReadRows started a row inside another');
      this.#key = key;
    } else if (this.#key === undefined) {
      throw new Error('ReadRows sent a cell without a row key');
    }
    if (chunk.familyName) {
      this.#family = chunk.familyName.value ?? '';
      this.#column = undefined;
    }
    if (chunk.qualifier) this.#column = toBuffer(chunk.qualifier.value);
    if (this.#family === undefined || this.#column === undefined) {
      throw new Error('ReadRows sent a cell without family or qualifier');
    }
    this.#partial ??= { timestampMicros: toBigInt(chunk.timestampMicros), parts: [] };
    this.#partial.parts.push(toBuffer(chunk.value));
    if (!chunk.valueSize) {
      const { parts, timestampMicros } = this.#partial;
      this.#cells.push({ family: this.#family, column: this.#column, value: parts.length === 1 ? (parts[0] as Buffer) : Buffer.concat(parts), timestampMicros });
      this.#partial = undefined;
    }
    if (!chunk.commitRow) return undefined;
    if (this.#partial) throw new Error('ReadRows committed a row in the middle of a split value');
    const row = { key: this.#key, cells: this.#cells };
    this.#reset();
    return row;
  }

  /** Checks the stream ended between rows. */
  end(): void {
    if (this.#key !== undefined) throw new Error('ReadRows ended in the middle of a row');
  }

  #reset(): void {
    this.#key = undefined;
    this.#cells = [];
    this.#family = undefined;
    this.#column = undefined;
    this.#partial = undefined;
  }
}

/** Orders a row's cells as the contract says: by family name, then column bytes, newest first. */
export function sortCells(cells: Cell[]): Cell[] {
  return cells.sort(compareCells);
}

/**
 * sortCells for a large row, a slice at a time: sorting the widest rows in one go held the event
 * loop for tens of milliseconds (docs/performance.md). Bigtable sends a family's cells together and already in contract order, so
 * only the families are put in order; a row that breaks that is sorted in one go.
 */
export async function sortCellsInSlices(cells: Cell[], turns: Turns): Promise<Cell[]> {
  const families = new Map<string, Cell[]>();
  let previous: Cell | undefined;
  for (let index = 0; index < cells.length; index++) {
    const cell = cells[index] as Cell;
    let family = families.get(cell.family);
    if (family === undefined) families.set(cell.family, (family = []));
    else if (previous?.family !== cell.family || compareCells(previous, cell) > 0) return sortCells(cells);
    family.push(cell);
    previous = cell;
    if ((index & 1023) === 1023) await turns.pause();
  }
  if (families.size <= 1) return cells;
  return ([] as Cell[]).concat(...[...families].sort(([a], [b]) => (a < b ? -1 : 1)).map(([, family]) => family));
}

function compareCells(a: Cell, b: Cell): number {
  if (a.family !== b.family) return a.family < b.family ? -1 : 1;
  const byColumn = Buffer.compare(a.column, b.column);
  if (byColumn !== 0) return byColumn;
  return a.timestampMicros === b.timestampMicros ? 0 : a.timestampMicros > b.timestampMicros ? -1 : 1;
}

function toBuffer(bytes: Bytes): Buffer {
  if (bytes === null || bytes === undefined) return Buffer.alloc(0);
  if (typeof bytes === 'string') return Buffer.from(bytes, 'base64');
  return Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

function toBigInt(value: CellChunk['timestampMicros']): bigint {
  if (value === null || value === undefined) return 0n;
  return BigInt(typeof value === 'object' ? value.toString() : value);
}
