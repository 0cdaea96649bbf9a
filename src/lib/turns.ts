/** Most time one slice of a call's work on a large message or reply holds the event loop before it yields. */
const SLICE_MS = 5;

/**
 * Turns paces work on very large input (a row of 100,000 cells to check, encode, decode or sort; a
 * large request body to parse or validate) a slice at a time, so that one call never holds the
 * event loop for long: it yields between slices, and other requests are served. One per call: the
 * time counts across all of its work. It sits in lib/, below every layer, so that every layer can pace by it.
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

  /** Yields to the event loop (timers, sockets, other requests), then starts a new slice. */
  async next(): Promise<void> {
    await nextTurn();
    this.#since = performance.now();
  }

  /** Yields if this slice has had its time; else returns at once. */
  async pause(): Promise<void> {
    if (this.due()) await this.next();
  }
}

/** Yields to the event loop: other work (timers, sockets, other requests) is served before going on. */
export function nextTurn(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}
