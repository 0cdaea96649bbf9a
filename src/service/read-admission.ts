import type { Row } from '../store/store.ts';
import { type AnswerHold, answersOverloaded } from './answer-budget.ts';
import { AnswerSizes, type AnswerSubject } from './answer-sizes.ts';
import { rowBytes } from './scan-pages.ts';

/**
 * Rows of at least this many bytes read one at a time (get, readCellData) are counted in the
 * answer budget. Below it a row is not worth waiting for: a small read is the common case, and
 * costs its caller nothing for it.
 */
const HELD_ROW_BYTES = 64 * 1024;

/** A store call that reads rows: one answer per key, null for a row with no selected cell. */
export type ReadRows = () => Promise<Array<Row | null>>;

/**
 * ReadAdmission admits reads into a request's answer budget (answer-budget.ts): before the store
 * is called, an answer waits for room for what it is expected to hold (answer-sizes.ts); once it
 * has read, for what it holds. Either wait may end in 503 OVERLOADED. One per RowService: it
 * remembers what answers held, to estimate the next.
 */
export class ReadAdmission {
  readonly #answerSizes = new AnswerSizes();
  /** The first read of a row since the service started, made when nothing was known of answers' sizes. */
  #firstRead: Promise<void> | undefined;

  /**
   * The row `read` reads for `key`, or null. A row of HELD_ROW_BYTES or more is counted in the
   * answer budget as a batchGet of one key is: where the table's rows are expected to be that
   * large, the read is admitted before it reads; a row found that large waits for room for itself
   * before it is rendered. Smaller rows are not counted, and never wait. Without an answer budget,
   * `read` is called at once.
   */
  async readRow(answer: AnswerHold | undefined, subject: AnswerSubject, key: Buffer, read: ReadRows): Promise<Row | null> {
    let estimate = this.#answerSizes.estimate(subject, 1);
    let first = false;
    if (estimate === 0 && answer !== undefined) {
      // Nothing known yet (the service just started): the first such read goes, and the others
      // wait for it, then go by what it read. Once it is done, failed or not, none waits again, so
      // a store that is down at start costs each read at most one other read's deadline.
      if (this.#firstRead === undefined) first = true;
      else {
        await this.#firstRead;
        estimate = this.#answerSizes.estimate(subject, 1);
      }
    }
    const admitted = answer !== undefined && estimate >= HELD_ROW_BYTES;
    if (admitted) await this.#admit(answer, subject, 1, estimate);
    const reading = read();
    if (first) this.#firstRead = reading.then(ignore, ignore);
    const [row] = await reading;
    const bytes = row == null ? key.length : rowBytes(row);
    this.#answerSizes.observe(subject, 1, bytes);
    if (answer !== undefined && (admitted || bytes >= HELD_ROW_BYTES) && !(await answer.settle(bytes))) throw answersOverloaded();
    return row ?? null;
  }

  /**
   * What `read` reads for `keys`, one answer per key. The answer cannot end early: it is admitted
   * for what it is expected to hold before it reads, and waits for room for all it read before it
   * is rendered, or is refused with 503 OVERLOADED. Without an answer budget, `read` is called at once.
   */
  async readRows(answer: AnswerHold | undefined, subject: AnswerSubject, keys: readonly Buffer[], read: ReadRows): Promise<Array<Row | null>> {
    if (answer !== undefined) await this.#admit(answer, subject, keys.length, this.#answerSizes.estimate(subject, keys.length));
    const rows = await read();
    const bytes = rows.reduce((sum, row, index) => sum + (row === null ? (keys[index]?.length ?? 0) : rowBytes(row)), 0);
    this.#answerSizes.observe(subject, keys.length, bytes);
    if (answer !== undefined && !(await answer.settle(bytes))) throw answersOverloaded();
    return rows;
  }

  /**
   * Waits until an answer of `keys` keys expected to hold `estimate` bytes is admitted to read, or
   * refuses it with 503 OVERLOADED. An answer with no estimate reads alone; admitted, it looks
   * again, since those queued behind the first answer since the service started had none either:
   * if the answers read since tell its size, it gives back its place to read alone and waits, if
   * need be, for room for that.
   */
  async #admit(answer: AnswerHold, subject: AnswerSubject, keys: number, estimate: number): Promise<void> {
    if (!(await answer.admit(estimate))) throw answersOverloaded();
    if (estimate > 0) return;
    const known = this.#answerSizes.estimate(subject, keys);
    if (known > 0 && !(await answer.reestimate(known))) throw answersOverloaded();
  }
}

function ignore(): void {}
