/**
 * Work on very large messages (a row of 100,000 cells) done a slice at a time, so that one call
 * never holds the event loop for long: other requests are served between slices.
 */

/** Most time spent in one slice before other work gets its turn. */
const SLICE_MS = 5;

/** Turns tells a loop over a large input when its slice is over, and waits for its next turn then. */
export class Turns {
  #since = performance.now();

  /** Waits for the event loop to serve other work if this slice has run SLICE_MS; else returns at once. */
  async pause(): Promise<void> {
    if (performance.now() - this.#since < SLICE_MS) return;
    await new Promise((resolve) => setImmediate(resolve));
    this.#since = performance.now();
  }
}
