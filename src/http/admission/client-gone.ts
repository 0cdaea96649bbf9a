import type { Context } from 'koa';
import { whenClosed } from './response-closed.ts';

/**
 * clientGone returns a signal that aborts when the client disconnects before its response is
 * sent, so that work done only for it (store calls, their retries) can stop.
 */
export function clientGone(ctx: Pick<Context, 'res'>): AbortSignal {
  const controller = new AbortController();
  const { res } = ctx;
  if (res.destroyed) {
    controller.abort();
  } else {
    whenClosed(res, () => {
      if (!res.writableFinished) controller.abort();
    });
  }
  return controller.signal;
}
