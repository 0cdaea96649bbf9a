import { StoreError } from '../errors.ts';

// SQLite primary result codes (https://sqlite.org/rescode.html).
export const SQLITE_BUSY = 5;
export const SQLITE_LOCKED = 6;
/** The disk is full, or the database reached its max_page_count. */
export const SQLITE_FULL = 13;

export function sqliteCode(error: unknown): number | undefined {
  const errcode = (error as { errcode?: unknown }).errcode;
  // Extended result codes carry the primary code in their low byte.
  return typeof errcode === 'number' ? errcode & 0xff : undefined;
}

/** Lets StoreErrors through and turns anything SQLite (or a bug) throws into one. */
export function toStoreError(error: unknown, operation: string): StoreError {
  if (error instanceof StoreError) return error;
  const code = sqliteCode(error);
  const transient = code === SQLITE_BUSY || code === SQLITE_LOCKED;
  return new StoreError(transient ? 'UNAVAILABLE' : code === SQLITE_FULL ? 'RESOURCE_EXHAUSTED' : 'INTERNAL', `sqlite ${operation}: ${(error as Error).message}`, {
    cause: error,
  });
}
