import type { Turns } from './turns.ts';

/** Items one Array.prototype.sort call orders at once: a few milliseconds of comparisons. */
const RUN = 2048;

/**
 * sortInSlices orders `items` by `compare` (a merge sort: runs sorted one at a time, then merged
 * pairwise), yielding to the event loop between slices. `compare` must never answer 0 for two
 * different items, so the order does not depend on the algorithm's stability.
 */
export async function sortInSlices<T>(items: T[], compare: (a: T, b: T) => number, turns: Turns): Promise<T[]> {
  if (items.length <= RUN) return items.sort(compare);
  let runs: T[][] = [];
  for (let start = 0; start < items.length; start += RUN) {
    runs.push(items.slice(start, start + RUN).sort(compare));
    if (turns.due()) await turns.next();
  }
  while (runs.length > 1) {
    const merged: T[][] = [];
    for (let i = 0; i + 1 < runs.length; i += 2) merged.push(await merge(runs[i] as T[], runs[i + 1] as T[], compare, turns));
    if (runs.length % 2 === 1) merged.push(runs[runs.length - 1] as T[]);
    runs = merged;
  }
  return runs[0] as T[];
}

async function merge<T>(a: readonly T[], b: readonly T[], compare: (a: T, b: T) => number, turns: Turns): Promise<T[]> {
  const out = new Array<T>(a.length + b.length);
  let i = 0;
  let j = 0;
  let k = 0;
  while (i < a.length && j < b.length) {
    out[k++] = compare(b[j] as T, a[i] as T) < 0 ? (b[j++] as T) : (a[i++] as T);
    if ((k & 1023) === 0 && turns.due()) await turns.next();
  }
  while (i < a.length) out[k++] = a[i++] as T;
  while (j < b.length) out[k++] = b[j++] as T;
  return out;
}
