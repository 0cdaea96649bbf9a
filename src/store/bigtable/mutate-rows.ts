import type { protos } from '@google-cloud/bigtable';
import { status as GrpcStatus } from '@grpc/grpc-js';
import { isStoreError } from '../errors.ts';
import type { CallOptions } from '../store.ts';
import { backoff } from './calls.ts';
import { isDeadline, isTransient } from './grpc-errors.ts';

type MutateRowsResponse = protos.google.bigtable.v2.IMutateRowsResponse;

/** Sends the entries at these indexes in one MutateRows call; yields its responses. */
export type SendEntries = (indexes: readonly number[]) => AsyncIterable<MutateRowsResponse>;

export interface BatchOutcome {
  /** Per entry sent: null when applied, else the backend's error for it (with a gRPC `code`). */
  readonly results: ReadonlyMap<number, Error | null>;
  /** Whether the backend gave a status for any entry: if not, the call failed as a whole. */
  readonly answered: boolean;
}

// Per-entry statuses worth another attempt: the entry was not applied, or applying it again is
// harmless (every set carries its timestamp, so an entry is idempotent).
const RETRIED_ENTRY_CODES: ReadonlySet<number> = new Set([
  GrpcStatus.UNAVAILABLE,
  GrpcStatus.RESOURCE_EXHAUSTED,
  GrpcStatus.ABORTED,
  GrpcStatus.DEADLINE_EXCEEDED,
]);

/** What a caller of applyEntries may learn, or decide, per entry while the batch goes on. */
export interface EntryHooks {
  /** Told of an entry whose result is final (applied, or failed for good) as soon as it is. */
  readonly settled?: (index: number, error: Error | null) => void;
  /** Whether an entry that failed transiently is still worth sending again (its caller waits). */
  readonly wanted?: (index: number) => boolean;
}

/**
 * applyEntries sends `indexes` with MutateRows and sends again only the entries that failed
 * transiently (their own status, or no status because the stream broke), with backoff, until
 * none is left or the deadline leaves no time for another attempt. Entries that failed for good
 * keep their error; an entry that failed transiently and then ran out of time keeps its transient
 * error rather than the deadline's, as withRetry does for whole calls.
 *
 * Throws only StoreErrors from before the first call (caller gone, deadline passed), and a caller
 * gone before a later one.
 */
export async function applyEntries(indexes: readonly number[], send: SendEntries, options: CallOptions, hooks: EntryHooks = {}): Promise<BatchOutcome> {
  const results = new Map<number, Error | null>();
  let answered = false;
  let pending = indexes;
  for (let attempt = 0; ; attempt++) {
    const statuses = new Map<number, protos.google.rpc.IStatus>();
    let callError: unknown;
    try {
      for await (const response of send(pending)) {
        for (const entry of response.entries ?? []) statuses.set(Number(entry.index), entry.status ?? {});
      }
    } catch (error) {
      // Out of time before a later attempt could start (a timer late on a busy process): the
      // entries sent again keep the transient error they failed with, as when the backoff finds no time.
      if (attempt > 0 && isStoreError(error) && error.code === 'DEADLINE_EXCEEDED') return { results, answered };
      if (isStoreError(error)) throw error;
      callError = error;
    }

    const retry: number[] = [];
    pending.forEach((index, position) => {
      const status = statuses.get(position);
      let error: Error | null;
      if (status === undefined) {
        error = callError === undefined ? statusError({ code: GrpcStatus.INTERNAL, message: 'MutateRows ended without a status for the entry' }) : asError(callError);
      } else {
        answered = true;
        error = (status.code ?? 0) === 0 ? null : statusError(status);
      }
      const previous = results.get(index);
      // Out of time after a transient failure: the transient failure is the news.
      results.set(index, error !== null && isDeadline(error) && previous && isTransient(previous) ? previous : error);
      // A RESOURCE_EXHAUSTED is retried only when it throttles (isTransient), not when storage is full.
      const retried = status === undefined || status.code === GrpcStatus.RESOURCE_EXHAUSTED ? error !== null && isTransient(error) : RETRIED_ENTRY_CODES.has(status.code ?? 0);
      if (error !== null && retried && (hooks.wanted?.(index) ?? true)) retry.push(index);
      else hooks.settled?.(index, results.get(index) ?? null);
    });
    if (retry.length === 0 || !(await backoff(attempt, options))) return { results, answered };
    pending = retry;
  }
}

function statusError(status: protos.google.rpc.IStatus): Error {
  return Object.assign(new Error(status.message ?? ''), { code: status.code ?? GrpcStatus.UNKNOWN });
}

function asError(error: unknown): Error {
  return error instanceof Error ? error : new Error(String(error));
}
