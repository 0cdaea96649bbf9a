import type { Cell, ColumnSelector, FamilyPolicy, Micros, ReadSelection, Row } from '../store.ts';

/** One row of kvcrud_cells as a query returns it (json, numbers wrapped). */
export interface CellRow {
  readonly row_key: Buffer;
  readonly family: string;
  readonly col: Buffer;
  readonly ts: { readonly value: string };
  readonly value: Buffer;
}

/**
 * RowAssembler groups the cells of a query (ordered by row_key, family, col_hash, ts DESC, which
 * is kvcrud_cells' key order, or row_key descending for a reverse scan) into rows as a read sees
 * them, with their columns put in byte order (they are stored in hash order): only the selected columns, and per column the newest versions the family's policy keeps
 * and the read asks for. Retention is applied here as well as on write, because a version that
 * was in bounds when written may have expired since.
 */
export class RowAssembler {
  readonly #policies: ReadonlyMap<string, FamilyPolicy>;
  readonly #selection: ReadSelection;
  readonly #nowMicros: Micros;
  #key: Buffer | undefined;
  /** The row's cells so far, each with its column as latin1 text, whose string order is the bytes' order and cheaper to sort by. */
  #cells: Array<{ readonly cell: Cell; readonly column: string }> = [];
  #column: { family: string; column: Buffer; seen: number } | undefined;

  constructor(policies: ReadonlyMap<string, FamilyPolicy>, selection: ReadSelection, nowMicros: Micros) {
    this.#policies = policies;
    this.#selection = selection;
    this.#nowMicros = nowMicros;
  }

  /** Adds the next cell; returns the previous row when this cell starts a new one (and that row kept a cell). */
  add(cell: CellRow): Row | undefined {
    let finished: Row | undefined;
    if (this.#key === undefined || !this.#key.equals(cell.row_key)) {
      finished = this.finish();
      this.#key = cell.row_key;
    }
    if (this.#column === undefined || this.#column.family !== cell.family || !this.#column.column.equals(cell.col)) {
      this.#column = { family: cell.family, column: cell.col, seen: 0 };
    }
    // Versions beyond the policy's count are gone even if older ones are still in bounds.
    const position = this.#column.seen++;
    const policy = this.#policies.get(cell.family);
    if (policy === undefined || !selected(this.#selection.columns, cell.family, cell.col)) return finished;
    if (position >= (policy.maxVersions ?? Infinity) || position >= this.#selection.versions) return finished;
    const timestampMicros = BigInt(cell.ts.value);
    if (policy.maxAgeSeconds !== undefined && this.#nowMicros - timestampMicros > BigInt(policy.maxAgeSeconds) * 1_000_000n) return finished;
    this.#cells.push({ cell: { family: cell.family, column: cell.col, value: cell.value, timestampMicros }, column: cell.col.toString('latin1') });
    return finished;
  }

  /** Ends the current row: returns it if it kept a cell. */
  finish(): Row | undefined {
    const key = this.#key;
    // Stable: each column's versions stay newest first.
    const cells = this.#cells
      .sort((a, b) => (a.cell.family < b.cell.family ? -1 : a.cell.family > b.cell.family ? 1 : a.column < b.column ? -1 : a.column > b.column ? 1 : 0))
      .map((entry) => entry.cell);
    this.#key = undefined;
    this.#column = undefined;
    this.#cells = [];
    return key === undefined || cells.length === 0 ? undefined : { key, cells };
  }
}

function selected(columns: readonly ColumnSelector[] | undefined, family: string, column: Buffer): boolean {
  if (columns === undefined) return true;
  return columns.some((selector) => selector.family === family && (selector.column === undefined || selector.column.equals(column)));
}

/** The families a selection reads, to narrow the query; undefined for every family. */
export function selectedFamilies(selection: ReadSelection): string[] | undefined {
  return selection.columns === undefined ? undefined : [...new Set(selection.columns.map((selector) => selector.family))];
}
