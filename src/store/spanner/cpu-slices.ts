/**
 * The store's own per-cell work on a large write or read (10,000 cells) is done a slice at a
 * time, so that one call never holds the event loop for long: other requests are served between
 * slices.
 */

/** Most time one slice runs before other work gets its turn. */
const SLICE_MS = 5;

/** CpuSlices tells a loop when its slice has run its time; checking the clock once per 128 items keeps it cheap. */
export class CpuSlices {
  #since = performance.now();
  #items = 0;

  /** Whether the loop should await next() before its next item; call once per item. */
  due(): boolean {
    return (++this.#items & 127) === 0 && performance.now() - this.#since >= SLICE_MS;
  }

  /** Lets the event loop serve other work (timers, sockets), then starts a new slice. */
  async next(): Promise<void> {
    await new Promise((resolve) => setImmediate(resolve));
    this.#since = performance.now();
  }
}
