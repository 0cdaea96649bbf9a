import { StoreError, notACounter } from '../../../src/store/errors.ts';
import type {
  Cell,
  Change,
  Condition,
  ConditionalMutations,
  FamilySpec,
  Micros,
  ModifyRule,
  Mutation,
  ReadSelection,
  Row,
  RowMutations,
  ScanRequest,
  StoreCapabilities,
  TableRef,
  TableSchema,
} from '../../../src/store/store.ts';

/** Versions of one column: timestamp → value. */
type Versions = Map<Micros, Buffer>;
/** A row: family → column (latin1, one character per byte) → versions. */
type ModelRow = Map<string, Map<string, Versions>>;

interface ModelTable {
  /** Effective policies by family name. */
  readonly families: Map<string, FamilySpec>;
  /** Rows by key (latin1, one character per byte, so that string order is byte order). */
  readonly rows: Map<string, ModelRow>;
  /** Every change, in commit order; a change's position is its index + 1. */
  readonly changes: Change[];
  deleted: boolean;
}

/** A table's change log, as a feed reads it: it outlives the table's deletion. */
export interface ChangeLog {
  readonly changes: readonly Change[];
  readonly deleted: boolean;
}

/**
 * ContractModel is the DataStore contract (src/store/store.ts) written as plainly as possible, in
 * memory and synchronously: the oracle of the model-based property test, which runs the same
 * random calls against a real store and against this model and requires the same answers.
 * It is never a stand-in for a store: nothing outside the driver conformance suite uses it.
 *
 * It keeps every version it is given and applies retention when reading, which is what every
 * store must look like from outside, whatever it removes physically and whenever.
 */
export class ContractModel {
  readonly capabilities: StoreCapabilities;
  readonly #now: () => number;
  readonly #tables = new Map<string, ModelTable>();

  readonly #granularityMicros: number;

  constructor(capabilities: StoreCapabilities, now: () => number = Date.now, granularityMicros = 1) {
    this.capabilities = capabilities;
    this.#now = now;
    this.#granularityMicros = granularityMicros;
  }

