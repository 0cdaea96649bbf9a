import type { Middleware } from 'koa';
import { ApiError } from '../../service/errors.ts';
import type { AppState } from '../app-state.ts';
import { callerKey } from '../admission/caller-key.ts';
import { TokenBuckets } from '../admission/token-buckets.ts';

export interface RateLimitOptions {
  /** Requests per second each caller may make on average; also the burst it may make at once. */
  readonly perSecond: number;
  /** The clock, in milliseconds; tests pass their own. */
  readonly now?: () => number;
}

/**
 * rateLimit gives each caller a token bucket of `perSecond` tokens, refilled at `perSecond` a
 * second; a request takes one, and a caller whose bucket is empty gets 429 RATE_LIMITED with
 * `Retry-After`, the whole seconds until a token is back. The caller is the authenticated
 * principal (authentication must run before this) or, for anonymous requests, the client's
 * address (see callerKey).
 */
export function rateLimit(options: RateLimitOptions): Middleware<AppState> {
  const buckets = new TokenBuckets({ ratePerSecond: options.perSecond, capacity: options.perSecond, now: options.now });
  return async (ctx, next) => {
    const waitMs = buckets.take(callerKey(ctx));
    if (waitMs > 0) {
      ctx.state.shedBy = 'rate_limit';
      ctx.set('Retry-After', String(Math.max(1, Math.ceil(waitMs / 1000))));
      throw new ApiError('RATE_LIMITED', `More than ${options.perSecond} requests per second. Retry after the Retry-After delay.`);
    }
    await next();
  };
}
