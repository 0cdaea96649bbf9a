import type { protos } from '@google-cloud/bigtable';
import type { Condition } from '../store.ts';
import { exactly, readFilter } from './read-filter.ts';
import type { Families } from './schema-cache.ts';

type RowFilter = protos.google.bigtable.v2.IRowFilter;

/** The predicate of one CheckAndMutateRow, and which branch its match selects. */
export interface Predicate {
  readonly filter: RowFilter;
  /**
   * True when a match means that a condition does not hold: the request's true_mutations are
   * then the caller's `otherwise`, and its false_mutations the caller's `mutations`.
   */
  readonly inverted: boolean;
}

/**
 * predicateOf compiles the conditions of a checkAndMutateRow (all must hold) into the single
 * predicate filter of one CheckAndMutateRow, which Bigtable evaluates atomically with the
 * mutations it then applies. A predicate "matches" when the filter yields at least one cell.
 *
 * 1. The filter first keeps the row's live cells only: the latest version of each column that
 *    its family's retention policy has not expired (readFilter with one version: a timestamp
 *    range from now - maxAgeSeconds, then a cells-per-column limit of 1). Bigtable's GC is lazy,
 *    so an expired version may still be stored; it must not satisfy exists or equals.
 * 2. On those cells, each condition is a filter that yields cells when the thing it asks about is
 *    there (a family regex, an exact column range, a column range then an exact value range);
 *    "absent" is the same filter used the other way round. Condition filters nest: the AND of
 *    c1..cn is condition(p1, then: AND(c2..cn), else: block) for a presence, and
 *    condition(p1, then: block, else: AND(c2..cn)) for an absence, ending in pass, which yields
 *    the live cells.
 * 3. A filter can yield nothing from a row with no live cell, so there the predicate never
 *    matches, whatever it is. When every condition is an absence (which all hold of an empty
 *    row), the filter is built for the opposite, "some condition fails" (the same nesting with
 *    pass and block swapped), and the branches are swapped: `inverted`.
 *
 * `rowExists` needs no filter of its own: on a row with live cells it is a constant.
 */
export function predicateOf(conditions: readonly Condition[], families: Families, nowMs: number): Predicate {
  const live = readFilter({ versions: 1 }, families, nowMs);
  const holdsOfEmptyRow = conditions.every((condition) => absence(condition));
  // On a row with live cells: rowExists(true) holds, rowExists(false) does not.
  const rowMustBeEmpty = conditions.some((condition) => condition.type === 'rowExists' && !condition.exists);
  const rest = conditions.filter((condition) => condition.type !== 'rowExists');
  if (!holdsOfEmptyRow) {
    // Match = every condition holds. (A row that must be empty but must also have a cell cannot
    // match: the row-must-be-empty case is then a filter that never yields.)
    return { filter: chain(live, rowMustBeEmpty ? BLOCK : allHold(rest)), inverted: false };
  }
  // Match = some condition fails, on a row with live cells. A row that must be empty fails as
  // soon as it has a live cell.
  return { filter: rowMustBeEmpty ? live : chain(live, someFails(rest)), inverted: true };
}

const PASS: RowFilter = { passAllFilter: true };
const BLOCK: RowFilter = { blockAllFilter: true };

function allHold(conditions: readonly Condition[]): RowFilter {
  let filter = PASS;
  for (const condition of [...conditions].reverse()) {
    const present = presenceFilter(condition);
    filter = absence(condition)
      ? { condition: { predicateFilter: present, trueFilter: BLOCK, falseFilter: filter } }
      : { condition: { predicateFilter: present, trueFilter: filter, falseFilter: BLOCK } };
  }
  return filter;
}

function someFails(conditions: readonly Condition[]): RowFilter {
  let filter = BLOCK;
  for (const condition of [...conditions].reverse()) {
    const present = presenceFilter(condition);
    filter = absence(condition)
      ? { condition: { predicateFilter: present, trueFilter: PASS, falseFilter: filter } }
      : { condition: { predicateFilter: present, trueFilter: filter, falseFilter: PASS } };
  }
  return filter;
}

/** Whether the condition asks for something to be missing. */
function absence(condition: Condition): boolean {
  return condition.type !== 'columnEquals' && !condition.exists;
}

/** A filter yielding cells, among the live ones, exactly when what the condition names is present. */
function presenceFilter(condition: Condition): RowFilter {
  switch (condition.type) {
    case 'rowExists':
      return PASS;
    case 'familyExists':
      return { familyNameRegexFilter: exactly(condition.family) };
    case 'columnExists':
      return columnOf(condition.family, condition.column);
    case 'columnEquals':
      // A value range with both ends closed at the value: an exact comparison of raw bytes, with
      // no escaping. A value_regex_filter would need every byte escaped, and bytes above 0x7f do
      // not mean the same on both sides: production Bigtable runs RE2 in Latin-1 mode, the
      // emulator Go's regexp, which reads pattern and value as UTF-8.
      return chain(columnOf(condition.family, condition.column), {
        valueRangeFilter: { startValueClosed: condition.value, endValueClosed: condition.value },
      });
  }
}

function columnOf(family: string, column: Buffer): RowFilter {
  return { columnRangeFilter: { familyName: family, startQualifierClosed: column, endQualifierClosed: column } };
}

function chain(...filters: RowFilter[]): RowFilter {
  return { chain: { filters } };
}