  createTable(ref: TableRef, families: readonly FamilySpec[]): void {
    if (this.#tables.has(tableId(ref))) throw new StoreError('ALREADY_EXISTS', `table ${ref.table} exists`, { resource: 'table', name: ref.table });
    const effective = new Map<string, FamilySpec>();
    for (const family of families) {
      effective.set(family.name, {
        name: family.name,
        // A store that keeps one version describes every family so.
        ...(this.capabilities.multipleVersions ? (family.maxVersions === undefined ? {} : { maxVersions: family.maxVersions }) : { maxVersions: 1 }),
        ...(family.maxAgeSeconds === undefined ? {} : { maxAgeSeconds: family.maxAgeSeconds }),
      });
    }
    this.#tables.set(tableId(ref), { families: effective, rows: new Map(), changes: [], deleted: false });
  }

  describeTable(ref: TableRef): TableSchema {
    const table = this.#table(ref);
    return { name: ref.table, families: [...table.families.values()].sort((x, y) => compareStrings(x.name, y.name)) };
  }

  listTables(instance: string): string[] {
    return [...this.#tables.keys()].filter((id) => id.startsWith(`${instance}/`)).map((id) => id.slice(instance.length + 1));
  }

  deleteTable(ref: TableRef): void {
    this.#table(ref).deleted = true;
    this.#tables.delete(tableId(ref));
  }

  /** The table's change log; NOT_FOUND for a missing table. */
  changeLog(ref: TableRef): ChangeLog {
    return this.#table(ref);
  }

  mutateRow(ref: TableRef, key: Buffer, mutations: readonly Mutation[]): void {
    this.#mutate(this.#table(ref), key, mutations);
  }

  mutateRows(ref: TableRef, entries: readonly RowMutations[]): Array<StoreError | undefined> {
    const table = this.#table(ref);
    return entries.map((entry) => {
      try {
        this.#mutate(table, entry.key, entry.mutations);
        return undefined;
      } catch (error) {
        if (error instanceof StoreError) return error;
        throw error;
      }
    });
  }

  readRows(ref: TableRef, keys: readonly Buffer[], selection: ReadSelection): Array<Row | null> {
    const table = this.#table(ref);
    const now = this.#nowMicros();
    return keys.map((key) => readRow(table, key.toString('latin1'), selection, now));
  }

  checkAndMutateRow(ref: TableRef, key: Buffer, check: ConditionalMutations): boolean {
    const table = this.#table(ref);
    const families = [...check.conditions.flatMap((condition) => (condition.type === 'rowExists' ? [] : [condition.family]))];
    for (const mutation of [...check.mutations, ...check.otherwise]) if (mutation.type !== 'deleteRow') families.push(mutation.family);
    const missing = families.find((family) => !table.families.has(family));
    if (missing !== undefined) throw familyNotFound(missing);
    const live = readRow(table, key.toString('latin1'), { versions: 1 }, this.#nowMicros());
    const matched = check.conditions.every((condition) => holds(condition, live?.cells ?? []));
    const mutations = matched ? check.mutations : check.otherwise;
    if (mutations.length > 0) this.#mutate(table, key, mutations);
    return matched;
  }

  readModifyWriteRow(ref: TableRef, key: Buffer, rules: readonly ModifyRule[]): Row {
    const table = this.#table(ref);
    const missing = rules.find((rule) => !table.families.has(rule.family));
    if (missing !== undefined) throw familyNotFound(missing.family);
    const now = this.#nowMicros();
    const live = readRow(table, key.toString('latin1'), { versions: 1 }, now)?.cells ?? [];
    // The columns as the rules leave them, by family and column, in rule order of first touch.
    const touched = new Map<string, Cell>();
    for (const rule of rules) {
      const id = `${rule.family}\0${rule.column.toString('latin1')}`;
      const before = touched.get(id) ?? live.find((cell) => cell.family === rule.family && cell.column.equals(rule.column));
      let value: Buffer;
      if (rule.type === 'append') {
        value = Buffer.concat([before?.value ?? Buffer.alloc(0), rule.value]);
      } else {
        if (before !== undefined && before.value.length !== 8) throw notACounter(rule.family, before.value.length);
        const sum = BigInt.asIntN(64, (before === undefined ? 0n : before.value.readBigInt64BE()) + rule.amount);
        value = Buffer.alloc(8);
        value.writeBigInt64BE(sum);
      }
      const granularity = BigInt(this.#granularityMicros);
      const clock = (now / granularity) * granularity;
      const timestampMicros = before !== undefined && before.timestampMicros > clock ? before.timestampMicros : clock;
      touched.set(id, { family: rule.family, column: Buffer.from(rule.column), value, timestampMicros });
    }
    const cells = [...touched.values()];
    this.#mutate(table, key, cells.map((cell) => ({ type: 'set', ...cell })));
    cells.sort((x, y) => compareStrings(x.family, y.family) || Buffer.compare(x.column, y.column));
    return { key: Buffer.from(key), cells };
  }

  /** Every row the scan yields, to its limit. */
  scanRows(ref: TableRef, scan: ScanRequest): Row[] {
    const table = this.#table(ref);
    const now = this.#nowMicros();
    const start = scan.range.start?.toString('latin1');
    const end = scan.range.end?.toString('latin1');
    const keys = [...table.rows.keys()].filter((key) => (start === undefined || key >= start) && (end === undefined || key < end)).sort(compareStrings);
    if (scan.reverse) keys.reverse();
    const rows: Row[] = [];
    for (const key of keys) {
      if (rows.length >= scan.limit) break;
      const row = readRow(table, key, scan, now);
      if (row !== null) rows.push(row);
    }
    return rows;
  }

  #table(ref: TableRef): ModelTable {
    const table = this.#tables.get(tableId(ref));
    if (table === undefined) throw new StoreError('NOT_FOUND', `no table ${ref.table}`, { resource: 'table', name: ref.table });
    return table;
  }

  #nowMicros(): Micros {
    return BigInt(this.#now()) * 1000n;
  }

  #mutate(table: ModelTable, key: Buffer, mutations: readonly Mutation[]): void {
    // Every family is checked before anything is written.
    for (const mutation of mutations) {
      if (mutation.type !== 'deleteRow' && !table.families.has(mutation.family)) throw familyNotFound(mutation.family);
    }
    const rowKey = key.toString('latin1');
    const row: ModelRow = table.rows.get(rowKey) ?? new Map();
    for (const mutation of mutations) {
      switch (mutation.type) {
        case 'set': {
          const columns = row.get(mutation.family) ?? new Map<string, Versions>();
          const versions = columns.get(mutation.column.toString('latin1')) ?? new Map<Micros, Buffer>();
          versions.set(mutation.timestampMicros, Buffer.from(mutation.value));
          columns.set(mutation.column.toString('latin1'), versions);
          row.set(mutation.family, columns);
          break;
        }
        case 'deleteColumn':
          row.get(mutation.family)?.delete(mutation.column.toString('latin1'));
          break;
        case 'deleteFamily':
          row.delete(mutation.family);
          break;
        case 'deleteRow':
          row.clear();
          break;
      }
    }
    table.rows.set(rowKey, row);
    table.changes.push({ key: Buffer.from(key), commitMicros: this.#nowMicros(), mutations: [...mutations] });
  }
}

/** The row as a read with `selection` sees it at `now`, or null when no cell is left. */
function readRow(table: ModelTable, key: string, selection: ReadSelection, now: Micros): Row | null {
  const row = table.rows.get(key);
  if (row === undefined) return null;
  const cells: Cell[] = [];
  for (const family of [...row.keys()].sort(compareStrings)) {
    const policy = table.families.get(family) ?? { name: family };
    const columns = row.get(family) ?? new Map<string, Versions>();
    for (const column of [...columns.keys()].sort(compareStrings)) {
      const columnBytes = Buffer.from(column, 'latin1');
      if (!selected(selection, family, columnBytes)) continue;
      const versions = [...(columns.get(column) ?? new Map<Micros, Buffer>()).entries()].sort(([x], [y]) => (x > y ? -1 : x < y ? 1 : 0));
      const kept = versions
        .slice(0, policy.maxVersions ?? versions.length)
        .filter(([timestamp]) => policy.maxAgeSeconds === undefined || now - timestamp <= BigInt(policy.maxAgeSeconds) * 1_000_000n)
        .slice(0, selection.versions);
      for (const [timestampMicros, value] of kept) cells.push({ family, column: columnBytes, value: Buffer.from(value), timestampMicros });
    }
  }
  return cells.length === 0 ? null : { key: Buffer.from(key, 'latin1'), cells };
}

function selected(selection: ReadSelection, family: string, column: Buffer): boolean {
  if (selection.columns === undefined) return true;
  return selection.columns.some((selector) => selector.family === family && (selector.column === undefined || selector.column.equals(column)));
}

/** Whether `condition` holds of a row whose latest live versions are `cells`. */
function holds(condition: Condition, cells: readonly Cell[]): boolean {
  switch (condition.type) {
    case 'rowExists':
      return cells.length > 0 === condition.exists;
    case 'familyExists':
      return cells.some((cell) => cell.family === condition.family) === condition.exists;
    case 'columnExists':
      return cells.some((cell) => cell.family === condition.family && cell.column.equals(condition.column)) === condition.exists;
    case 'columnEquals':
      return cells.some((cell) => cell.family === condition.family && cell.column.equals(condition.column) && cell.value.equals(condition.value));
  }
}

function familyNotFound(family: string): StoreError {
  return new StoreError('NOT_FOUND', `no family ${family}`, { resource: 'columnFamily', name: family });
}

function tableId(ref: TableRef): string {
  return `${ref.instance}/${ref.table}`;
}

/** Code-unit order; for latin1 strings and ASCII names that is unsigned byte order. */
function compareStrings(x: string, y: string): number {
  return x < y ? -1 : x > y ? 1 : 0;
}
