import { setTimeout as sleep } from 'node:timers/promises';
import type { protos } from '@google-cloud/bigtable';
import { Metadata } from '@grpc/grpc-js';
import pRetry, { AbortError } from 'p-retry';
import { StoreError, type StoreResource, callerGone } from '../errors.ts';
import type { CallOptions } from '../store.ts';
import { isDeadline, isTransient, toStoreError } from './grpc-errors.ts';

type ReadRowsResponse = protos.google.bigtable.v2.IReadRowsResponse;
type MutateRowsResponse = protos.google.bigtable.v2.IMutateRowsResponse;
type CheckAndMutateRowResponse = protos.google.bigtable.v2.ICheckAndMutateRowResponse;
type ReadModifyWriteRowResponse = protos.google.bigtable.v2.IReadModifyWriteRowResponse;
type GenerateInitialChangeStreamPartitionsResponse = protos.google.bigtable.v2.IGenerateInitialChangeStreamPartitionsResponse;
type ReadChangeStreamResponse = protos.google.bigtable.v2.IReadChangeStreamResponse;

// Retry backoff for transient failures, bounded by each call's deadline.
export const RETRY_MIN_MS = 20;
const RETRY_MAX_MS = 250;

/** A server-streaming call on the bare stub: a readable of responses that can be cancelled. */
export type ServerStream<Response> = AsyncIterable<Response> & Pick<NodeJS.EventEmitter, 'on'> & Pick<NodeJS.ReadableStream, 'pause' | 'resume'> & { cancel(): void };

/**
 * How a method of the generated client's stub encodes its messages: grpc-js attaches the method's
 * definition to it, whose (de)serializers are plain functions that need no `this`.
 */
export interface MethodCodec<Request, Response> {
  readonly path: string;
  readonly requestSerialize: (request: Request) => Buffer;
  readonly responseDeserialize: (message: Buffer) => Response;
}

/**
 * The part of the generated client's gRPC stub (a grpc-js Client) that the store calls directly.
 * Calls go through the Client's generic methods with requests the store encodes, and ReadRows
 * answers it decodes, itself: a slice at a time (mutation-requests.ts, read-rows-messages.ts).
 */
export interface BigtableStub {
  readonly readRows: MethodCodec<object, ReadRowsResponse>;
  readonly mutateRow: MethodCodec<object, object>;
  readonly mutateRows: MethodCodec<object, MutateRowsResponse>;
  readonly checkAndMutateRow: MethodCodec<object, CheckAndMutateRowResponse>;
  readonly readModifyWriteRow: MethodCodec<object, ReadModifyWriteRowResponse>;
  readonly generateInitialChangeStreamPartitions: MethodCodec<object, GenerateInitialChangeStreamPartitionsResponse>;
  readonly readChangeStream: MethodCodec<object, ReadChangeStreamResponse>;
  makeUnaryRequest<Request, Response>(
    path: string,
    serialize: (request: Request) => Buffer,
    deserialize: (message: Buffer) => Response,
    request: Request,
    metadata: Metadata,
    options: GrpcCallOptions,
    callback: (error: Error | null, response?: Response) => void,
  ): { cancel(): void };
  makeServerStreamRequest<Request, Response>(
    path: string,
    serialize: (request: Request) => Buffer,
    deserialize: (message: Buffer) => Response,
    request: Request,
    metadata: Metadata,
    options: GrpcCallOptions,
  ): ServerStream<Response>;
}

/** The (de)serializer of a message the store has encoded, or will decode, itself. */
export function asIs(message: Buffer): Buffer {
  return message;
}

export interface GrpcCallOptions {
  readonly deadline: number;
}

/** Fails at once when the caller has gone or the deadline has passed: no call is started then. */
export function checkCallable(options: CallOptions): void {
  if (options.signal?.aborted === true) throw callerGone();
  if (options.deadline <= Date.now()) throw new StoreError('DEADLINE_EXCEEDED', 'deadline passed before the call was made');
}

/**
 * Per-call settings for the generated clients' gax methods: the time left until the deadline, and
 * no retries of their own (withRetry decides, knowing which calls are safe to repeat). Streaming
 * calls have a second retry layer (retry-request), which would repeat even a NOT_FOUND for
 * seconds. The caller's signal cancels unary calls (gax supports it).
 */
export function gaxOptions(options: CallOptions) {
  checkCallable(options);
  return {
    timeout: options.deadline - Date.now(),
    retry: null,
    retryRequestOptions: { retries: 0, noResponseRetries: 0 },
    ...(options.signal === undefined ? {} : { signal: options.signal }),
  };
}

