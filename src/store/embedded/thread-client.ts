import { MessageChannel, type MessagePort, type ResourceLimits, Worker, receiveMessageOnPort } from 'node:worker_threads';
import { performance } from 'node:perf_hooks';
import { StoreError, callerGone } from '../errors.ts';
import { Decoder, Encoder } from './codec.ts';
import { CANCEL_SLOTS, Kind, Status, decodeError, type ThreadData, writeHeader } from './protocol.ts';

/** How long the main thread decodes answers before it lets the event loop run other callbacks. */
const DECODE_BUDGET_MS = 5;
/** How often calls waiting on a thread are checked against their deadlines. */
const DEADLINE_CHECK_MS = 50;

// The thread's source sits next to this file: .ts when run from source, .js once compiled.
const THREAD_ENTRY = new URL(`./sqlite-thread${import.meta.url.endsWith('.ts') ? '.ts' : '.js'}`, import.meta.url);

/** Decodes one request's answers: any number of parts, then its result. */
export interface AnswerReader<T> {
  part?(decoder: Decoder): void;
  done(decoder: Decoder): T;
}

interface Pending {
  readonly reader: AnswerReader<unknown>;
  readonly resolve: (value: unknown) => void;
  readonly reject: (error: unknown) => void;
  readonly deadline: number;
  readonly since: number;
  readonly forget: () => void;
}

/**
 * Ids shared by every thread of the process, so that a cancelled id is never another request's.
 * Never 0: a thread reads an id of 0 as the end of a message's requests.
 */
let lastId = 0;
function nextId(): number {
  lastId = lastId >= 0x7fff_ffff ? 1 : lastId + 1;
  return lastId;
}

/** A thread's message: its answers, and the buffers of large values attached to it if it has any. */
type ThreadMessage = ArrayBuffer | readonly [ArrayBuffer, ...ArrayBuffer[]];

/**
 * ThreadClient is the main thread's side of one SQLite thread (sqlite-thread.ts). Requests made
 * in one turn of the event loop travel in one message; answers are decoded a few milliseconds'
 * worth at a time, so a large result never holds up the event loop in one piece.
 *
 * A thread that dies (a crash, an out-of-memory error) fails every call waiting on it with
 * UNAVAILABLE, and the next call starts a new thread. A call whose deadline passes, or whose caller
 * goes, is answered at once; the thread skips it if it has not started it yet.
 */
export class ThreadClient {
  readonly #role: ThreadData['role'];
  readonly #databaseFile: string;
  readonly #cancelled: Int32Array;
  readonly #resourceLimits: ResourceLimits | undefined;
  #worker: Worker | undefined;
  #port: MessagePort | undefined;
  #outgoing = new Encoder();
  #flushScheduled = false;
  readonly #pending = new Map<number, Pending>();
  readonly #inbox: ThreadMessage[] = [];
  #draining = false;
  #deadlineTimer: NodeJS.Timeout | undefined;
  #exited: Promise<void> = Promise.resolve();
  #closing = false;

  constructor(role: ThreadData['role'], databaseFile: string, cancelled: SharedArrayBuffer, resourceLimits?: ResourceLimits) {
    this.#role = role;
    this.#databaseFile = databaseFile;
    this.#cancelled = new Int32Array(cancelled);
    this.#resourceLimits = resourceLimits;
    this.#start();
  }

