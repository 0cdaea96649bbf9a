import { getHeapStatistics } from 'node:v8';
import { ApiError } from './errors.ts';
import { SERVICE_LIMITS } from './limits.ts';

/**
 * The memory a byte of an answer's keys, columns and values takes until the answer is sent:
 * the row as read, its text in the rendered answer and again in the JSON (more in base64), and
 * the bytes handed to the socket, as measured on pages of large rows (docs/performance.md). A value of 64 KiB or more takes less
 * (JsonText in http/json/json-answer.ts): as text, its bytes as read are what the socket is handed;
 * in base64, their base64 too. The figure is kept for the small values, which rows of many cells hold.
 */
const MEMORY_BYTES_PER_ANSWER_BYTE = 5;

/**
 * answerBudgetBytes: the bytes of rows that answers may hold at once, so that they take about a
 * quarter of the heap's size in memory (bodies being handled take up to half, see body-budget.ts),
 * and never less than one full page.
 */
export function answerBudgetBytes(heapLimitBytes = getHeapStatistics().heap_size_limit): number {
  return Math.max(SERVICE_LIMITS.pageBytes, Math.floor(heapLimitBytes / 4 / MEMORY_BYTES_PER_ANSWER_BYTE));
}

/** The errors answersOverloaded made, to tell them from the other 503 OVERLOADED a request may meet. */
const NOT_ADMITTED = new WeakSet<ApiError>();

/** The 503 of an answer not admitted in time. */
export function answersOverloaded(): ApiError {
  const error = new ApiError('OVERLOADED', 'The service holds as many large answers as its memory allows. Retry shortly.');
  NOT_ADMITTED.add(error);
  return error;
}

/** Whether `error` is the 503 of an answer not admitted in time (answersOverloaded). */
export function isAnswerNotAdmitted(error: unknown): boolean {
  return error instanceof ApiError && NOT_ADMITTED.has(error);
}

/**
 * One request's share of the answer budget: the bytes of the rows its answer holds, taken as they
 * are read and given back all at once when the answer has been written or the client has gone.
 */
export interface AnswerHold {
  /** Takes `bytes` if the budget has room for them and no answer is waiting to be admitted; whether it did. */
  tryTake(bytes: number): boolean;
  /** Takes `bytes` whether or not they fit: a page's first row. */
  take(bytes: number): void;
  /**
   * Waits until an answer expected to hold `estimate` bytes is admitted to read, in arrival order,
   * and takes them then: once they fit (or the budget holds nothing). An answer whose size nobody can
   * estimate (0) goes once there is any room, and those behind it wait until it has settled.
   * Resolves to whether it was admitted: false after the budget's admitWaitMs, or once the hold is
   * released.
   */
  admit(estimate?: number): Promise<boolean>;
  /**
   * Replaces what admission took with `bytes`, what the answer read: gives back what was estimated
   * beyond them at once, and otherwise waits for room for the rest, before those waiting to read.
   * Resolves as admit does.
   */
  settle(bytes: number): Promise<boolean>;
  /**
   * Replaces what admission took with a new `estimate`, as settle does, but as an estimate still:
   * settle replaces it in its place once the answer has read. For an answer admitted to read without an
   * estimate (so alone) whose size has since become known.
   */
  reestimate(estimate: number): Promise<boolean>;
  /** Gives back every byte taken, once; the hold takes nothing after it. */
  release(): void;
}

type FirstUse = (hold: AnswerHold, owner: unknown) => void;

interface Waiter {
  readonly hold: AnswerHold;
  readonly bytes: number;
  readonly grant: (granted: boolean) => void;
}

/**
 * AnswerBudget bounds the bytes of rows the service holds for answers at once (scan pages,
 * batchGet answers and large rows), from when they are read until the answer has been written.
 * Without it, each page of up to SERVICE_LIMITS.pageBytes is built whole before it is sent, and
 * a few such pages at once took the process's memory far past its target (docs/performance.md).
 *
 * A page never waits: it takes each row's bytes as it reads the row and ends early, with a token,
 * at the first row there is no room for, keeping at least its first row so that every page makes
 * progress. An answer that cannot end early (batchGet) waits twice: for room for what it is
 * expected to hold before it reads (answer-sizes.ts), and for room for all it read before it is
 * rendered (rendering costs four times what the rows do). So large answers read one after another
 * and small ones together. An answer nobody can estimate reads alone: those behind it wait until
 * it has counted what it read. While an answer waits, pages take only their first row, so that
 * room comes.
 */
export class AnswerBudget {
  readonly #room: Room;

  constructor(limitBytes: number, admitWaitMs = 10_000) {
    this.#room = new Room(limitBytes, admitWaitMs);
  }

  get limitBytes(): number {
    return this.#room.limitBytes;
  }

  /** Bytes held by answers now. */
  get inUse(): number {
    return this.#room.inUse;
  }

