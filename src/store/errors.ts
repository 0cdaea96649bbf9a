import type { StoreCapabilities, StoreLimits, TableRef } from './store.ts';

/**
 * StoreErrorCode is the closed set of failure categories an adapter may report. Callers act on
 * the code (and, for NOT_FOUND and ALREADY_EXISTS, the resource), never on the message.
 */
export type StoreErrorCode =
  /** The named resource does not exist. `resource` and `name` say which. */
  | 'NOT_FOUND'
  /** The resource to create exists already. */
  | 'ALREADY_EXISTS'
  /**
   * The request is beyond what the backend accepts, found only by the backend (the service
   * checks the published limits first). `limit` names the StoreLimits field it broke.
   */
  | 'INVALID_ARGUMENT'
  /** The request needs what this store cannot do. `capability` names the StoreCapabilities field. */
  | 'UNIMPLEMENTED'
  /**
   * The row is not in the state the operation needs (an increment of a value that is not a
   * counter). `reason` says which; nothing was written.
   */
  | 'FAILED_PRECONDITION'
  /** A change feed's start is older than the store keeps changes. */
  | 'OUT_OF_RANGE'
  /** The backend cannot be reached or refused the call for now; retrying later may succeed. */
  | 'UNAVAILABLE'
  /** The call did not finish before its deadline. */
  | 'DEADLINE_EXCEEDED'
  /**
   * The backend is out of space for what the call would add: its disk is full, it is at its
   * memory limit and may not evict, or a storage quota is reached. Nothing was written. Reads and
   * deletes go on working; writes fail until an operator frees or adds space (retrying does not
   * help before then). Never a rate limit: a backend that throttles is UNAVAILABLE.
   */
  | 'RESOURCE_EXHAUSTED'
  /** Anything else: a bug, a misconfiguration, an answer the adapter did not expect. */
  | 'INTERNAL';

/** Why a FAILED_PRECONDITION: NOT_A_COUNTER, an increment of a value that is not 8 bytes. */
export type StoreFailedPrecondition = 'NOT_A_COUNTER';

/** The kinds of thing a NOT_FOUND or ALREADY_EXISTS error can name. */
export type StoreResource = 'instance' | 'table' | 'columnFamily';

export interface StoreErrorOptions {
  resource?: StoreResource;
  /** Name of the missing or existing resource, as the caller gave it. */
  name?: string;
  /** INVALID_ARGUMENT: the StoreLimits field the request broke. */
  limit?: keyof StoreLimits;
  /** UNIMPLEMENTED: the StoreCapabilities field the request needs. */
  capability?: keyof StoreCapabilities;
  /** FAILED_PRECONDITION: which state the row was in. */
  reason?: StoreFailedPrecondition;
  cause?: unknown;
}

/**
 * StoreError is the only error an adapter throws. Its message is for operators' logs; what a
 * caller sees is derived from code, resource and name alone.
 */
export class StoreError extends Error {
  readonly code: StoreErrorCode;
  readonly resource: StoreResource | undefined;
  readonly resourceName: string | undefined;
  readonly limit: keyof StoreLimits | undefined;
  readonly capability: keyof StoreCapabilities | undefined;
  readonly reason: StoreFailedPrecondition | undefined;

  constructor(code: StoreErrorCode, message: string, options: StoreErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'StoreError';
    this.code = code;
    this.resource = options.resource;
    this.resourceName = options.name;
    this.limit = options.limit;
    this.capability = options.capability;
    this.reason = options.reason;
  }
}

/**
 * callerGone is the error of a call stopped because its CallOptions.signal was aborted. Nobody
 * is left to read it; it is a DEADLINE_EXCEEDED so that the log says the call did not finish.
 */
export function callerGone(): StoreError {
  return new StoreError('DEADLINE_EXCEEDED', 'cancelled: the caller disconnected');
}

/** The NOT_FOUND of a table the instance does not have. */
export function tableNotFound(ref: TableRef): StoreError {
  return new StoreError('NOT_FOUND', `table ${ref.instance}/${ref.table} not found`, { resource: 'table', name: ref.table });
}

/** The ALREADY_EXISTS of a table to create that the instance has already. */
export function tableExists(ref: TableRef): StoreError {
  return new StoreError('ALREADY_EXISTS', `table ${ref.instance}/${ref.table} exists`, { resource: 'table', name: ref.table });
}

/** The NOT_FOUND of a column family the table does not have; `ref` names the table in the message when given. */
export function familyNotFound(family: string, ref?: TableRef): StoreError {
  const table = ref === undefined ? 'the table' : `table ${ref.instance}/${ref.table}`;
  return new StoreError('NOT_FOUND', `column family "${family}" not in ${table}`, { resource: 'columnFamily', name: family });
}

export function isStoreError(error: unknown, code?: StoreErrorCode): error is StoreError {
  return error instanceof StoreError && (code === undefined || error.code === code);
}

/** notACounter is the FAILED_PRECONDITION of an increment whose column holds a value that is not 8 bytes. */
export function notACounter(family: string, bytes: number): StoreError {
  return new StoreError('FAILED_PRECONDITION', `increment of a ${bytes}-byte value in family ${family}: a counter is 8 bytes`, { reason: 'NOT_A_COUNTER' });
}

/** unimplemented is the error of a call needing a capability this store does not publish. */
export function unimplemented(capability: keyof StoreCapabilities): StoreError {
  return new StoreError('UNIMPLEMENTED', `this store does not implement ${capability}`, { capability });
}

/** An iterable whose first next() fails with `error`: a feed or scan that cannot start. */
export function failing<T>(error: StoreError): AsyncIterable<T> {
  return {
    [Symbol.asyncIterator]: () => ({ next: () => Promise.reject(error) }),
  };
}
