import {
  ClientClosedError,
  ClientOfflineError,
  ConnectionTimeoutError,
  DisconnectsClientError,
  ErrorReply,
  ReconnectStrategyError,
  RootNodesUnavailableError,
  SocketClosedUnexpectedlyError,
  SocketTimeoutError,
} from 'redis';
import { StoreError } from '../errors.ts';

/**
 * Error replies that mean "not now": Redis is loading its data, busy with a script, a replica
 * without its primary, or a cluster re-sharding. Retrying later may succeed.
 */
const TRANSIENT_REPLIES = /^(LOADING|BUSY|MASTERDOWN|READONLY|CLUSTERDOWN|TRYAGAIN|MOVED|ASK|NOREPLICAS)\b/;

/**
 * "OOM command not allowed when used memory > 'maxmemory'": Redis at its memory limit with a
 * policy that does not evict (noeviction, or volatile-* with nothing left to evict). It refuses
 * writes until memory is freed or the limit raised; reads and deletes still work.
 */
const OUT_OF_MEMORY_REPLY = /^OOM\b/;

/**
 * toStoreError maps a node-redis error to the store's closed set of codes. Errors from the client
 * itself (offline, socket closed, connection timeout) mean Redis could not be reached; error
 * replies are Redis refusing the command. The text goes only into the message, for logs.
 */
export function toStoreError(error: unknown, operation: string): StoreError {
  if (error instanceof StoreError) return error;
  const text = `redis ${operation}: ${error instanceof Error ? error.message : String(error)}`;
  if (error instanceof ErrorReply) {
    if (TRANSIENT_REPLIES.test(error.message)) return new StoreError('UNAVAILABLE', text, { cause: error });
    if (OUT_OF_MEMORY_REPLY.test(error.message)) return new StoreError('RESOURCE_EXHAUSTED', text, { cause: error });
    // NOAUTH / WRONGPASS: the AUTH string is wrong or missing; the operator must act.
    return new StoreError('INTERNAL', text, { cause: error });
  }
  if (CLIENT_UNAVAILABLE.some((type) => error instanceof type)) {
    return new StoreError('UNAVAILABLE', text, { cause: error });
  }
  if (isNodeSocketError(error)) return new StoreError('UNAVAILABLE', text, { cause: error });
  return new StoreError('INTERNAL', text, { cause: error });
}

const CLIENT_UNAVAILABLE: ReadonlyArray<abstract new (...args: never[]) => Error> = [
  ClientOfflineError,
  ClientClosedError,
  SocketClosedUnexpectedlyError,
  ConnectionTimeoutError,
  SocketTimeoutError,
  ReconnectStrategyError,
  DisconnectsClientError,
  RootNodesUnavailableError,
];

function isNodeSocketError(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && /^(ECONNREFUSED|ECONNRESET|EPIPE|ETIMEDOUT|EHOSTUNREACH|ENOTFOUND|EAI_AGAIN)$/.test(code);
}
