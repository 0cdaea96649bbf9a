import type { CallOptions } from '../store/store.ts';
import type { AnswerHold } from './answer-budget.ts';

/** What the service needs to know about the request it works for. */
export interface RequestOptions {
  /** Aborted when the caller has gone: store calls are then cancelled rather than finished. */
  readonly signal?: AbortSignal | undefined;
  /** The request's share of the answer budget, which the rows its answer holds are taken from; none: not counted. */
  readonly answer?: AnswerHold | undefined;
}

/** The options of one store call made now: its deadline `timeoutMs` from now, and the caller's signal. */
export function callOptions(timeoutMs: number, request: RequestOptions): CallOptions {
  const deadline = Date.now() + timeoutMs;
  return request.signal === undefined ? { deadline } : { deadline, signal: request.signal };
}
