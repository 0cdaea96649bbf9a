import { status as GrpcStatus } from '@grpc/grpc-js';
import { StoreError } from '../errors.ts';
import { isCredentialFailure, isOutOfStorage } from '../grpc-answers.ts';

/** The gRPC status code of an error from the Spanner client, if it carries one. */
export function grpcCode(error: unknown): number | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'number' ? code : undefined;
}

/**
 * toStoreError maps a Spanner client error to the store's closed set of codes. NOT_FOUND and
 * ALREADY_EXISTS from Spanner name its own resources (a database, a session), never a kvcrud
 * table: the store finds those in its catalog. So they are not passed on as such.
 */
export function toStoreError(error: unknown, operation: string): StoreError {
  if (error instanceof StoreError) return error;
  const code = grpcCode(error);
  const text = `spanner ${operation}: ${error instanceof Error ? error.message : String(error)}`;
  switch (code) {
    case GrpcStatus.RESOURCE_EXHAUSTED:
      // Storage that is full, or (sessions, memory, quotas of requests) a throttle: see isOutOfStorage.
      return new StoreError(isOutOfStorage(text) ? 'RESOURCE_EXHAUSTED' : 'UNAVAILABLE', text, { cause: error });
    case GrpcStatus.UNAVAILABLE:
    case GrpcStatus.ABORTED: // still aborted when the client's own retries ran out of time
      return new StoreError('UNAVAILABLE', text, { cause: error });
    case GrpcStatus.DEADLINE_EXCEEDED:
    case GrpcStatus.CANCELLED:
      return new StoreError('DEADLINE_EXCEEDED', text, { cause: error });
    case GrpcStatus.NOT_FOUND:
      // The database (or the Spanner instance) is gone: the store cannot serve until it is back.
      return new StoreError('UNAVAILABLE', text, { cause: error });
    default:
      return new StoreError(isCredentialFailure(text) ? 'UNAVAILABLE' : 'INTERNAL', text, { cause: error });
  }
}
