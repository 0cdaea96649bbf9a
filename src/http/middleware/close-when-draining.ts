import type { Middleware } from 'koa';
import type { AppState } from '../app-state.ts';
import type { DrainState } from '../admission/drain-state.ts';

/**
 * closeWhenDraining answers with `Connection: close` once the process drains, so a keep-alive
 * client opens its next connection elsewhere (another replica) instead of sending a request on a
 * socket the server is about to close. Node closes the socket after such a response.
 */
export function closeWhenDraining(drain: DrainState): Middleware<AppState> {
  return async (ctx, next) => {
    try {
      await next();
    } finally {
      if (drain.draining) ctx.set('Connection', 'close');
    }
  };
}
