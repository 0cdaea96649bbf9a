import { getHeapStatistics } from 'node:v8';

/** Bodies smaller than this are not counted: they cost little, and most requests are small. */
export const COUNTED_BODY_BYTES = 64 * 1024;

/**
 * The heap a parsed JSON body takes while it is validated and handled, per byte of body, as
 * measured on the largest insertData (the parsed objects, their validated copies, the row
 * mutations and their buffers; figures: docs/performance.md), rounded up.
 */
const HEAP_BYTES_PER_BODY_BYTE = 9;

/**
 * bodyBudgetBytes: the body bytes that may be read and handled at once, so that their parsed
 * form fits in about half of the heap (the rest is the service's own and smaller requests'), and
 * never less than one body of the largest size.
 */
export function bodyBudgetBytes(maxBodyBytes: number, heapLimitBytes = getHeapStatistics().heap_size_limit): number {
  return Math.max(maxBodyBytes, Math.floor(heapLimitBytes / 2 / HEAP_BYTES_PER_BODY_BYTE));
}

interface Waiter {
  readonly bytes: number;
  readonly grant: () => void;
}

/**
 * BodyBudget bounds the bytes of large request bodies being read and handled at once. Without it,
 * a handful of the largest bodies, each well within MAX_BODY_BYTES, together need more heap than
 * the process has, and it dies of "JavaScript heap out of memory", taking every other request with
 * it. A body waits to be admitted, in arrival order, before any of it is read; a body larger than
 * the whole budget goes alone. Waiting holds no memory: the unread bytes stay in the socket.
 */
export class BodyBudget {
  readonly limitBytes: number;
  #inUse = 0;
  readonly #waiting: Waiter[] = [];

  constructor(limitBytes: number) {
    this.limitBytes = limitBytes;
  }

  /** Bytes of the bodies being read or handled now. */
  get inUse(): number {
    return this.#inUse;
  }

  /**
   * Resolves with the function that gives the bytes back, once `bytes` fit; or resolves to
   * undefined if they have not fitted within `waitMs` (the caller is then refused).
   */
  acquire(bytes: number, waitMs: number): Promise<(() => void) | undefined> {
    const release = once(() => {
      this.#inUse -= bytes;
      this.#grantWaiting();
    });
    if (this.#waiting.length === 0 && this.#fits(bytes)) {
      this.#inUse += bytes;
      return Promise.resolve(release);
    }
    return new Promise((resolve) => {
      const waiter: Waiter = {
        bytes,
        grant: () => {
          clearTimeout(timer);
          this.#inUse += bytes;
          resolve(release);
        },
      };
      const timer = setTimeout(() => {
        this.#waiting.splice(this.#waiting.indexOf(waiter), 1);
        // The head may have been the one holding the others back.
        this.#grantWaiting();
        resolve(undefined);
      }, waitMs);
      this.#waiting.push(waiter);
    });
  }

  #fits(bytes: number): boolean {
    return this.#inUse === 0 || this.#inUse + bytes <= this.limitBytes;
  }

  /** Grants waiting bodies in order while the first of them fits. */
  #grantWaiting(): void {
    while (this.#waiting.length > 0 && this.#fits((this.#waiting[0] as Waiter).bytes)) {
      (this.#waiting.shift() as Waiter).grant();
    }
  }
}

function once(run: () => void): () => void {
  let done = false;
  return () => {
    if (done) return;
    done = true;
    run();
  };
}
