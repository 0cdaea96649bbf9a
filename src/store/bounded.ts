import { StoreError, callerGone } from './errors.ts';
import type { CallOptions } from './store.ts';

/** What a driver tells bounded about one call. */
export interface BoundedCall {
  /** The driver's name, first in the messages: "redis readRows: no answer before the deadline". */
  readonly store: string;
  /** The DataStore method the call serves. */
  readonly operation: string;
  /** The driver's StoreError for what the work failed with. */
  readonly toStoreError: (error: unknown) => StoreError;
  /** A reason to refuse the call before it starts (a backend known to be unreachable), as its StoreError; undefined to go ahead. */
  readonly refuse?: () => StoreError | undefined;
  /**
   * Asked when the deadline passes before the work settles: the StoreError to fail with instead
   * of DEADLINE_EXCEEDED when the call cannot have reached the backend yet (its client still
   * starting); undefined for DEADLINE_EXCEEDED.
   */
  readonly unreached?: () => StoreError | undefined;
  /** Called when the deadline passes before the work settles and the call fails with DEADLINE_EXCEEDED (the driver may then doubt its connection). */
  readonly onTimeout?: () => void;
}

/** The DEADLINE_EXCEEDED of a call of `store` that had no answer in time. */
export function deadlineExceeded(store: string, operation: string): StoreError {
  return new StoreError('DEADLINE_EXCEEDED', `${store} ${operation}: no answer before the deadline`);
}

/**
 * bounded runs `work` within the call's deadline and for as long as its caller is there. It
 * settles with the work's value, or fails with DEADLINE_EXCEEDED once the deadline passes,
 * callerGone() once the signal aborts, or the driver's StoreError for the work's failure,
 * whichever comes first. A call whose deadline has passed, whose caller has gone or that
 * `refuse` refuses does not start its work. Work that loses the race is left to finish: the
 * driver's client cannot always stop it.
 */
export function bounded<T>(options: CallOptions, call: BoundedCall, work: () => Promise<T>): Promise<T> {
  const left = options.deadline - Date.now();
  if (options.signal?.aborted === true) return Promise.reject(callerGone());
  if (left <= 0) return Promise.reject(deadlineExceeded(call.store, call.operation));
  const refusal = call.refuse?.();
  if (refusal !== undefined) return Promise.reject(refusal);
  return new Promise<T>((resolve, reject) => {
    const { signal } = options;
    const onAbort = () => {
      clearTimeout(timer);
      reject(callerGone());
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      const instead = call.unreached?.();
      if (instead !== undefined) {
        reject(instead);
        return;
      }
      call.onTimeout?.();
      reject(deadlineExceeded(call.store, call.operation));
    }, left);
    signal?.addEventListener('abort', onAbort, { once: true });
    work().then(
      (value) => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (error: unknown) => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        reject(call.toStoreError(error));
      },
    );
  });
}
