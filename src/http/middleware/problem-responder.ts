import type { IncomingMessage } from 'node:http';
import type { Middleware } from 'koa';
import { ApiError } from '../../service/errors.ts';
import type { AppState } from '../app-state.ts';
import { toProblem } from '../problems.ts';
import { routeHint } from '../routes/route-hints.ts';

/** Seconds a caller should wait before retrying after a 503 (or a 429 that did not say). */
const RETRY_AFTER_SECONDS = 1;
/** After a 507: space comes back only when an operator frees or adds some, not in a second. */
const STORAGE_RETRY_AFTER_SECONDS = 30;

/**
 * problemResponder is the one place errors become responses: whatever a later middleware throws
 * is answered as an RFC 9457 `application/problem+json` document. The code and what was thrown
 * are left in ctx.state.problem, so the request's log line and span carry the cause while the
 * caller sees only the code. Requests nothing answered (unknown path, or a path without this
 * method) get problems too.
 */
export function problemResponder(): Middleware<AppState> {
  return async (ctx, next) => {
    try {
      await next();
      if (ctx.body === undefined || ctx.body === null) {
        throwForUnanswered(ctx.status, ctx.method, ctx.path, ctx.response.get('Allow'));
      }
    } catch (error) {
      const problem = toProblem(error, { path: ctx.path, requestId: ctx.state.requestId });
      ctx.status = problem.status;
      ctx.type = 'application/problem+json';
      ctx.body = problem;
      // A 429 carries the delay its rate limiter computed; a 503 gets the fixed one.
      if (problem.status === 503 || (problem.status === 429 && ctx.response.headers['retry-after'] === undefined)) {
        ctx.set('Retry-After', String(RETRY_AFTER_SECONDS));
      }
      if (problem.status === 507) ctx.set('Retry-After', String(STORAGE_RETRY_AFTER_SECONDS));
      // A body refused before it was read would otherwise be read to its end and thrown away, for
      // as long as the client takes to send it: the connection is closed instead.
      if (hasBody(ctx.req) && !ctx.req.complete) ctx.set('Connection', 'close');
      ctx.state.problem = { code: problem.code, cause: error };
    }
  };
}

// The router leaves 405 (known path, other method) or 501 (a method no route has) without a body.
function throwForUnanswered(status: number, method: string, path: string, allow: string): void {
  if ((status === 405 || status === 501) && allow !== '') {
    throw new ApiError('METHOD_NOT_ALLOWED', `${method} is not allowed on ${path}; allowed: ${allow}.`);
  }
  if (status === 404 || status === 405 || status === 501) {
    const hint = routeHint(path);
    throw new ApiError('ROUTE_NOT_FOUND', `No endpoint at ${path}.${hint === undefined ? '' : ` ${hint}`}`);
  }
}

function hasBody(request: IncomingMessage): boolean {
  return request.headers['transfer-encoding'] !== undefined || Number(request.headers['content-length'] ?? 0) > 0;
}
