import { createHash } from 'node:crypto';
import type { ReadSelection } from '../store/store.ts';

/** Tables and selections whose answers are remembered; past it, the one answered longest ago is forgotten. */
const MAX_ENTRIES = 1000;

/**
 * AnswerSizes estimates what an answer will hold before it reads (a batchGet's, or a get's), from
 * what the last answers with the same selection on the same table held per key: the answer budget
 * lets answers read together only while their estimates fit (answer-budget.ts), so eight answers
 * of 16 MiB read one after another and small ones at once. The figure per key rises at once to a
 * larger answer's and falls a quarter of the way to a smaller one's, so that one small answer does
 * not let several large ones read at once.
 *
 * A selection not seen yet on a table is estimated from every answer on that table, whatever it
 * selected, and a table with no answer yet from the answers on every table; with none at all, the
 * estimate is 0, unknown. So a narrow selection of a table of large rows is estimated large until
 * it has been read once (an answer that then reads alone, at worst).
 */
export class AnswerSizes {
  readonly #perKey = new Map<string, number>();
  #anyPerKey = 0;

  /** The bytes an answer of `keys` keys of `subject` is expected to hold; 0 when nothing is known. */
  estimate(subject: AnswerSubject, keys: number): number {
    const perKey = this.#perKey.get(subject.entry) ?? this.#perKey.get(subject.table) ?? this.#anyPerKey;
    return Math.ceil(keys * perKey);
  }

  /** Records that an answer of `keys` keys of `subject` held `bytes`. */
  observe(subject: AnswerSubject, keys: number, bytes: number): void {
    if (keys === 0) return;
    const perKey = bytes / keys;
    this.#follow(subject.entry, perKey);
    if (subject.entry !== subject.table) this.#follow(subject.table, perKey);
    this.#anyPerKey = this.#anyPerKey === 0 ? perKey : follow(this.#anyPerKey, perKey);
  }

  #follow(entry: string, perKey: number): void {
    const before = this.#perKey.get(entry);
    this.#perKey.delete(entry);
    this.#perKey.set(entry, before === undefined ? perKey : follow(before, perKey));
    if (this.#perKey.size > MAX_ENTRIES) this.#perKey.delete(this.#perKey.keys().next().value as string);
  }
}

/** What an answer reads: a selection on a table. */
export interface AnswerSubject {
  readonly table: string;
  /** The table's name for every column's latest version (the common read), else with a digest of the selection. */
  readonly entry: string;
}

/**
 * The subject of a read of `selection` on `table`. A selection is kept as a digest, since its
 * column names may run to megabytes. Table names hold no NUL.
 */
export function answerSubject(table: string, selection: ReadSelection): AnswerSubject {
  return { table, entry: entryOf(table, selection) };
}

function entryOf(table: string, selection: ReadSelection): string {
  if (selection.columns === undefined && selection.versions === 1) return table;
  const digest = createHash('sha256').update(String(selection.versions));
  for (const { family, column } of selection.columns ?? []) {
    digest.update(`\0${family}\0${column === undefined ? '*' : `=${column.toString('base64')}`}`);
  }
  return `${table}\0${digest.digest('base64')}`;
}

/** The next figure: `observed` if larger, else a quarter of the way down to it. */
function follow(current: number, observed: number): number {
  return observed >= current ? observed : current - (current - observed) / 4;
}
