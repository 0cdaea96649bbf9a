import { status as GrpcStatus } from '@grpc/grpc-js';
import { StoreError, callerGone } from '../errors.ts';
import type { CallOptions, Mutation, RowMutations, StoreLimits } from '../store.ts';
import { type SendEntries, applyEntries } from './mutate-rows.ts';

/** The bytes of payload one coalesced MutateRows carries at most: a write larger goes alone. */
export const COALESCED_BATCH_BYTES = 1024 * 1024;

/** Mutations of one write that may join a batch: a wider write goes alone, encoded in pieces. */
export const COALESCED_WRITE_MUTATIONS = 500;

/** How a WriteBatches sends: one write on its own, or several as one MutateRows. */
export interface WriteSender {
  /** The write as its own MutateRow, with its own retries; rejects as mutateRow would. */
  single(tableName: string, write: RowMutations, options: CallOptions): Promise<void>;
  /** A sender of the batch's entries (by index) in one MutateRows call with these options. */
  batch(tableName: string, entries: readonly RowMutations[], options: CallOptions): Promise<SendEntries>;
  /** The backend's error for one entry, as mutateRow would report it. */
  failure(tableName: string, error: Error): StoreError;
  /** Called with each batch's size as it goes out (1 for a write sent alone). */
  sent?(size: number): void;
}

interface Pending {
  readonly tableName: string;
  readonly write: RowMutations;
  readonly options: CallOptions;
  readonly bytes: number;
  readonly resolve: () => void;
  readonly reject: (error: Error) => void;
  readonly isSettled: () => boolean;
}

/**
 * WriteBatches gathers the single-row writes made in one turn of the event loop and sends those for
 * the same table as one MutateRows, flushing in the same loop iteration's check phase
 * (setImmediate): nothing waits for a later turn, so a lone write goes out as soon as it would
 * have. Each caller gets its own entry's status; entries that fail transiently are sent again
 * (applyEntries), alone, until the latest deadline in the batch. A caller whose deadline passes,
 * or who goes, is answered at once without cancelling the call its batch-mates wait on.
 *
 * A batch is bounded by the store's limits on entries, mutations and bytes, and by
 * COALESCED_BATCH_BYTES; two writes to one row go in different batches (MutateRows may apply a
 * call's entries in any order).
 */
export class WriteBatches {
  readonly #limits: StoreLimits;
  readonly #sender: WriteSender;
  #pending: Pending[] = [];

  constructor(limits: StoreLimits, sender: WriteSender) {
    this.#limits = limits;
    this.#sender = sender;
  }

  /** Whether a write may join a batch at all: narrow and small enough. */
  static fits(mutations: readonly Mutation[]): boolean {
    return mutations.length <= COALESCED_WRITE_MUTATIONS && payloadBytes(mutations) <= COALESCED_BATCH_BYTES / 4;
  }

