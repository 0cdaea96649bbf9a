import { notACounter } from '../errors.ts';
import type { Cell, Condition, ConditionalMutations, FamilyPolicy, Micros, ModifyRule } from '../store.ts';
import { type CellRange, type ColumnRef, columnHash, columnId } from './row-writes.ts';

/**
 * What checkAndMutateRow and readModifyWriteRow decide, from what they read of one row in their
 * read-write transaction: the families they name, the key ranges of kvcrud_cells a condition
 * needs, which columns are live, whether the conditions hold, and the cells the rules write.
 * The reads and the writes themselves are the store's (spanner-store.ts).
 */

/** The families a check names, in the order their absence is reported: conditions, then mutations, then `otherwise`. */
export function checkFamilies(check: ConditionalMutations): string[] {
  const families: string[] = [];
  for (const condition of check.conditions) if (condition.type !== 'rowExists') families.push(condition.family);
  for (const mutation of [...check.mutations, ...check.otherwise]) if (mutation.type !== 'deleteRow') families.push(mutation.family);
  return families;
}

/** A column named by a condition or a rule, with the key part it is stored under. */
export interface NamedColumn {
  readonly family: string;
  readonly column: Buffer;
  readonly hash: Buffer;
}

/** A column of the row at hand, as a map key: its family and its hash in hex (no family name holds a NUL). */
export function columnKey(family: string, hash: Buffer): string {
  return `${family}\0${hash.toString('hex')}`;
}

/**
 * The key ranges of the row's cells that decide the conditions, none inside another (Spanner reads
 * a row once per range it is in): the whole row when a condition is on the row, else each family a
 * condition is on, and each column of another family a condition is on.
 */
export function conditionRanges(tableId: string, key: Buffer, conditions: readonly Condition[]): CellRange[] {
  if (conditions.some((condition) => condition.type === 'rowExists')) return [{ startClosed: [tableId, key], endClosed: [tableId, key] }];
  const families = new Set(conditions.flatMap((condition) => (condition.type === 'familyExists' ? [condition.family] : [])));
  const ranges = new Map<string, CellRange>();
  for (const family of families) ranges.set(family, { startClosed: [tableId, key, family], endClosed: [tableId, key, family] });
  for (const condition of conditions) {
    if (condition.type !== 'columnExists' && condition.type !== 'columnEquals') continue;
    if (families.has(condition.family)) continue;
    const hash = columnHash(condition.column);
    const prefix = [tableId, key, condition.family, hash];
    ranges.set(columnKey(condition.family, hash), { startClosed: prefix, endClosed: prefix });
  }
  return [...ranges.values()];
}

/**
 * How many cells of the condition ranges decide the conditions: 1 when they are all on whether the
 * row has a cell, or all on whether one same family has one, and no family that covers expires
 * versions by age (then any cell is a live one: a column's newest version is always kept); else
 * all of them (0, no limit). So a create-if-absent check reads one cell of a row, however wide.
 * (A mix is read whole: the first cell of a row says nothing of another family.)
 */
export function conditionReadLimit(conditions: readonly Condition[], policies: ReadonlyMap<string, FamilyPolicy>): number {
  let covered: string[];
  if (conditions.every((condition) => condition.type === 'rowExists')) {
    covered = [...policies.keys()];
  } else {
    const families = new Set(conditions.map((condition) => (condition.type === 'familyExists' ? condition.family : undefined)));
    const [family] = families;
    if (families.size !== 1 || family === undefined) return 0;
    covered = [family];
  }
  return covered.every((family) => policies.get(family)?.maxAgeSeconds === undefined) ? 1 : 0;
}

/** A stored version as a read of (family, col_hash, ts) returns it, in key order. */
export interface StoredVersion {
  readonly family: string;
  readonly col_hash: Buffer;
  readonly ts: { readonly value: string };
}

/** A live column: its family, and the timestamp of its latest version. */
export interface LiveColumn {
  readonly family: string;
  readonly timestampMicros: Micros;
}

/**
 * The live columns among these versions (in kvcrud_cells' key order: each column's newest first):
 * each column's newest version, by columnKey, when the family's policy has not expired it by
 * age. A column's newest version is never expired by maxVersions (at least 1 is kept), and when
 * it is expired by age every older one is too: so a column is live exactly when its newest
 * version is within maxAgeSeconds of now, as reads decide (row-reads.ts).
 */
