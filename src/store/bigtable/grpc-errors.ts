import { status as GrpcStatus } from '@grpc/grpc-js';
import { StoreError, type StoreErrorOptions } from '../errors.ts';
import { isCredentialFailure, isOutOfStorage } from '../grpc-answers.ts';

/** The gRPC status code of an error from the Bigtable client, if it carries one. */
export function grpcCode(error: unknown): number | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'number' ? code : undefined;
}

/** Codes for which the call may be repeated: the backend did not do the work, or may be retried. */
export function isTransient(error: unknown): boolean {
  const code = grpcCode(error);
  return code === GrpcStatus.UNAVAILABLE || (code === GrpcStatus.RESOURCE_EXHAUSTED && !outOfStorage(error));
}

/** A RESOURCE_EXHAUSTED that says storage is full, not a throttle (see isOutOfStorage). */
function outOfStorage(error: unknown): boolean {
  return grpcCode(error) === GrpcStatus.RESOURCE_EXHAUSTED && isOutOfStorage(error instanceof Error ? error.message : String(error));
}

/** Whether the call ran out of time (on the wire, or before it was made). */
export function isDeadline(error: unknown): boolean {
  return grpcCode(error) === GrpcStatus.DEADLINE_EXCEEDED || (error instanceof StoreError && error.code === 'DEADLINE_EXCEEDED');
}

/**
 * toStoreError maps a Bigtable client error to the store's closed set of codes. `subject` names
 * what a NOT_FOUND or ALREADY_EXISTS refers to in the failed call; the backend's own text goes
 * only into the message, for logs.
 */
export function toStoreError(error: unknown, operation: string, subject: StoreErrorOptions = {}): StoreError {
  if (error instanceof StoreError) return error;
  const code = grpcCode(error);
  const text = `bigtable ${operation}: ${error instanceof Error ? error.message : String(error)}`;
  const options = { ...subject, cause: error };
  switch (code) {
    case GrpcStatus.NOT_FOUND:
      return new StoreError('NOT_FOUND', text, options);
    case GrpcStatus.ALREADY_EXISTS:
      return new StoreError('ALREADY_EXISTS', text, options);
    case GrpcStatus.INVALID_ARGUMENT:
      // The service checks the published limits first; this is what the backend refused besides.
      return new StoreError('INVALID_ARGUMENT', text, { cause: error });
    case GrpcStatus.RESOURCE_EXHAUSTED:
      return new StoreError(outOfStorage(error) ? 'RESOURCE_EXHAUSTED' : 'UNAVAILABLE', text, { cause: error });
    case GrpcStatus.UNAVAILABLE:
      return new StoreError('UNAVAILABLE', text, { cause: error });
    case GrpcStatus.DEADLINE_EXCEEDED:
    case GrpcStatus.CANCELLED:
      return new StoreError('DEADLINE_EXCEEDED', text, { cause: error });
    default:
      return new StoreError(isCredentialFailure(text) ? 'UNAVAILABLE' : 'INTERNAL', text, { cause: error });
  }
}
