import type { Transaction } from '@google-cloud/spanner';
import type { Turns } from '../../lib/turns.ts';
import type { CommitEncoder } from './commit-request.ts';
import type { CellRange, CellRecord, CellWrite } from './row-writes.ts';

/**
 * Messages of large requests (a commit's rows, a read's key ranges) that the store builds for the
 * Spanner client itself, a slice at a time, instead of handing it values to encode. The client
 * encodes such values in one go and then deep-copies the whole request with `extend`, member by
 * member for plain objects and arrays (some 150,000 objects for 10,000 cells): an instance of a
 * class it takes by reference. So each row and each key is a ListValue instance, encoded as the
 * client's codec encodes it: strings and INT64 decimal strings as they are, bytes as base64,
 * each a stringValue.
 */
class ListValue {
  readonly values: readonly Value[];

  constructor(values: readonly Value[]) {
    this.values = values;
  }
}

interface Value {
  readonly stringValue: string;
}

/**
 * Encodes the rows or keys of one request. A value that repeats the one in the same place of the
 * list before (a row's table, row key, family, timestamp) is the same object: the request holds
 * fewer, and the heap has fewer to collect while it is built.
 */
class ListEncoder {
  #parts: readonly unknown[] = [];
  #values: readonly Value[] = [];

  encode(parts: readonly unknown[]): ListValue {
    const values = parts.map((part, index) =>
      part === this.#parts[index] ? (this.#values[index] as Value) : { stringValue: Buffer.isBuffer(part) ? part.toString('base64') : String(part) },
    );
    this.#parts = parts;
    this.#values = values;
    return new ListValue(values);
  }
}

/** A KeyRange whose bounds are ListValues; a class instance, for the same reason. */
class KeyRange {
  constructor(range: CellRange, encoder: ListEncoder) {
    for (const [bound, key] of Object.entries(range)) Object.assign(this, { [bound]: encoder.encode(key as unknown[]) });
  }
}

/**
 * A Mutation, as an instance for the same reason: the client's copy would otherwise walk each of
 * its arrays of 10,000 members, by their index names. One property, named for its kind.
 */
class Mutation {
  constructor(kind: 'insertOrUpdate' | 'delete', operation: object) {
    Object.assign(this, { [kind]: operation });
  }
}

/** Columns of kvcrud_cells in the order each upserted row lists its values. */
const CELL_COLUMNS = ['table_id', 'row_key', 'family', 'col_hash', 'ts', 'col', 'value'] as const satisfies ReadonlyArray<keyof CellRecord>;

/** The KeySet of a read or delete of these ranges. */
export async function keySetOf(ranges: readonly CellRange[], slices: Turns): Promise<{ ranges: KeyRange[] }> {
  const encoded: KeyRange[] = [];
  const encoder = new ListEncoder();
  for (const range of ranges) {
    if (slices.dueAfterItem()) await slices.next();
    encoded.push(new KeyRange(range, encoder));
  }
  return { ranges: encoded };
}

/**
 * Rows or keys per mutation. Each mutation is encoded as it is queued (commit-request.ts), and
 * 250 rows take a few milliseconds. Spanner counts a commit's mutations by the cells and keys
 * they write, not by the messages that hold them.
 */
const ROWS_PER_MUTATION = 250;

/**
 * Buffers the writes as the commit's mutations, in order: Spanner applies a commit's mutations in
 * the order they are listed. Runs of upserts become mutations of up to ROWS_PER_MUTATION rows, and
 * so do runs of deletes of ranges or of keys. The mutations go on the list the client's own upsert
 * and deleteRows queue to, each encoded for the commit with `encoder` when there is one.
 */
export async function queueWrites(transaction: Transaction, writes: readonly CellWrite[], slices: Turns, encoder: CommitEncoder | undefined): Promise<void> {
  const queued = (transaction as unknown as { _queuedMutations: unknown[] })._queuedMutations;
  for (let index = 0; index < writes.length; ) {
    const first = writes[index] as CellWrite;
    let end = index + 1;
    while (end < writes.length && end - index < ROWS_PER_MUTATION && (writes[end] as CellWrite).kind === first.kind) end++;
    const run = writes.slice(index, end);
    if (first.kind === 'upsert') {
      const values: ListValue[] = [];
      const encoder = new ListEncoder();
      for (const write of run) {
        if (slices.dueAfterItem()) await slices.next();
        const row = (write as Extract<CellWrite, { kind: 'upsert' }>).row;
        values.push(encoder.encode(CELL_COLUMNS.map((column) => row[column])));
      }
      queued.push(new Mutation('insertOrUpdate', { table: 'kvcrud_cells', columns: [...CELL_COLUMNS], values }));
    } else if (first.kind === 'deleteRange') {
      const ranges = run.map((write) => (write as Extract<CellWrite, { kind: 'deleteRange' }>).range);
      queued.push(new Mutation('delete', { table: 'kvcrud_cells', keySet: await keySetOf(ranges, slices) }));
    } else {
      const keys: ListValue[] = [];
      const encoder = new ListEncoder();
      for (const write of run) {
        if (slices.dueAfterItem()) await slices.next();
        keys.push(encoder.encode((write as Extract<CellWrite, { kind: 'deleteKey' }>).key));
      }
      queued.push(new Mutation('delete', { table: 'kvcrud_cells', keySet: { keys } }));
    }
    encoder?.encode(queued.at(-1) as Mutation);
    await slices.pause();
    index = end;
  }
}