export function liveColumns(versions: readonly StoredVersion[], policies: ReadonlyMap<string, FamilyPolicy>, nowMicros: Micros): Map<string, LiveColumn> {
  const seen = new Set<string>();
  const live = new Map<string, LiveColumn>();
  for (const version of versions) {
    const id = columnKey(version.family, version.col_hash);
    if (seen.has(id)) continue;
    seen.add(id);
    const policy = policies.get(version.family);
    if (policy === undefined) continue;
    const timestamp = BigInt(version.ts.value);
    if (isLive(policy, timestamp, nowMicros)) live.set(id, { family: version.family, timestampMicros: timestamp });
  }
  return live;
}

/** Whether a column's newest version, at `timestamp`, is live under `policy` (see liveColumns). */
export function isLive(policy: FamilyPolicy, timestamp: Micros, nowMicros: Micros): boolean {
  return policy.maxAgeSeconds === undefined || nowMicros - timestamp <= BigInt(policy.maxAgeSeconds) * 1_000_000n;
}

/** The columns whose latest value a condition compares, live in `live`: their values are read next. */
export function columnsToCompare(conditions: readonly Condition[], live: ReadonlyMap<string, LiveColumn>): Array<NamedColumn & { readonly timestampMicros: Micros }> {
  const columns = new Map<string, NamedColumn & { readonly timestampMicros: Micros }>();
  for (const condition of conditions) {
    if (condition.type !== 'columnEquals') continue;
    const hash = columnHash(condition.column);
    const id = columnKey(condition.family, hash);
    const timestampMicros = live.get(id)?.timestampMicros;
    if (timestampMicros !== undefined) columns.set(id, { family: condition.family, column: condition.column, hash, timestampMicros });
  }
  return [...columns.values()];
}

/**
 * Whether every condition holds of the row whose live columns are `live` and whose compared
 * columns' latest values are `values` (both by columnKey).
 */
export function conditionsHold(conditions: readonly Condition[], live: ReadonlyMap<string, LiveColumn>, values: ReadonlyMap<string, Buffer>): boolean {
  return conditions.every((condition) => {
    switch (condition.type) {
      case 'rowExists':
        return live.size > 0 === condition.exists;
      case 'familyExists':
        return [...live.values()].some((column) => column.family === condition.family) === condition.exists;
      case 'columnExists':
        return live.has(columnKey(condition.family, columnHash(condition.column))) === condition.exists;
      case 'columnEquals':
        return values.get(columnKey(condition.family, columnHash(condition.column)))?.equals(condition.value) === true;
    }
  });
}

/** The distinct columns the rules touch, in rule order, as the row `key`'s ColumnRefs. */
export function ruleColumns(key: Buffer, rules: readonly ModifyRule[]): Array<ColumnRef & NamedColumn> {
  const columns = new Map<string, ColumnRef & NamedColumn>();
  for (const rule of rules) {
    const hash = columnHash(rule.column);
    const id = columnId(key, rule.family, hash);
    if (!columns.has(id)) columns.set(id, { key, family: rule.family, column: rule.column, hash });
  }
  return [...columns.values()];
}

/**
 * The new latest version of each column the rules touch, each rule applied to what the earlier
 * ones left (or to the column's latest live version, in `latest` by columnKey, the first
 * time), ordered as a Row's cells. The timestamp of each is the clock, or the replaced version's
 * when that is later. An increment of a value that is not 8 bytes throws NOT_A_COUNTER: nothing
 * has been written then.
 */
export function applyRules(rules: readonly ModifyRule[], latest: ReadonlyMap<string, Cell>, nowMicros: Micros): Cell[] {
  const touched = new Map<string, Cell>();
  for (const rule of rules) {
    const id = columnKey(rule.family, columnHash(rule.column));
    const before = touched.get(id) ?? latest.get(id);
    let value: Buffer;
    if (rule.type === 'append') {
      value = before === undefined ? Buffer.from(rule.value) : Buffer.concat([before.value, rule.value]);
    } else {
      if (before !== undefined && before.value.length !== 8) throw notACounter(rule.family, before.value.length);
      value = Buffer.alloc(8);
      // Two's complement, wrapping on overflow as Bigtable does.
      value.writeBigInt64BE(BigInt.asIntN(64, (before === undefined ? 0n : before.value.readBigInt64BE()) + rule.amount));
    }
    const timestampMicros = before !== undefined && before.timestampMicros > nowMicros ? before.timestampMicros : nowMicros;
    touched.set(id, { family: rule.family, column: rule.column, value, timestampMicros });
  }
  return [...touched.values()].sort((x, y) => (x.family < y.family ? -1 : x.family > y.family ? 1 : Buffer.compare(x.column, y.column)));
}