/** Call settings for the bare stub: what gaxOptions gives gax, for grpc-js itself. */
export function grpcOptions(options: CallOptions): GrpcCallOptions {
  checkCallable(options);
  return { deadline: options.deadline };
}

/** The routing header gax would add: Bigtable routes a request by the table it names. */
export function routingHeader(tableName: string): Metadata {
  const metadata = new Metadata();
  metadata.set('x-goog-request-params', `table_name=${encodeURIComponent(tableName)}`);
  return metadata;
}

export interface Subject {
  readonly resource: StoreResource;
  readonly name: string;
}

/**
 * withRetry runs an idempotent call, repeating it after transient failures until it succeeds or
 * the deadline passes, and converts the final error to a StoreError. A backend that stays
 * unreachable thus reports UNAVAILABLE (its last answer) rather than a bare deadline.
 */
export async function withRetry<T>(options: CallOptions, operation: string, subject: Subject, call: () => Promise<T>): Promise<T> {
  let lastTransient: Error | undefined;
  try {
    return await pRetry(
      async () => {
        // Once the backend has failed transiently, running out of time on a later attempt (in the
        // backoff, or while reconnecting) still means it was unavailable: report its last answer.
        if (lastTransient !== undefined && options.deadline <= Date.now()) throw new AbortError(lastTransient);
        try {
          return await call();
        } catch (error) {
          const failure = error instanceof Error ? error : new Error(String(error));
          if (isTransient(failure) && options.deadline - Date.now() > RETRY_MIN_MS) {
            lastTransient = failure;
            throw failure;
          }
          throw new AbortError(lastTransient !== undefined && isDeadline(failure) ? lastTransient : failure);
        }
      },
      {
        retries: Number.POSITIVE_INFINITY,
        minTimeout: RETRY_MIN_MS,
        maxTimeout: RETRY_MAX_MS,
        maxRetryTime: Math.max(0, options.deadline - Date.now()),
        // A caller that has gone stops the retries (and the backoff wait) at once.
        ...(options.signal === undefined ? {} : { signal: options.signal }),
      },
    );
  } catch (error) {
    if (options.signal?.aborted === true) throw callerGone();
    throw toStoreError(error, operation, subject);
  }
}

/**
 * backoff waits before retry number `attempt` (0 first), as withRetry does: exponential from
 * RETRY_MIN_MS, capped at RETRY_MAX_MS, never past the deadline. Returns false, without waiting,
 * when no time is left for another attempt. A caller that goes ends the wait with callerGone().
 */
export async function backoff(attempt: number, options: CallOptions): Promise<boolean> {
  const left = options.deadline - Date.now();
  if (left <= RETRY_MIN_MS) return false;
  const delay = Math.min(RETRY_MAX_MS, RETRY_MIN_MS * 2 ** attempt, left - RETRY_MIN_MS);
  try {
    await sleep(delay, undefined, options.signal === undefined ? {} : { signal: options.signal });
  } catch {
    throw callerGone();
  }
  return true;
}

/**
 * unaryOf makes a unary call on the bare stub: resolves with its answer, rejects with the
 * backend's own error, and cancels the gRPC call when the caller's signal aborts (the call then
 * fails with CANCELLED, which withRetry reports as callerGone()).
 */
export function unaryOf<Response>(start: (callback: (error: Error | null, response?: Response) => void) => { cancel(): void }, options: CallOptions): Promise<Response | undefined> {
  return new Promise((resolve, reject) => {
    const cancel = () => call.cancel();
    const call = start((error, response) => {
      options.signal?.removeEventListener('abort', cancel);
      if (error) reject(error);
      else resolve(response);
    });
    options.signal?.addEventListener('abort', cancel, { once: true });
  });
}

/**
 * streamOf starts a server-streaming call and yields its responses; it cancels the gRPC call when
 * the caller's signal aborts (then throwing callerGone()) and when the consumer stops early.
 * Errors are the backend's own (for isTransient and toStoreError).
 */
export async function* streamOf<Response>(start: () => ServerStream<Response>, options: CallOptions): AsyncGenerator<Response> {
  const call = start();
  const cancel = () => call.cancel();
  options.signal?.addEventListener('abort', cancel, { once: true });
  try {
    yield* call;
  } catch (error) {
    if (options.signal?.aborted === true) throw callerGone();
    throw error;
  } finally {
    options.signal?.removeEventListener('abort', cancel);
    // A no-op once the call has ended; otherwise it stops the server sending what nobody reads.
    call.cancel();
  }
}
