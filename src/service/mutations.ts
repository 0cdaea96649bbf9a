import type { Micros, Mutation, StoreLimits } from '../store/store.ts';
import { tooMany, tooManyBytes, overLimit } from './limits.ts';
import { mapInSlices, nextTurn } from '../lib/slices.ts';
import { MAX_TIMESTAMP_MICROS } from './timestamps.ts';

/**
 * One change to a row, as a request asks for it: like the store's Mutation, except that a set
 * may leave its timestamp to the service.
 */
export type MutationInput =
  | { readonly type: 'set'; readonly family: string; readonly column: Buffer; readonly value: Buffer; readonly timestampMicros?: Micros | undefined }
  | { readonly type: 'deleteColumn'; readonly family: string; readonly column: Buffer }
  | { readonly type: 'deleteFamily'; readonly family: string }
  | { readonly type: 'deleteRow' };

/**
 * The names, in the request's own terms, of the fields a limit check can refer to: `cells[2].value`
 * in one API, `data[2].columnValue` in another. They go into the error's `errors[].path`.
 */
export interface MutationFields {
  readonly key: string;
  readonly mutations: string;
  field(index: number, name: 'column' | 'value' | 'timestamp'): string;
}

/**
 * checkRowMutations refuses, with a 400 naming the limit and the field, a row mutation beyond the
 * store's limits; it returns the bytes the mutation writes (key, columns and values).
 */
export function checkRowMutations(limits: StoreLimits, key: Buffer, mutations: readonly MutationInput[], fields: MutationFields): number {
  checkRowShape(limits, key, mutations, fields);
  let bytes = key.length;
  for (const [index, mutation] of mutations.entries()) bytes += checkMutation(limits, mutation, index, fields);
  return checkRowBytes(limits, bytes, fields);
}

/** Rows written of at least this many bytes are given to the store after a yield, in a slice of their own: a few milliseconds of copying. */
const TALL_ROW_BYTES = 4 * 1024 * 1024;

/**
 * The row's mutations as the store takes them, for a row of any size: checked as checkRowMutations
 * checks them, then stamped as withTimestamps stamps them with `timestamp()` (asked for once they
 * passed), each a slice at a time (slices.ts). A tall row comes after a yield: its values were
 * just made into bytes in one go, and the store may copy them in one go too (the embedded store's
 * message to its writer), so not in the same slice.
 */
export async function rowMutationsInSlices(limits: StoreLimits, key: Buffer, mutations: readonly MutationInput[], fields: MutationFields, timestamp: () => Micros): Promise<Mutation[]> {
  const bytes = await checkRowMutationsInSlices(limits, key, mutations, fields);
  const stamped = await withTimestampsInSlices(mutations, timestamp());
  if (bytes >= TALL_ROW_BYTES) await nextTurn();
  return stamped;
}

/** checkRowMutations for a row of many mutations, a slice at a time (slices.ts). */
async function checkRowMutationsInSlices(limits: StoreLimits, key: Buffer, mutations: readonly MutationInput[], fields: MutationFields): Promise<number> {
  checkRowShape(limits, key, mutations, fields);
  const sizes = await mapInSlices(mutations, (mutation, index) => checkMutation(limits, mutation, index, fields));
  return checkRowBytes(limits, sizes.reduce((sum, size) => sum + size, key.length), fields);
}

function checkRowShape(limits: StoreLimits, key: Buffer, mutations: readonly MutationInput[], fields: MutationFields): void {
  checkKey(limits, key, fields.key);
  if (mutations.length > limits.mutationsPerRow) {
    throw tooMany('mutationsPerRow', fields.mutations, mutations.length, limits.mutationsPerRow, 'mutations');
  }
}

/** Refuses one mutation beyond the per-cell limits; returns the bytes of its column and value. */
function checkMutation(limits: StoreLimits, mutation: MutationInput, index: number, fields: MutationFields): number {
  let bytes = 0;
  if (mutation.type === 'set' || mutation.type === 'deleteColumn') {
    if (mutation.column.length > limits.columnBytes) {
      throw tooManyBytes('columnBytes', fields.field(index, 'column'), mutation.column.length, limits.columnBytes);
    }
    bytes += mutation.column.length;
  }
  if (mutation.type === 'set') {
    if (mutation.value.length > limits.valueBytes) {
      throw tooManyBytes('valueBytes', fields.field(index, 'value'), mutation.value.length, limits.valueBytes);
    }
    bytes += mutation.value.length;
    if (mutation.timestampMicros !== undefined) checkTimestamp(limits, mutation.timestampMicros, fields.field(index, 'timestamp'));
  }
  return bytes;
}

function checkRowBytes(limits: StoreLimits, bytes: number, fields: MutationFields): number {
  if (bytes > limits.bytesPerRow) throw tooManyBytes('bytesPerRow', fields.mutations, bytes, limits.bytesPerRow);
  return bytes;
}

/** Refuses an empty key or one longer than the store's keyBytes. */
export function checkKey(limits: StoreLimits, key: Buffer, path: string): void {
  if (key.length === 0) throw overLimit('keyBytes', path, `${path} is empty; a key has at least one byte`);
  if (key.length > limits.keyBytes) throw tooManyBytes('keyBytes', path, key.length, limits.keyBytes);
}

function checkTimestamp(limits: StoreLimits, micros: Micros, path: string): void {
  const granularity = BigInt(limits.timestampGranularityMicros);
  if (micros % granularity !== 0n) {
    throw overLimit(
      'timestampGranularityMicros',
      path,
      `${path} has a finer precision than this store keeps: it must be a multiple of ${limits.timestampGranularityMicros} microseconds`,
    );
  }
  if (micros < 0n || micros > MAX_TIMESTAMP_MICROS) throw overLimit('timestampGranularityMicros', path, `${path} is out of range`);
}

/** The store's mutations: every set without a timestamp gets `timestampMicros`. */
export function withTimestamps(mutations: readonly MutationInput[], timestampMicros: Micros): Mutation[] {
  return mutations.map((mutation) => stamped(mutation, timestampMicros));
}

/** withTimestamps for a row of many mutations, a slice at a time (slices.ts). */
function withTimestampsInSlices(mutations: readonly MutationInput[], timestampMicros: Micros): Promise<Mutation[]> {
  return mapInSlices(mutations, (mutation) => stamped(mutation, timestampMicros));
}

function stamped(mutation: MutationInput, timestampMicros: Micros): Mutation {
  return mutation.type === 'set'
    ? { type: 'set', family: mutation.family, column: mutation.column, value: mutation.value, timestampMicros: mutation.timestampMicros ?? timestampMicros }
    : mutation;
}
