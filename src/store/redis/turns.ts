/** Most time one call's work on a reply holds the event loop before other work gets its turn. */
const SLICE_MS = 5;

/**
 * Turns paces work on a large reply (a row of 100,000 cells to decode and sort) a slice at a
 * time, so that one call never holds the event loop for long: other requests are served between
 * slices. One per reply: the time counts across all of its rows.
 */
export class Turns {
  #since = performance.now();

  /** Whether this slice has had its time; cheap enough to ask every few hundred items. */
  due(): boolean {
    return performance.now() - this.#since >= SLICE_MS;
  }

  /** Lets the event loop serve other work (timers, sockets), then starts a new slice. */
  async next(): Promise<void> {
    await new Promise((resolve) => setImmediate(resolve));
    this.#since = performance.now();
  }
}