  /**
   * Since when (performance.now()) the oldest call still waiting has waited; +Infinity when none
   * waits. A thread whose oldest call is old is likely busy with a long one.
   */
  get busySince(): number {
    for (const pending of this.#pending.values()) return pending.since;
    return Number.POSITIVE_INFINITY;
  }

  /**
   * Sends a request; resolves with what `reader` makes of the answer. `write` encodes the payload.
   * The signal, if any, cancels the call.
   */
  request<T>(kind: number, deadline: number, write: ((encoder: Encoder) => void) | undefined, reader: AnswerReader<T>, signal?: AbortSignal): Promise<T> {
    if (signal?.aborted === true) return Promise.reject(callerGone());
    const id = nextId();
    const encoder = this.#outgoing;
    const lengthAt = writeHeader(encoder, id, kind, deadline);
    write?.(encoder);
    encoder.u32At(lengthAt, encoder.length - lengthAt - 4);
    if (!this.#flushScheduled) {
      this.#flushScheduled = true;
      setImmediate(() => this.flush());
    }
    return this.#await(id, deadline, reader, signal);
  }

  /**
   * Sends a request whose payload is large, in a message of its own: `write` encodes it a piece
   * per slice (it yields between pieces), so that no slice is spent on it whole.
   */
  requestLarge<T>(
    kind: number,
    deadline: number,
    write: (encoder: Encoder) => Iterable<void>,
    reader: AnswerReader<T>,
    signal?: AbortSignal,
  ): Promise<T> {
    if (signal?.aborted === true) return Promise.reject(callerGone());
    const id = nextId();
    const answer = this.#await(id, deadline, reader, signal);
    const encoder = new Encoder(64 * 1024);
    const lengthAt = writeHeader(encoder, id, kind, deadline);
    const pieces = write(encoder)[Symbol.iterator]();
    const step = () => {
      // Given up on (deadline, caller gone, thread ended) while it was being encoded.
      if (!this.#pending.has(id)) return;
      if (pieces.next().done !== true) {
        setImmediate(step);
        return;
      }
      encoder.u32At(lengthAt, encoder.length - lengthAt - 4);
      // What was queued before goes first.
      this.flush();
      const buffer = encoder.finishPadded();
      this.#port?.postMessage(buffer, [buffer]);
    };
    step();
    return answer;
  }

  #await<T>(id: number, deadline: number, reader: AnswerReader<T>, signal: AbortSignal | undefined): Promise<T> {
    if (this.#worker === undefined) this.#start();
    return new Promise<T>((resolve, reject) => {
      const onAbort = () => this.#cancel(id, callerGone());
      signal?.addEventListener('abort', onAbort, { once: true });
      this.#pending.set(id, {
        reader,
        resolve: resolve as (value: unknown) => void,
        reject,
        deadline,
        since: performance.now(),
        forget: () => signal?.removeEventListener('abort', onAbort),
      });
      if (this.#pending.size === 1) this.#busy();
    });
  }

  /** Sends what this turn queued now. */
  flush(): void {
    this.#flushScheduled = false;
    if (this.#outgoing.length === 0) return;
    const buffer = this.#outgoing.finishPadded();
    this.#port?.postMessage(buffer, [buffer]);
  }

  /** Asks the thread to close its connection and end; resolves when it has. */
  async close(deadline: number): Promise<void> {
    if (this.#worker === undefined) return;
    const closed = this.request(Kind.close, deadline, undefined, { done: () => undefined });
    this.flush();
    // Until it has ended: a thread is unreferenced while idle, and the process must not exit before.
    this.#closing = true;
    this.#worker.ref();
    try {
      await closed;
    } catch (error) {
      // Not closed in time (or not at all): end it, so that close() always ends.
      await this.#worker?.terminate();
      throw error;
    } finally {
      await this.#exited;
    }
  }

  #start(): void {
    const { port1, port2 } = new MessageChannel();
    const data: ThreadData = { role: this.#role, databaseFile: this.#databaseFile, cancelled: this.#cancelled.buffer as SharedArrayBuffer, port: port2 };
    const worker = new Worker(THREAD_ENTRY, {
      workerData: data,
      transferList: [port2],
      name: `kvcrud-sqlite-${this.#role}`,
      ...(this.#resourceLimits === undefined ? {} : { resourceLimits: this.#resourceLimits }),
    });
    worker.unref();
    port1.on('message', (message: ThreadMessage) => this.#receive(message));
    port1.unref();
    let failure: Error | undefined;
    worker.on('error', (error: Error) => {
      failure = error;
    });
    this.#exited = new Promise((resolve) => {
      worker.once('exit', (code) => {
        if (this.#worker === worker) {
          this.#worker = undefined;
          this.#port = undefined;
        }
        // Answers the thread sent before it ended are decoded first; what still waits then has none coming.
        for (let left = receiveMessageOnPort(port1); left !== undefined; left = receiveMessageOnPort(port1)) {
          this.#inbox.push(left.message as ThreadMessage);
        }
        port1.close();
        this.#drain(Number.POSITIVE_INFINITY);
        this.#outgoing = new Encoder();
        const reason = failure === undefined ? `exit code ${code}` : failure.message;
        this.#failAll(new StoreError('UNAVAILABLE', `the embedded store's ${this.#role} thread stopped (${reason})`, { cause: failure }));
        resolve();
      });
    });
    this.#worker = worker;
    this.#port = port1;
    if (this.#pending.size > 0) this.#busy();
  }

  #receive(message: ThreadMessage): void {
    this.#inbox.push(message);
    if (!this.#draining) {
      this.#draining = true;
      setImmediate(() => this.#drain(DECODE_BUDGET_MS));
    }
  }

  /** Decodes queued answers for up to `budgetMs`, then yields to the event loop if more remain. */
  #drain(budgetMs: number): void {
    const started = performance.now();
    this.#draining = false;
    while (this.#inbox.length > 0) {
      this.#decode(this.#inbox.shift() as ThreadMessage);
      if (this.#inbox.length > 0 && performance.now() - started >= budgetMs) {
        this.#draining = true;
        setImmediate(() => this.#drain(DECODE_BUDGET_MS));
        return;
      }
    }
  }

  #decode(message: ThreadMessage): void {
    const decoder = message instanceof ArrayBuffer ? new Decoder(message) : new Decoder(message[0], message.slice(1));
    while (!decoder.done) {
      const id = decoder.u32();
      const status = decoder.u8();
      const payload = decoder.sub(decoder.u32());
      const pending = this.#pending.get(id);
      // An answer to a call already given up on (deadline, caller gone).
      if (pending === undefined) continue;
      try {
        if (status === Status.part) {
          pending.reader.part?.(payload);
          continue;
        }
        this.#settled(id, pending);
        if (status === Status.done) pending.resolve(pending.reader.done(payload));
        else pending.reject(decodeError(payload));
      } catch (error) {
        this.#settled(id, pending);
        pending.reject(new StoreError('INTERNAL', `cannot decode the ${this.#role} thread's answer: ${(error as Error).message}`, { cause: error }));
      }
    }
  }

  #settled(id: number, pending: Pending): void {
    this.#pending.delete(id);
    pending.forget();
    if (this.#pending.size === 0) this.#idle();
  }

  #cancel(id: number, error: StoreError): void {
    const pending = this.#pending.get(id);
    if (pending === undefined) return;
    Atomics.store(this.#cancelled, id % CANCEL_SLOTS, id);
    this.#settled(id, pending);
    pending.reject(error);
  }

  #failAll(error: StoreError): void {
    for (const [id, pending] of [...this.#pending]) {
      this.#settled(id, pending);
      pending.reject(error);
    }
  }

  /** While calls wait, the thread keeps the process alive and deadlines are watched. */
  #busy(): void {
    this.#worker?.ref();
    this.#deadlineTimer ??= setInterval(() => this.#expire(), DEADLINE_CHECK_MS);
  }

  #idle(): void {
    if (!this.#closing) this.#worker?.unref();
    clearInterval(this.#deadlineTimer);
    this.#deadlineTimer = undefined;
  }

  #expire(): void {
    const now = Date.now();
    for (const [id, pending] of [...this.#pending]) {
      if (now >= pending.deadline) {
        this.#cancel(id, new StoreError('DEADLINE_EXCEEDED', `no answer from the embedded store's ${this.#role} thread before the deadline`));
      }
    }
  }
}
