import type { CallOptions } from '../store/store.ts';

/** What the service needs to know about the request it works for. */
export interface RequestOptions {
  /** Aborted when the caller has gone: store calls are then cancelled rather than finished. */
  readonly signal?: AbortSignal | undefined;
}

/** The options of one store call made now: its deadline `timeoutMs` from now, and the caller's signal. */
export function callOptions(timeoutMs: number, request: RequestOptions): CallOptions {
  const deadline = Date.now() + timeoutMs;
  return request.signal === undefined ? { deadline } : { deadline, signal: request.signal };
}
