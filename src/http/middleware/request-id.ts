import { randomUUID } from 'node:crypto';
import type { Middleware } from 'koa';
import type { AppState } from '../app-state.ts';

// A caller's id is reused only if it is short, printable ASCII: it is echoed in headers and logs.
const ACCEPTABLE_ID = /^[\x21-\x7e]{1,128}$/;

/**
 * requestId gives every request an id: the caller's `X-Request-Id` when acceptable, otherwise a
 * new UUID. It is echoed in the `X-Request-Id` response header and in problem documents.
 */
export function requestId(): Middleware<AppState> {
  return async (ctx, next) => {
    const incoming = ctx.get('X-Request-Id');
    ctx.state.requestId = ACCEPTABLE_ID.test(incoming) ? incoming : randomUUID();
    ctx.set('X-Request-Id', ctx.state.requestId);
    await next();
  };
}
