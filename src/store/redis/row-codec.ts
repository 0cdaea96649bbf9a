import type { Cell, ColumnSelector, Condition, ModifyRule, Mutation, Row } from '../store.ts';
import { sortInSlices } from '../../lib/sort-in-slices.ts';
import type { Turns } from '../../lib/turns.ts';

const COLON = 0x3a;

/**
 * The struct.unpack format of one mutation in the mutateRow script's packed argument: op ("s",
 * "c", "f" or "r"), then family, column, timestamp and value, each preceded by its length (big
 * endian) and empty where a mutation has no such part.
 */
export const PACKED_MUTATION = '>c1 I2c0 I4c0 I1c0 I4c0';
/** The bytes of PACKED_MUTATION's fixed part: the op and the four lengths. */
const PACKED_HEAD = 1 + 2 + 4 + 1 + 4;

/**
 * The mutateRow script's last argument: every mutation packed in one string (PACKED_MUTATION).
 * One argument rather than five per mutation: a row of 100,000 cells would otherwise be half a
 * million tiny RESP strings for the client to encode and write. Many mutations are packed a
 * slice at a time, paced by `turns`.
 */
export async function packMutations(mutations: readonly Mutation[], turns: Turns): Promise<Buffer> {
  const families = new Map<string, Buffer>();
  // The cells of one write share their timestamp: format each distinct one once.
  let lastMicros: bigint | undefined;
  let lastTimestamp = NONE;
  const family = (mutation: Mutation) => {
    if (mutation.type === 'deleteRow') return NONE;
    let bytes = families.get(mutation.family);
    if (bytes === undefined) families.set(mutation.family, (bytes = Buffer.from(mutation.family)));
    return bytes;
  };
  const column = (mutation: Mutation) => (mutation.type === 'set' || mutation.type === 'deleteColumn' ? mutation.column : NONE);
  const timestamp = (mutation: Mutation) => {
    if (mutation.type !== 'set') return NONE;
    if (mutation.timestampMicros !== lastMicros) {
      lastMicros = mutation.timestampMicros;
      lastTimestamp = Buffer.from(lastMicros.toString(), 'latin1');
    }
    return lastTimestamp;
  };
  const value = (mutation: Mutation) => (mutation.type === 'set' ? mutation.value : NONE);

  // A batch's entries share `turns`: a yield may be due before this row's first mutation.
  if (turns.due()) await turns.next();
  let size = 0;
  for (const [index, mutation] of mutations.entries()) {
    if ((index & 1023) === 1023 && turns.due()) await turns.next();
    size += PACKED_HEAD + family(mutation).length + column(mutation).length + timestamp(mutation).length + value(mutation).length;
  }
  const packed = Buffer.allocUnsafe(size);
  let at = 0;
  const put = (bytes: Buffer, lengthBytes: number) => {
    packed.writeUIntBE(bytes.length, at, lengthBytes);
    packed.set(bytes, at + lengthBytes);
    at += lengthBytes + bytes.length;
  };
  for (const [index, mutation] of mutations.entries()) {
    if ((index & 1023) === 1023 && turns.due()) await turns.next();
    packed[at++] = OPS[mutation.type];
    put(family(mutation), 2);
    put(column(mutation), 4);
    put(timestamp(mutation), 1);
    put(value(mutation), 4);
  }
  return packed;
}

const NONE = Buffer.alloc(0);
/** The op letters of PACKED_MUTATION: s, c, f, r. */
const OPS = { set: 0x73, deleteColumn: 0x63, deleteFamily: 0x66, deleteRow: 0x72 } as const;

/**
 * unpackMutations reads back what packMutations packed (a change stream entry's "mutations");
 * undefined when `packed` is not in that format.
 */
