import type { Micros, Mutation, StoreLimits } from '../store/store.ts';
import { tooMany, tooManyBytes, overLimit } from './limits.ts';
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
  checkKey(limits, key, fields.key);
  if (mutations.length > limits.mutationsPerRow) {
    throw tooMany('mutationsPerRow', fields.mutations, mutations.length, limits.mutationsPerRow, 'mutations');
  }
  let bytes = key.length;
  for (const [index, mutation] of mutations.entries()) {
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
  }
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
  return mutations.map((mutation) =>
    mutation.type === 'set'
      ? { type: 'set', family: mutation.family, column: mutation.column, value: mutation.value, timestampMicros: mutation.timestampMicros ?? timestampMicros }
      : mutation,
  );
}
