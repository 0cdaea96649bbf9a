import type { Router, RouterContext, RouterMiddleware } from '@koa/router';
import type Joi from 'joi';
import type { Middleware } from 'koa';
import type { AppState } from '../app-state.ts';
import { clientGone } from '../admission/client-gone.ts';
import type { BodyBudget } from '../admission/body-budget.ts';
import { setJsonAnswer } from '../json/json-answer.ts';
import { jsonBody } from '../middleware/json-body.ts';
import { ApiError, ShedError } from '../../service/errors.ts';
import { callerKey } from '../admission/caller-key.ts';
import { StreamedAnswer } from './streamed-answer.ts';
import { QUERY_LIMITS, parseQuery } from '../validation/query.ts';
import type { Operation, Services } from './operation.ts';

export interface RegistrationOptions {
  readonly services: Services;
  readonly maxBodyBytes: number;
  /** Least rate a body must arrive at after a grace second (0: none); slower: 408 REQUEST_TIMEOUT. */
  readonly minBodyBytesPerSecond?: number;
  /** The bytes of large bodies read and handled at once, shared by all the operations of the app. */
  readonly bodyBudget?: BodyBudget;
  readonly authenticate: Middleware<AppState>;
  readonly rateLimit?: Middleware<AppState> | undefined;
  /**
   * The checks of an operation that run after authentication and rate limiting and before the
   * body is read: authorization, and whether the store and instance are served.
   */
  readonly guards: (operation: Operation) => ReadonlyArray<RouterMiddleware<AppState>>;
  /** The path parameters the operation gets; the router's (percent-decoded) by default. */
  readonly pathParams?: (ctx: RouterContext<AppState>, operation: Operation) => Record<string, string>;
}

/**
 * registerOperations serves each operation on the router. For each request: the caller is
 * authenticated first (401) and counted against the in-flight bounds (`authenticate` does both),
 * then rate limited if configured (429), then the operation's guards
 * run (403, 404), then the body's media type, size and rate are checked, then the input is validated,
 * and only then does the operation run. Nothing about a request is looked at for a caller who
 * may not make it.
 */
export function registerOperations(router: Router<AppState>, operations: readonly Operation[], options: RegistrationOptions): void {
  const body = jsonBody({
    limitBytes: options.maxBodyBytes,
    minBytesPerSecond: options.minBodyBytesPerSecond ?? 0,
    ...(options.bodyBudget === undefined ? {} : { budget: options.bodyBudget }),
  });
  const pathParams = options.pathParams ?? ((ctx: RouterContext<AppState>) => ctx.params);
  for (const operation of operations) {
    const lists = listParameters(operation.query);
    const handler: RouterMiddleware<AppState> = async (ctx) => {
      let result: unknown;
      try {
        const raw = {
          params: pathParams(ctx, operation),
          query: operation.query === undefined ? {} : parseQuery(ctx.querystring, QUERY_LIMITS, lists),
          body: ctx.request.body,
        };
        result = await operation.run(raw, {
          services: options.services,
          signal: clientGone(ctx),
          caller: ctx.state.caller,
          answer: ctx.state.answer,
          header: (name) => ctx.get(name),
          callerKey: callerKey(ctx),
        });
      } catch (error) {
        // Refused by a bound of the service (the change feeds'): counted as shed, by that bound.
        if (error instanceof ShedError) ctx.state.shedBy ??= error.limit;
        throw operation.body || !sentBody(ctx) ? error : withQueryHint(error, operation);
      }
      ctx.status = operation.success.status;
      if (result instanceof StreamedAnswer) result.send(ctx);
      else if (result !== undefined) setJsonAnswer(ctx, result);
    };
    const limited = options.rateLimit === undefined ? [] : [options.rateLimit];
    const chain = [options.authenticate, ...limited, ...options.guards(operation), ...(operation.body ? [body] : []), handler];
    router[operation.method](routePath(operation.path), ...chain);
  }
}

/** Whether the request came with a body (which an operation without one never reads). */
function sentBody(ctx: RouterContext<AppState>): boolean {
  return (ctx.request.length ?? 0) > 0 || ctx.get('transfer-encoding') !== '';
}

/**
 * A VALIDATION_FAILED of an operation that takes no body, for a request that sent one: most
 * likely its parameters went into the body, so the detail says where they belong.
 */
function withQueryHint(error: unknown, operation: Operation): unknown {
  if (!(error instanceof ApiError) || error.code !== 'VALIDATION_FAILED') return error;
  const names = Object.keys((operation.query?.describe().keys ?? {}) as Record<string, unknown>);
  const where = names.length === 0 ? 'in its path' : `in the query string (?${names.map((name) => `${name}=…`).join('&')})`;
  return new ApiError(
    'VALIDATION_FAILED',
    `${error.detail} ${operation.method.toUpperCase()} ${operation.path} takes its parameters ${where}; the request's body is not read.`,
    error.extensions,
    error.cause,
  );
}

/** The router's path of an OpenAPI template: `{name}` is a parameter, a literal `:` is escaped. */
export function routePath(template: string): string {
  return template.replaceAll(':', '\\:').replace(/\{(\w+)\}/g, ':$1');
}

/** The query parameters whose schema is an array: comma-separated lists on the wire. */
function listParameters(schema: Joi.ObjectSchema | undefined): ReadonlySet<string> {
  if (schema === undefined) return new Set();
  const keys = (schema.describe() as { keys?: Record<string, { type?: string }> }).keys ?? {};
  return new Set(Object.entries(keys).flatMap(([name, key]) => (key.type === 'array' ? [name] : [])));
}
