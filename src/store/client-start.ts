import { StoreError, callerGone } from './errors.ts';
import type { CallOptions } from './store.ts';

/**
 * ClientStart holds back every call of a Google Cloud client library (Bigtable, Spanner) until its
 * generated gRPC clients have started: their credentials loaded (a key file, application default
 * credentials, the metadata server) and their stubs made.
 *
 * Why it must: a generated client whose stub failed to start stays broken, and each of its
 * methods then rethrows that failure from a promise nobody holds (`this.initialize().catch((err)
 * => { throw err; })` in google-gax's generated code). An unhandled rejection ends the process:
 * a service started without credentials would die on its first call. So `start` makes fresh
 * clients and starts them itself, before any of their methods is called; when that fails, those
 * clients are dropped, never called, and the next call makes new ones.
 *
 * One start runs at a time, shared by the calls that wait for it. Each call waits no longer than
 * its own deadline and then fails with UNAVAILABLE (the start goes on, for the calls after it);
 * a failed start fails the calls waiting for it with UNAVAILABLE, its cause in the message.
 */
export class ClientStart<Clients> {
  readonly #label: string;
  readonly #start: () => Promise<Clients>;
  readonly #stop: (clients: Clients) => Promise<void>;
  #clients: Clients | undefined;
  #pending: Promise<Clients> | undefined;
  #closed = false;

  /**
   * `label` names the store in messages (`bigtable`); `start` makes and starts the clients and
   * must leave nothing running when it fails; `stop` closes clients that started.
   */
  constructor(label: string, start: () => Promise<Clients>, stop: (clients: Clients) => Promise<void>) {
    this.#label = label;
    this.#start = start;
    this.#stop = stop;
  }

  /** The started clients, or undefined while none have: lets a hot path skip an await. */
  get started(): Clients | undefined {
    return this.#clients;
  }

  /** Whether a start is under way: a call that runs out of time then never reached the backend. */
  get starting(): boolean {
    return this.#pending !== undefined;
  }

  /** The started clients: at once when they are, otherwise once a start succeeds, within the call's deadline. */
  clients(options: CallOptions): Clients | Promise<Clients> {
    return this.#clients ?? this.#wait(options);
  }

  /** Forgets the started clients (the caller closes them): the next call starts new ones. */
  forget(): void {
    this.#clients = undefined;
  }

  /** Closes the started clients; a start still under way closes its clients when it ends. */
  async close(): Promise<void> {
    this.#closed = true;
    const clients = this.#clients;
    this.#clients = undefined;
    if (clients !== undefined) await this.#stop(clients);
  }

  async #wait(options: CallOptions): Promise<Clients> {
    if (this.#closed) throw new StoreError('UNAVAILABLE', `${this.#label}: the store is closed`);
    const pending = (this.#pending ??= this.#begin());
    let timer: NodeJS.Timeout | undefined;
    let onAbort: (() => void) | undefined;
    try {
      return await Promise.race([
        pending,
        new Promise<never>((_resolve, reject) => {
          timer = setTimeout(
            () => reject(new StoreError('UNAVAILABLE', `${this.#label}: the client did not start before the deadline (its credentials did not load: check the credentials file, or that the metadata server answers)`)),
            Math.max(0, options.deadline - Date.now()),
          );
          onAbort = () => reject(callerGone());
          options.signal?.addEventListener('abort', onAbort, { once: true });
        }),
      ]);
    } finally {
      clearTimeout(timer);
      if (onAbort !== undefined) options.signal?.removeEventListener('abort', onAbort);
    }
  }

  #begin(): Promise<Clients> {
    const started = this.#start().then(
      async (clients) => {
        this.#pending = undefined;
        if (this.#closed) {
          await this.#stop(clients);
          throw new StoreError('UNAVAILABLE', `${this.#label}: the store is closed`);
        }
        this.#clients = clients;
        return clients;
      },
      (error: unknown) => {
        this.#pending = undefined;
        const why = error instanceof Error ? error.message : String(error);
        throw new StoreError('UNAVAILABLE', `${this.#label}: the client cannot start: ${why}`, { cause: error });
      },
    );
    // Calls that gave up at their deadline no longer hold it: its failure is theirs, not the process's.
    started.catch(() => undefined);
    return started;
  }
}