  /** Applies one row's mutations atomically, in a batch with the other writes of this turn. */
  write(tableName: string, write: RowMutations, options: CallOptions): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      let settled = false;
      const cleanup: Array<() => void> = [];
      const settle = (error?: Error) => {
        if (settled) return;
        settled = true;
        for (const undo of cleanup) undo();
        if (error === undefined) resolve();
        else reject(error);
      };
      // The caller's own deadline and departure answer it alone; the batch goes on for the others.
      const timer = setTimeout(() => settle(new StoreError('DEADLINE_EXCEEDED', 'bigtable mutateRow: deadline exceeded')), Math.max(0, options.deadline - Date.now()));
      cleanup.push(() => clearTimeout(timer));
      if (options.signal !== undefined) {
        const signal = options.signal;
        const gone = () => settle(callerGone());
        signal.addEventListener('abort', gone, { once: true });
        cleanup.push(() => signal.removeEventListener('abort', gone));
      }
      if (this.#pending.length === 0) setImmediate(() => this.#flush());
      this.#pending.push({ tableName, write, options, bytes: write.key.length + payloadBytes(write.mutations), resolve: () => settle(), reject: settle, isSettled: () => settled });
    });
  }

  #flush(): void {
    // A caller answered already (gone, or out of time) sends nothing.
    const pending = this.#pending.filter((item) => !item.isSettled());
    this.#pending = [];
    const byTable = new Map<string, Pending[]>();
    for (const item of pending) {
      const list = byTable.get(item.tableName);
      if (list === undefined) byTable.set(item.tableName, [item]);
      else list.push(item);
    }
    for (const [tableName, items] of byTable) {
      for (const batch of this.#batches(items)) {
        // #send answers every caller itself; this only keeps a defect in it from going unhandled.
        this.#send(tableName, batch).catch((error: unknown) => {
          for (const item of batch) item.reject(asError(error));
        });
      }
    }
  }

  /** Splits one table's writes into batches within the bounds, no row twice in a batch. */
  #batches(items: readonly Pending[]): Pending[][] {
    const maxBytes = Math.min(COALESCED_BATCH_BYTES, this.#limits.bytesPerBatch);
    const batches: Pending[][] = [];
    let current: Pending[] = [];
    let keys = new Set<string>();
    let mutations = 0;
    let bytes = 0;
    for (const item of items) {
      const key = item.write.key.toString('latin1');
      const full =
        current.length >= this.#limits.entriesPerBatch ||
        mutations + item.write.mutations.length > this.#limits.mutationsPerBatch ||
        bytes + item.bytes > maxBytes ||
        keys.has(key);
      if (full && current.length > 0) {
        batches.push(current);
        current = [];
        keys = new Set();
        mutations = 0;
        bytes = 0;
      }
      current.push(item);
      keys.add(key);
      mutations += item.write.mutations.length;
      bytes += item.bytes;
    }
    if (current.length > 0) batches.push(current);
    return batches;
  }

  async #send(tableName: string, batch: readonly Pending[]): Promise<void> {
    this.#sender.sent?.(batch.length);
    if (batch.length === 1) {
      const [only] = batch as [Pending];
      await this.#sender.single(tableName, only.write, only.options).then(only.resolve, (error: unknown) => only.reject(asError(error)));
      return;
    }
    // The call lasts as long as its most patient caller; each caller's own deadline answers it.
    const options: CallOptions = { deadline: Math.max(...batch.map((item) => item.options.deadline)) };
    try {
      const send = await this.#sender.batch(
        tableName,
        batch.map((item) => item.write),
        options,
      );
      const answer = (index: number, error: Error | null) => {
        const item = batch[index] as Pending;
        if (error === null) item.resolve();
        else item.reject(this.#sender.failure(tableName, error));
      };
      // Each caller is answered as soon as its entry is done; an entry whose caller has been
      // answered (its deadline, its departure) is not sent again.
      const outcome = await applyEntries(
        batch.map((_, index) => index),
        send,
        options,
        { settled: answer, wanted: (index) => !(batch[index] as Pending).isSettled() },
      );
      batch.forEach((_, index) => answer(index, outcome.results.get(index) ?? statusless()));
    } catch (error) {
      // A StoreError from before the call (every deadline passed): each caller fails with it.
      for (const item of batch) item.reject(error instanceof StoreError ? error : this.#sender.failure(tableName, error as Error));
    }
  }
}

/** The bytes a write carries: columns and values. */
function payloadBytes(mutations: readonly Mutation[]): number {
  let bytes = 0;
  for (const mutation of mutations) {
    bytes += 16;
    if (mutation.type === 'set') bytes += mutation.column.length + mutation.value.length + mutation.family.length;
    else if (mutation.type === 'deleteColumn') bytes += mutation.column.length + mutation.family.length;
  }
  return bytes;
}

function asError(error: unknown): Error {
  return error instanceof Error ? error : new Error(String(error));
}

function statusless(): Error {
  return Object.assign(new Error('MutateRows ended without a status for the entry'), { code: GrpcStatus.INTERNAL });
}