export function unpackMutations(packed: Buffer): Mutation[] | undefined {
  const mutations: Mutation[] = [];
  let at = 0;
  const take = (lengthBytes: number): Buffer | undefined => {
    if (at + lengthBytes > packed.length) return undefined;
    const length = packed.readUIntBE(at, lengthBytes);
    at += lengthBytes;
    if (at + length > packed.length) return undefined;
    const bytes = packed.subarray(at, at + length);
    at += length;
    return bytes;
  };
  while (at < packed.length) {
    const op = packed[at++];
    const family = take(2);
    const column = take(4);
    const timestamp = take(1);
    const value = take(4);
    if (family === undefined || column === undefined || timestamp === undefined || value === undefined) return undefined;
    if (op === OPS.set) {
      if (!/^-?[0-9]{1,19}$/.test(timestamp.toString('latin1'))) return undefined;
      mutations.push({ type: 'set', family: family.toString('latin1'), column, value, timestampMicros: BigInt(timestamp.toString('latin1')) });
    } else if (op === OPS.deleteColumn) mutations.push({ type: 'deleteColumn', family: family.toString('latin1'), column });
    else if (op === OPS.deleteFamily) mutations.push({ type: 'deleteFamily', family: family.toString('latin1') });
    else if (op === OPS.deleteRow) mutations.push({ type: 'deleteRow' });
    else return undefined;
  }
  return mutations;
}

/**
 * The struct.unpack format of one condition in the checkAndMutateRow script's packed argument:
 * op ("r" rowExists, "f" familyExists, "c" columnExists, "e" columnEquals), "1" or "0" for
 * `exists` ("1" for columnEquals), then family, column and value, each preceded by its length
 * (big endian) and empty where a condition has no such part.
 */
export const PACKED_CONDITION = '>c1 c1 I2c0 I4c0 I4c0';

/** The checkAndMutateRow script's conditions argument (PACKED_CONDITION). */
export function packConditions(conditions: readonly Condition[]): Buffer {
  return Buffer.concat(
    conditions.map((condition) => {
      const family = condition.type === 'rowExists' ? NONE : Buffer.from(condition.family);
      const column = condition.type === 'columnExists' || condition.type === 'columnEquals' ? condition.column : NONE;
      const value = condition.type === 'columnEquals' ? condition.value : NONE;
      const exists = condition.type === 'columnEquals' || condition.exists;
      return packParts([Buffer.from([CONDITION_OPS[condition.type], exists ? 0x31 : 0x30])], [family, 2], [column, 4], [value, 4]);
    }),
  );
}

/** The op letters of PACKED_CONDITION: r, f, c, e. */
const CONDITION_OPS = { rowExists: 0x72, familyExists: 0x66, columnExists: 0x63, columnEquals: 0x65 } as const;

/**
 * The struct.unpack format of one rule in the readModifyWriteRow script's packed argument: op
 * ("i" increment, "a" append), then family, column and operand, each preceded by its length (big
 * endian). The operand of an increment is its amount as 8 bytes, two's complement, big endian:
 * the script adds it to the counter's bytes.
 */
export const PACKED_RULE = '>c1 I2c0 I4c0 I4c0';

/** The readModifyWriteRow script's rules argument (PACKED_RULE). */
export function packRules(rules: readonly ModifyRule[]): Buffer {
  return Buffer.concat(
    rules.map((rule) => {
      let operand: Buffer;
      if (rule.type === 'append') {
        operand = rule.value;
      } else {
        operand = Buffer.alloc(8);
        operand.writeBigInt64BE(BigInt.asIntN(64, rule.amount));
      }
      return packParts([Buffer.from([rule.type === 'increment' ? 0x69 : 0x61])], [Buffer.from(rule.family), 2], [rule.column, 4], [operand, 4]);
    }),
  );
}

/** A fixed head, then each part preceded by its length in the given number of bytes (big endian). */
function packParts(head: readonly Buffer[], ...parts: ReadonlyArray<readonly [Buffer, number]>): Buffer {
  const pieces = [...head];
  for (const [bytes, lengthBytes] of parts) {
    const length = Buffer.alloc(lengthBytes);
    length.writeUIntBE(bytes.length, 0, lengthBytes);
    pieces.push(length, bytes);
  }
  return Buffer.concat(pieces);
}

