/** Most time one call's work on a large message or reply holds the event loop before other work gets its turn. */
const SLICE_MS = 5;

/**
 * Turns paces work on very large input (a row of 100,000 cells to check, encode, decode or sort; a
 * large request body to parse or validate) a slice at a time, so that one call never holds the
 * event loop for long: other requests are served between slices. One per call: the time counts
 * across all of its work. It sits in the store layer, the lowest, so that every layer can pace by it.
 */
export class Turns {
  #since = performance.now();
  #items = 0;

  /** Whether this slice has had its time; cheap enough to ask every few hundred items. */
  due(): boolean {
    return performance.now() - this.#since >= SLICE_MS;
  }

  /** due() for a loop that asks once per item: the clock is looked at once per 128 items, which keeps it cheap. */
  dueAfterItem(): boolean {
    return (++this.#items & 127) === 0 && this.due();
  }

  /** Lets the event loop serve other work (timers, sockets), then starts a new slice. */
  async next(): Promise<void> {
    await nextTurn();
    this.#since = performance.now();
  }

  /** Waits for the event loop to serve other work if this slice has had its time; else returns at once. */
  async pause(): Promise<void> {
    if (this.due()) await this.next();
  }
}

/** Lets the event loop serve other work (timers, sockets) before going on. */
export function nextTurn(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}
