/**
 * Work over very large inputs (a row of 100,000 cells) done a slice at a time, so that one request
 * never holds the event loop for long: other requests are served between slices.
 */

/** Most time spent in one slice before other work gets its turn. */
const SLICE_MS = 5;

/** Inputs up to this many items are done in one go: a slice's bookkeeping would cost more than it saves. */
const ONE_GO_ITEMS = 2000;

/** Lets the event loop serve other work (timers, sockets) before going on. */
export function nextTurn(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/** Whether an input of `items` items is large enough to be worked on in slices. */
export function isLarge(items: number): boolean {
  return items > ONE_GO_ITEMS;
}

/** Calls visit on each item in order, yielding to the event loop every SLICE_MS for a large input. */
export async function forEachInSlices<T>(items: readonly T[], visit: (item: T, index: number) => void): Promise<void> {
  if (!isLarge(items.length)) {
    items.forEach(visit);
    return;
  }
  let since = performance.now();
  for (let index = 0; index < items.length; index++) {
    visit(items[index] as T, index);
    if ((index & 255) === 255 && performance.now() - since >= SLICE_MS) {
      await nextTurn();
      since = performance.now();
    }
  }
}

/** items.map(map), yielding to the event loop every SLICE_MS for a large input. */
export async function mapInSlices<T, U>(items: readonly T[], map: (item: T, index: number) => U): Promise<U[]> {
  if (!isLarge(items.length)) return items.map(map);
  const mapped: U[] = new Array<U>(items.length);
  await forEachInSlices(items, (item, index) => {
    mapped[index] = map(item, index);
  });
  return mapped;
}
