/** Tables whose answers are remembered; past it, the one answered longest ago is forgotten. */
const MAX_TABLES = 1000;

/**
 * AnswerSizes estimates what a batchGet's answer will hold before it reads, from what the last
 * answers on the same table held per key: the answer budget lets answers read together only while
 * their estimates fit (answer-budget.ts), so eight answers of 16 MiB read one after another and
 * small ones at once. The figure per key rises at once to a larger answer's and falls a quarter
 * of the way to a smaller one's, so that one small answer does not let several large ones read at
 * once. A table with no answer yet is estimated from the answers on every table; with none at
 * all, the estimate is 0, unknown.
 */
export class AnswerSizes {
  readonly #perKey = new Map<string, number>();
  #anyPerKey = 0;

  /** The bytes an answer of `keys` keys on `table` is expected to hold; 0 when nothing is known. */
  estimate(table: string, keys: number): number {
    return Math.ceil(keys * (this.#perKey.get(table) ?? this.#anyPerKey));
  }

  /** Records that an answer of `keys` keys on `table` held `bytes`. */
  observe(table: string, keys: number, bytes: number): void {
    if (keys === 0) return;
    const perKey = bytes / keys;
    const before = this.#perKey.get(table);
    this.#perKey.delete(table);
    this.#perKey.set(table, before === undefined ? perKey : follow(before, perKey));
    if (this.#perKey.size > MAX_TABLES) this.#perKey.delete(this.#perKey.keys().next().value as string);
    this.#anyPerKey = this.#anyPerKey === 0 ? perKey : follow(this.#anyPerKey, perKey);
  }
}

/** The next figure: `observed` if larger, else a quarter of the way down to it. */
function follow(current: number, observed: number): number {
  return observed >= current ? observed : current - (current - observed) / 4;
}
