import type { Middleware } from 'koa';
import { ApiError } from '../../service/errors.ts';
import type { AppState } from '../app-state.ts';

export interface LoadSheddingOptions {
  /** Most requests handled at once; the next one is refused at once. */
  readonly maxInflight: number;
  /** Requests never refused nor counted, such as the probes: an overloaded pod is still alive. */
  readonly exempt: (path: string) => boolean;
}

/**
 * loadShedding bounds the requests in flight. Past the bound a request is answered at once with
 * 503 OVERLOADED and `Retry-After` (set by the problem responder) instead of waiting in a queue
 * that has no limit: under overload the callers' retries, spread by their backoff, are cheaper
 * for everyone than requests that time out after holding memory and sockets.
 */
export function loadShedding(options: LoadSheddingOptions): Middleware<AppState> {
  let inflight = 0;
  return async (ctx, next) => {
    if (options.exempt(ctx.path)) {
      await next();
      return;
    }
    if (inflight >= options.maxInflight) {
      throw new ApiError('OVERLOADED', `The service is handling ${options.maxInflight} requests, its limit. Retry shortly.`);
    }
    inflight += 1;
    try {
      await next();
    } finally {
      inflight -= 1;
    }
  };
}
