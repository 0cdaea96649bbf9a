import type { Mutation } from '../../src/store/store.ts';

/** The cells of the event-loop scenarios' wide row: `column i` → `value i` in family cf, all at one timestamp. */
export function wideRowMutations(cells = 100_000): Mutation[] {
  return Array.from({ length: cells }, (_, i) => ({
    type: 'set',
    family: 'cf',
    column: Buffer.from(`column ${i}`),
    value: Buffer.from(`value ${i}`),
    timestampMicros: 1_000_000n,
  }));
}
