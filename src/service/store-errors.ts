import type { StoreError } from '../store/errors.ts';
import { ApiError } from './errors.ts';

const INTERNAL_DETAIL = 'The service failed unexpectedly. Report the requestId to the operators.';
const STORAGE_DETAIL = 'The data store is out of space: nothing was written. Reads still work; writes fail until the operators free or add space.';

/**
 * apiErrorOf is what a caller sees of a store's failure: the category of the StoreError and the
 * name of the resource it concerns, never the backend's message. The StoreError stays the cause,
 * for the log.
 */
export function apiErrorOf(error: StoreError): ApiError {
  const name = error.resourceName ?? '';
  switch (error.code) {
    case 'NOT_FOUND':
      if (error.resource === 'columnFamily') {
        return new ApiError('COLUMN_FAMILY_NOT_FOUND', `Column family "${name}" does not exist in the table. Nothing was written.`, {}, error);
      }
      if (error.resource === 'instance') {
        return new ApiError('INSTANCE_NOT_FOUND', `Instance "${name}" does not exist in the data store.`, {}, error);
      }
      return new ApiError('TABLE_NOT_FOUND', `Table "${name}" does not exist in the instance.`, {}, error);
    case 'ALREADY_EXISTS':
      return new ApiError('TABLE_ALREADY_EXISTS', `Table "${name}" already exists in the instance.`, {}, error);
    case 'UNAVAILABLE':
      return new ApiError('BACKEND_UNAVAILABLE', 'The data store is unavailable. Retry later.', {}, error);
    case 'DEADLINE_EXCEEDED':
      return new ApiError('DEADLINE_EXCEEDED', 'The data store did not answer in time.', {}, error);
    case 'RESOURCE_EXHAUSTED':
      return new ApiError('INSUFFICIENT_STORAGE', STORAGE_DETAIL, {}, error);
    // The service checks the published limits first; this is a bound only the backend knew.
    case 'INVALID_ARGUMENT':
      return new ApiError(
        'VALIDATION_FAILED',
        `The request is beyond what the data store accepts${error.limit === undefined ? '' : ` (limit ${error.limit})`}.`,
        { ...(error.limit === undefined ? {} : { limit: error.limit }), errors: [{ path: '', message: 'beyond what the data store accepts' }] },
        error,
      );
    case 'UNIMPLEMENTED':
      return new ApiError(
        'NOT_SUPPORTED_BY_STORE',
        `The data store cannot do what the request asks${error.capability === undefined ? '' : ` (capability ${error.capability})`}.`,
        error.capability === undefined ? {} : { capability: error.capability },
        error,
      );
    case 'FAILED_PRECONDITION':
      return new ApiError('NOT_A_COUNTER', 'An increment names a column whose latest value is not an 8-byte counter. Nothing was written.', {}, error);
    case 'OUT_OF_RANGE':
      return new ApiError('CURSOR_EXPIRED', 'The feed position is older than the store keeps changes. Start again from now, and read the table anew.', {}, error);
    case 'INTERNAL':
      return new ApiError('INTERNAL', INTERNAL_DETAIL, {}, error);
  }
}

export { INTERNAL_DETAIL };
