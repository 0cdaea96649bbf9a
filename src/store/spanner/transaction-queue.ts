import { StoreError, callerGone } from '../errors.ts';

/**
 * TransactionQueue lets one read-write transaction run at a time, for the Spanner emulator: it
 * runs one at a time itself and aborts the others, which the client would retry with growing
 * backoff. Queued here, they run in order instead. A call whose deadline passes, or whose caller
 * leaves, while it waits gives up its place without running. Against real Spanner there is no
 * queue (`serial` false).
 */
export class TransactionQueue {
  readonly #serial: boolean;
  #tail: Promise<void> = Promise.resolve();

  constructor(serial: boolean) {
    this.#serial = serial;
  }

  run<T>(work: () => Promise<T>, deadline: number, signal?: AbortSignal): Promise<T> {
    if (!this.#serial) return work();
    const previous = this.#tail;
    let release!: () => void;
    this.#tail = new Promise<void>((resolve) => (release = resolve));
    return new Promise<T>((resolve, reject) => {
      let settled = false;
      const giveUp = (error: StoreError) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        // The place is kept until the one before is done, so that order holds.
        void previous.then(release);
        reject(error);
      };
      const onAbort = () => giveUp(callerGone());
      const timer = setTimeout(() => giveUp(new StoreError('DEADLINE_EXCEEDED', 'spanner: the deadline passed while waiting for the emulator\'s one read-write transaction')), Math.max(0, deadline - Date.now()));
      signal?.addEventListener('abort', onAbort, { once: true });
      void previous.then(() => {
        signal?.removeEventListener('abort', onAbort);
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        // A call the backend never answers (the emulator is down) keeps its place no longer than
        // its deadline: the queue must not stall behind it.
        const overdue = setTimeout(release, Math.max(0, deadline - Date.now()));
        work()
          .then(resolve, reject)
          .finally(() => {
            clearTimeout(overdue);
            release();
          });
      });
    });
  }
}
