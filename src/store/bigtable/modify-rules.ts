import type { protos } from '@google-cloud/bigtable';
import { status as GrpcStatus } from '@grpc/grpc-js';
import { notACounter } from '../errors.ts';
import type { Cell, ModifyRule, ReadSelection, Row } from '../store.ts';
import { grpcCode } from './grpc-errors.ts';
import type { Families } from './schema-cache.ts';

type ProtoRule = protos.google.bigtable.v2.IReadModifyWriteRule;
type ProtoMutation = protos.google.bigtable.v2.IMutation;
type ProtoRow = protos.google.bigtable.v2.IRow;

/** toProtoRule maps one contract rule onto Bigtable's ReadModifyWriteRule, which has the same two kinds. */
export function toProtoRule(rule: ModifyRule): ProtoRule {
  return rule.type === 'increment'
    ? // int64 as a decimal string: exact beyond 2^53, and protobufjs takes it as is.
      { familyName: rule.family, columnQualifier: rule.column, incrementAmount: rule.amount.toString() }
    : { familyName: rule.family, columnQualifier: rule.column, appendValue: rule.value };
}

/**
 * expiredVersionsDeletions are the mutations that remove, from each column the rules touch in a
 * family with maxAgeSeconds, the versions older than the family's age limit. ReadModifyWriteRow
 * works on the latest *stored* version, and Bigtable's GC is lazy (hours, possibly days), so an
 * expired latest version would otherwise be incremented or appended to, where the contract counts
 * from nothing. The versions removed are expired, which no read ever returns (read-filter.ts):
 * removing them changes nothing anyone can see. The cutoff is now - maxAgeSeconds, rounded up to
 * the millisecond as reads round it (tables keep millisecond timestamps).
 */
export function expiredVersionsDeletions(rules: readonly ModifyRule[], families: Families, nowMs: number): ProtoMutation[] {
  const seen = new Set<string>();
  const deletions: ProtoMutation[] = [];
  for (const rule of rules) {
    const maxAgeSeconds = families.get(rule.family)?.maxAgeSeconds;
    if (maxAgeSeconds === undefined) continue;
    const id = `${rule.family}\0${rule.column.toString('latin1')}`;
    if (seen.has(id)) continue;
    seen.add(id);
    const cutoff = Math.ceil(nowMs - maxAgeSeconds * 1000) * 1000;
    if (cutoff <= 0) continue;
    deletions.push({
      deleteFromColumn: { familyName: rule.family, columnQualifier: rule.column, timeRange: { startTimestampMicros: '0', endTimestampMicros: String(cutoff) } },
    });
  }
  return deletions;
}

/** The columns the rules touch, for a read of their latest live versions (see firstNonCounter). */
export function touchedColumns(rules: readonly ModifyRule[]): ReadSelection {
  return { versions: 1, columns: rules.map((rule) => ({ family: rule.family, column: rule.column })) };
}

/**
 * firstNonCounter is the error an increment in `rules` would fail with, given the latest live
 * versions of the columns they touch (`cells`), following the rules in order: an append makes a
 * value longer, an increment leaves (or makes) 8 bytes. Undefined when every increment would find
 * a counter or nothing.
 */
export function firstNonCounter(rules: readonly ModifyRule[], cells: readonly Cell[]): Error | undefined {
  const lengths = new Map<string, number>();
  for (const cell of cells) lengths.set(`${cell.family}\0${cell.column.toString('latin1')}`, cell.value.length);
  for (const rule of rules) {
    const id = `${rule.family}\0${rule.column.toString('latin1')}`;
    const length = lengths.get(id);
    if (rule.type === 'append') lengths.set(id, (length ?? 0) + rule.value.length);
    else if (length !== undefined && length !== 8) return notACounter(rule.family, length);
    else lengths.set(id, 8);
  }
  return undefined;
}

/**
 * Whether the backend refused an increment because the value is not a 64-bit integer. Production
 * Bigtable answers FAILED_PRECONDITION "Cannot increment value '1' (family=…, qualifier=…). The
 * increment operation can only be performed on 64-bit values", the only precondition a
 * ReadModifyWriteRow has; the emulator (gcloud 528) answers UNKNOWN "increment on non-64-bit
 * value", where only the text tells it from other failures.
 */
export function isNotACounterError(error: unknown): boolean {
  const code = grpcCode(error);
  if (code === GrpcStatus.FAILED_PRECONDITION) return true;
  return code === GrpcStatus.UNKNOWN && /64-bit/i.test(error instanceof Error ? error.message : String(error));
}

/**
 * The row ReadModifyWriteRow answered: the new latest version of each column touched, one cell per
 * column, ordered by family name, then column bytes.
 */
export function modifiedRow(key: Buffer, row: ProtoRow | null | undefined): Row {
  const cells: Cell[] = [];
  for (const family of row?.families ?? []) {
    for (const column of family.columns ?? []) {
      // Newest first, as Bigtable orders a column's cells; one per column is what the rules wrote.
      const cell = column.cells?.[0];
      if (cell === undefined) continue;
      cells.push({
        family: family.name ?? '',
        column: Buffer.from(column.qualifier ?? new Uint8Array(0)),
        value: Buffer.from(cell.value ?? new Uint8Array(0)),
        timestampMicros: BigInt(String(cell.timestampMicros ?? 0)),
      });
    }
  }
  cells.sort((x, y) => (x.family < y.family ? -1 : x.family > y.family ? 1 : Buffer.compare(x.column, y.column)));
  return { key: Buffer.from(key), cells };
}

/** The families a checkAndMutateRow names, in the order their absence is reported: conditions, then mutations, then otherwise. */
export function familiesNamed(...lists: ReadonlyArray<ReadonlyArray<{ readonly type: string; readonly family?: string }>>): string[] {
  return lists.flatMap((list) => list.flatMap((item) => (item.family === undefined ? [] : [item.family])));
}