/** A family of the table as decodeRow needs it. */
export interface FamilyOrder {
  readonly name: string;
  /** Past this age, in microseconds, a cell is not read (0n: no maxAge). */
  readonly maxAgeMicros: bigint;
  /** The family's place among the table's families in name order: cells are sorted by it first. */
  readonly rank: number;
}

/** The table's families by name. */
export type TableFamilies = ReadonlyMap<string, FamilyOrder>;

/** The families of a table record, each with its rank in name order. */
export function tableFamilies(families: ReadonlyArray<{ readonly name: string; readonly maxAgeSeconds?: number }>): TableFamilies {
  const names = families.map((family) => family.name).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  return new Map(families.map((family) => [family.name, { name: family.name, maxAgeMicros: BigInt(family.maxAgeSeconds ?? 0) * 1_000_000n, rank: names.indexOf(family.name) }]));
}

/** A cell and what it is sorted by: its family's rank, then its column's bytes as latin1 text (which orders as the bytes do). */
interface SortableCell {
  readonly cell: Cell;
  readonly rank: number;
  readonly column: string;
}

/**
 * decodeRow turns a row hash (HGETALL's flat field, value, field, value… reply) into a Row with
 * the cells `columns` selects (all when absent), leaving out cells past their family's maxAge at
 * `nowMicros`; null when no cell is left. Cells are ordered by family, then column bytes. A large
 * row is decoded and sorted a slice at a time, paced by `turns`.
 */
export async function decodeRow(
  key: Buffer,
  flat: readonly Buffer[],
  columns: readonly ColumnSelector[] | undefined,
  families: TableFamilies,
  nowMicros: bigint,
  turns: Turns,
): Promise<Row | null> {
  // A reply's rows share `turns`: a yield may be due before this row's first cell.
  if (turns.due()) await turns.next();
  const cells: SortableCell[] = [];
  // The cells of one write share their timestamp: parse each distinct one once.
  let lastTimestamp = '';
  let lastMicros = 0n;
  for (let i = 0; i + 1 < flat.length; i += 2) {
    if ((i & 511) === 510 && turns.due()) await turns.next();
    const field = flat[i] as Buffer;
    const stored = flat[i + 1] as Buffer;
    const familyEnd = field.indexOf(COLON);
    const timestampEnd = stored.indexOf(COLON);
    if (familyEnd < 0 || timestampEnd < 0) continue; // not a cell of this layout
    const family = field.toString('latin1', 0, familyEnd);
    const column = field.subarray(familyEnd + 1);
    if (columns !== undefined && !columns.some((selector) => selects(selector, family, column))) continue;
    const order = families.get(family);
    if (order === undefined) continue; // a family the table does not have: never written by this store
    const timestamp = stored.toString('latin1', 0, timestampEnd);
    if (timestamp !== lastTimestamp) {
      lastTimestamp = timestamp;
      lastMicros = BigInt(timestamp);
    }
    if (order.maxAgeMicros > 0n && lastMicros < nowMicros - order.maxAgeMicros) continue;
    // The family's own name: one string for all its cells rather than one per cell.
    const cell = { family: order.name, column, value: stored.subarray(timestampEnd + 1), timestampMicros: lastMicros };
    cells.push({ cell, rank: order.rank, column: field.toString('latin1', familyEnd + 1) });
  }
  if (cells.length === 0) return null;
  const sorted = await sortInSlices(cells, compareCells, turns);
  return { key, cells: sorted.map((sortable) => sortable.cell) };
}

function selects(selector: ColumnSelector, family: string, column: Buffer): boolean {
  return selector.family === family && (selector.column === undefined || selector.column.equals(column));
}

// Fields are unique in a hash, so no two cells compare equal.
function compareCells(a: SortableCell, b: SortableCell): number {
  if (a.rank !== b.rank) return a.rank - b.rank;
  return a.column < b.column ? -1 : 1;
}
