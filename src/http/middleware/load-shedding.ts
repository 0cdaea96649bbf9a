import type { Middleware } from 'koa';
import { ApiError } from '../../service/errors.ts';
import type { AppState } from '../app-state.ts';
import { callerKey } from '../admission/caller-key.ts';
import type { InflightLimits } from '../admission/inflight-limits.ts';

/**
 * loadShedding bounds the requests in flight: `limits.total` in all (MAX_INFLIGHT) and, once the
 * service is near that limit (`limits.perKeyFrom`), `limits.perKey` for one caller
 * (MAX_INFLIGHT_PER_CALLER), so that one caller cannot take every slot yet is not refused while
 * the service has room. It runs after authentication, so a request counts only once its caller is known (a
 * credential being checked counts against the separate, smaller budget of authenticate). Past a
 * bound a request is answered at once instead of waiting in a queue that has no limit: 429
 * RATE_LIMITED for a caller over its own bound, 503 OVERLOADED when the service is full, both
 * with `Retry-After` (set by the problem responder). Under overload the callers' retries, spread
 * by their backoff, are cheaper for everyone than requests that time out after holding memory
 * and sockets.
 */
export function loadShedding(limits: InflightLimits): Middleware<AppState> {
  return async (ctx, next) => {
    const key = callerKey(ctx);
    const refused = limits.acquire(key);
    if (refused === 'key') {
      ctx.state.shedBy = 'inflight_per_caller';
      throw new ApiError(
        'RATE_LIMITED',
        `The service is near its limit of ${limits.total} requests in flight, and this caller has ${limits.inflightFor(key)}, more than its share of ${limits.perKey}. Retry shortly.`,
      );
    }
    if (refused === 'total') {
      ctx.state.shedBy = 'inflight';
      throw new ApiError('OVERLOADED', `The service is handling ${limits.total} requests, its limit. Retry shortly.`);
    }
    try {
      await next();
    } finally {
      limits.release(key);
    }
  };
}
