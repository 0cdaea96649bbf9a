import { Turns } from './turns.ts';

export { nextTurn } from './turns.ts';

/**
 * Work over very large inputs (a row of 100,000 cells) done a slice at a time, paced by Turns, so
 * that one request never holds the event loop for long: it yields between slices.
 */

/** Inputs up to this many items are done in one go: a slice's bookkeeping would cost more than it saves. */
const ONE_GO_ITEMS = 2000;

/** Whether an input of `items` items is large enough to be worked on in slices. */
export function isLarge(items: number): boolean {
  return items > ONE_GO_ITEMS;
}

/** Calls visit on each item in order, a large input a slice at a time, yielding between slices. */
export async function forEachInSlices<T>(items: readonly T[], visit: (item: T, index: number) => void): Promise<void> {
  if (!isLarge(items.length)) {
    items.forEach(visit);
    return;
  }
  const turns = new Turns();
  for (let index = 0; index < items.length; index++) {
    visit(items[index] as T, index);
    if (turns.dueAfterItem()) await turns.next();
  }
}

/** items.map(map), a large input a slice at a time, yielding between slices. */
export async function mapInSlices<T, U>(items: readonly T[], map: (item: T, index: number) => U): Promise<U[]> {
  if (!isLarge(items.length)) return items.map(map);
  const mapped: U[] = new Array<U>(items.length);
  await forEachInSlices(items, (item, index) => {
    mapped[index] = map(item, index);
  });
  return mapped;
}
