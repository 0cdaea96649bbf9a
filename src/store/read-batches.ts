import { type StoreError, callerGone } from './errors.ts';
import type { CallOptions, Row, StoreLimits } from './store.ts';

/** The bytes of row keys one coalesced read names at most. */
const COALESCED_KEY_BYTES = 1024 * 1024;

/**
 * How a ReadBatches reads: one key on its own, or several keys with one filter in one backend call.
 * `Table` names the table as the driver does (a Bigtable table name, a TableRef); `Filter` is the
 * driver's form of the selection.
 */
export interface ReadSender<Table, Filter> {
  /** The key read on its own, with its own retries; rejects as readRows would. */
  single(table: Table, key: Buffer, filter: Filter, options: CallOptions): Promise<Row | null>;
  /**
   * Reads `keys`, asking only for the keys `keys()` names when asked (those whose callers wait and
   * whose row has not come: a driver that retries asks again), telling `onRow` of each row as it
   * comes; rejects, as each caller's own read would, when the reads fail for good.
   */
  batch(table: Table, keys: () => Buffer[], filter: Filter, options: CallOptions, onRow: (row: Row) => void): Promise<void>;
  /** Called with each call's size as it goes out (1 for a key read alone). */
  sent?(size: number): void;
}

interface Pending<Table, Filter> {
  readonly table: Table;
  readonly group: string;
  readonly key: Buffer;
  readonly filter: Filter;
  readonly options: CallOptions;
  readonly resolve: (row: Row | null) => void;
  readonly reject: (error: Error) => void;
  readonly isSettled: () => boolean;
}

/**
 * ReadBatches gathers the single-key reads made in one turn of the event loop and reads those of
 * the same table and filter in one backend call over their keys, sent in the same loop iteration's
 * check phase (setImmediate). Each caller's promise settles as its row streams in, or with null
 * once the call has ended without it; a caller whose deadline passes, or who goes, is answered at
 * once and its key is not asked for again. A batch is bounded by entriesPerBatch keys and by
 * COALESCED_KEY_BYTES of keys.
 */
export class ReadBatches<Table, Filter> {
  readonly #limits: StoreLimits;
  readonly #sender: ReadSender<Table, Filter>;
  readonly #deadlineExceeded: () => StoreError;
  #pending: Array<Pending<Table, Filter>> = [];

  /** `deadlineExceeded`: the error of a caller whose deadline passes, as the driver's own read would fail. */
  constructor(limits: StoreLimits, sender: ReadSender<Table, Filter>, deadlineExceeded: () => StoreError) {
    this.#limits = limits;
    this.#sender = sender;
    this.#deadlineExceeded = deadlineExceeded;
  }

  /** Reads one row; `group` is the same for reads that may share a call, and only for them (same table and filter). */
  read(table: Table, group: string, key: Buffer, filter: Filter, options: CallOptions): Promise<Row | null> {
    return new Promise<Row | null>((resolve, reject) => {
      let settled = false;
      const cleanup: Array<() => void> = [];
      const settle = (row: Row | null, error?: Error) => {
        if (settled) return;
        settled = true;
        for (const undo of cleanup) undo();
        if (error === undefined) resolve(row);
        else reject(error);
      };
      const timer = setTimeout(() => settle(null, this.#deadlineExceeded()), Math.max(0, options.deadline - Date.now()));
      cleanup.push(() => clearTimeout(timer));
      if (options.signal !== undefined) {
        const signal = options.signal;
        const gone = () => settle(null, callerGone());
        signal.addEventListener('abort', gone, { once: true });
        cleanup.push(() => signal.removeEventListener('abort', gone));
      }
      if (this.#pending.length === 0) setImmediate(() => this.#flush());
      this.#pending.push({
        table,
        group,
        key,
        filter,
        options,
        resolve: (row) => settle(row),
        reject: (error) => settle(null, error),
        isSettled: () => settled,
      });
    });
  }

  #flush(): void {
    const pending = this.#pending.filter((item) => !item.isSettled());
    this.#pending = [];
    const groups = new Map<string, Array<Pending<Table, Filter>>>();
    for (const item of pending) {
      const list = groups.get(item.group);
      if (list === undefined) groups.set(item.group, [item]);
      else list.push(item);
    }
    for (const items of groups.values()) {
      let batch: Array<Pending<Table, Filter>> = [];
      let keys = new Set<string>();
      let bytes = 0;
      for (const item of items) {
        const key = item.key.toString('latin1');
        if (!keys.has(key) && batch.length > 0 && (keys.size >= this.#limits.entriesPerBatch || bytes + item.key.length > COALESCED_KEY_BYTES)) {
          this.#sendAll(batch);
          batch = [];
          keys = new Set();
          bytes = 0;
        }
        batch.push(item);
        if (!keys.has(key)) bytes += item.key.length;
        keys.add(key);
      }
      if (batch.length > 0) this.#sendAll(batch);
    }
  }

  /** #send answers every caller itself; the catch only keeps a defect in it from going unhandled. */
  #sendAll(batch: ReadonlyArray<Pending<Table, Filter>>): void {
    this.#send(batch).catch((error: unknown) => {
      for (const item of batch) item.reject(asError(error));
    });
  }

  async #send(batch: ReadonlyArray<Pending<Table, Filter>>): Promise<void> {
    const [first] = batch as [Pending<Table, Filter>];
    this.#sender.sent?.(batch.length);
    if (batch.length === 1) {
      await this.#sender.single(first.table, first.key, first.filter, first.options).then(first.resolve, (error: unknown) => first.reject(asError(error)));
      return;
    }
    const byKey = new Map<string, Array<Pending<Table, Filter>>>();
    for (const item of batch) {
      const key = item.key.toString('latin1');
      const list = byKey.get(key);
      if (list === undefined) byKey.set(key, [item]);
      else list.push(item);
    }
    // The call lasts as long as its most patient caller; each caller's own deadline answers it.
    const options: CallOptions = { deadline: Math.max(...batch.map((item) => item.options.deadline)) };
    const waiting = () => [...byKey.values()].filter((items) => items.some((item) => !item.isSettled())).map((items) => (items[0] as Pending<Table, Filter>).key);
    try {
      await this.#sender.batch(first.table, waiting, first.filter, options, (row) => {
        for (const item of byKey.get(row.key.toString('latin1')) ?? []) item.resolve(row);
      });
      for (const item of batch) item.resolve(null);
    } catch (error) {
      for (const item of batch) item.reject(asError(error));
    }
  }
}

function asError(error: unknown): Error {
  return error instanceof Error ? error : new Error(String(error));
}
