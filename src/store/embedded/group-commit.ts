import type { DatabaseSync } from 'node:sqlite';

interface Pending {
  readonly run: () => unknown;
  readonly resolve: (value: unknown) => void;
  readonly reject: (error: unknown) => void;
}

/**
 * GroupCommit runs the write operations queued during one turn of the event loop in a single
 * SQLite transaction, so that concurrent writers share one fsync instead of paying one each.
 * Each operation runs inside its own savepoint: one that throws is rolled back alone and its
 * caller gets its error, while the others commit. No promise settles before the COMMIT that made
 * its operation durable; if the COMMIT itself fails, every operation of the batch fails with it.
 */
export class GroupCommit {
  readonly #db: DatabaseSync;
  readonly #mapError: (error: unknown) => unknown;
  readonly #afterRollback: () => void;
  #queue: Pending[] = [];
  #scheduled = false;

  /**
   * @param mapError turns a failed COMMIT into the error the callers see.
   * @param afterRollback lets the owner drop state derived from the rolled-back operations.
   */
  constructor(db: DatabaseSync, mapError: (error: unknown) => unknown, afterRollback: () => void) {
    this.#db = db;
    this.#mapError = mapError;
    this.#afterRollback = afterRollback;
  }

  /** enqueue schedules `run` for the next commit and settles once that commit is durable. */
  enqueue<T>(run: () => T): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.#queue.push({ run, resolve: resolve as (value: unknown) => void, reject });
      if (!this.#scheduled) {
        this.#scheduled = true;
        setImmediate(() => this.flush());
      }
    });
  }

  /** flush commits everything queued now. Synchronous, so close() can drain the queue. */
  flush(): void {
    this.#scheduled = false;
    const batch = this.#queue;
    this.#queue = [];
    if (batch.length === 0) return;

    const outcomes: Array<{ ok: true; value: unknown } | { ok: false; error: unknown }> = [];
    try {
      this.#db.exec('BEGIN IMMEDIATE');
      for (const op of batch) {
        this.#db.exec('SAVEPOINT op');
        try {
          outcomes.push({ ok: true, value: op.run() });
          this.#db.exec('RELEASE op');
        } catch (error) {
          this.#db.exec('ROLLBACK TO op');
          this.#db.exec('RELEASE op');
          outcomes.push({ ok: false, error });
        }
      }
      this.#db.exec('COMMIT');
    } catch (error) {
      if (this.#db.isTransaction) this.#db.exec('ROLLBACK');
      this.#afterRollback();
      const failure = this.#mapError(error);
      for (const op of batch) op.reject(failure);
      return;
    }
    batch.forEach((op, index) => {
      const outcome = outcomes[index];
      if (outcome?.ok === true) op.resolve(outcome.value);
      else op.reject(outcome?.error);
    });
  }
}