  /**
   * A hold for one request's answer, which must be released once the answer is written or the
   * client has gone. `firstUse(hold, owner)` is called when the hold is first used (to take, wait
   * or settle): a request whose answer counts nothing (a small row) need not arrange the release.
   */
  hold<Owner>(firstUse?: (hold: AnswerHold, owner: Owner) => void, owner?: Owner): AnswerHold {
    return new Hold(this.#room, firstUse as FirstUse | undefined, owner);
  }
}

/** The state an AnswerBudget and its holds share: what is held, and who waits for room. */
class Room {
  readonly limitBytes: number;
  /** How long an answer may wait for each admission (as long as a large body may). */
  readonly admitWaitMs: number;
  inUse = 0;
  readonly waiting: Waiter[] = [];
  /** The answer of unknown size let in to read, until it has counted what it read. */
  reading: AnswerHold | undefined;

  constructor(limitBytes: number, admitWaitMs: number) {
    this.limitBytes = limitBytes;
    this.admitWaitMs = admitWaitMs;
  }

  /** Whether no answer waits to be admitted or reads without an estimate, not having counted what it read. */
  open(): boolean {
    return this.waiting.length === 0 && this.reading === undefined;
  }

  /** Whether `bytes` fit now; no bytes fit while there is any room. A budget holding nothing takes anything. */
  fits(bytes: number): boolean {
    return this.inUse === 0 || this.inUse + Math.max(bytes, 1) <= this.limitBytes;
  }

  /** Waits, in arrival order (`first`: ahead of all), until `bytes` fit; `granted` runs when they do. Resolves false after admitWaitMs. */
  wait(hold: AnswerHold, bytes: number, first: boolean, granted: () => void): Promise<boolean> {
    return new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => this.leave(waiter), this.admitWaitMs);
      const waiter: Waiter = {
        hold,
        bytes,
        grant: (ok) => {
          clearTimeout(timer);
          if (ok) granted();
          resolve(ok);
        },
      };
      if (first) this.waiting.unshift(waiter);
      else this.waiting.push(waiter);
      this.letIn();
    });
  }

  /** Removes a waiter that gave up, and lets those behind it go if it was holding them back. */
  leave(waiter: Waiter): void {
    this.waiting.splice(this.waiting.indexOf(waiter), 1);
    waiter.grant(false);
    this.letIn();
  }

  /** Lets waiters in, in order, while the first fits; one let in to read without an estimate stops the rest until it has counted. */
  letIn(): void {
    while (this.reading === undefined && this.waiting.length > 0 && this.fits((this.waiting[0] as Waiter).bytes)) {
      (this.waiting.shift() as Waiter).grant(true);
    }
  }
}

/** One request's share of the budget (see AnswerHold). */
class Hold implements AnswerHold {
  readonly #room: Room;
  #firstUse: FirstUse | undefined;
  readonly #owner: unknown;
  #held = 0;
  /** What admission to read took, until the answer settles. */
  #estimated = 0;
  #released = false;

  constructor(room: Room, firstUse: FirstUse | undefined, owner: unknown) {
    this.#room = room;
    this.#firstUse = firstUse;
    this.#owner = owner;
  }

  tryTake(bytes: number): boolean {
    this.#use();
    if (this.#released || !this.#room.open() || this.#room.inUse + bytes > this.#room.limitBytes) return false;
    this.take(bytes);
    return true;
  }

  take(bytes: number): void {
    this.#use();
    if (this.#released) return;
    this.#held += bytes;
    this.#room.inUse += bytes;
  }

  admit(estimate = 0): Promise<boolean> {
    this.#use();
    if (this.#released) return Promise.resolve(false);
    const room = this.#room;
    const read = () => {
      this.take(estimate);
      this.#estimated = estimate;
      if (estimate === 0) room.reading = this;
    };
    if (room.open() && room.fits(estimate)) {
      read();
      return Promise.resolve(true);
    }
    return room.wait(this, estimate, false, read);
  }

  settle(bytes: number): Promise<boolean> {
    return this.#replace(bytes, false);
  }

  reestimate(estimate: number): Promise<boolean> {
    return this.#replace(estimate, true);
  }

  /** Replaces what admission took with `bytes`: an estimate still, or what the answer read. */
  #replace(bytes: number, estimate: boolean): Promise<boolean> {
    this.#use();
    if (this.#released) return Promise.resolve(false);
    const room = this.#room;
    // It was admitted and has read: it knows its size now, and comes before those waiting to read.
    if (room.reading === this) room.reading = undefined;
    this.#held -= this.#estimated;
    room.inUse -= this.#estimated;
    this.#estimated = 0;
    const take = () => {
      this.take(bytes);
      if (estimate) this.#estimated = bytes;
    };
    if (room.fits(bytes)) {
      take();
      room.letIn();
      return Promise.resolve(true);
    }
    return room.wait(this, bytes, true, take);
  }

  release(): void {
    if (this.#released) return;
    this.#released = true;
    const room = this.#room;
    room.inUse -= this.#held;
    this.#held = 0;
    if (room.reading === this) room.reading = undefined;
    const waiter = room.waiting.find((candidate) => candidate.hold === this);
    if (waiter === undefined) room.letIn();
    else room.leave(waiter);
  }

  /** Tells the owner, once, that the hold is in use. */
  #use(): void {
    const firstUse = this.#firstUse;
    if (firstUse === undefined) return;
    this.#firstUse = undefined;
    firstUse(this, this.#owner);
  }
}
