import type { ServerResponse } from 'node:http';
import { context, isSpanContextValid, trace } from '@opentelemetry/api';
import { RPCType, getRPCMetadata, parseTraceParent } from '@opentelemetry/core';
import type { Context, Middleware } from 'koa';
import type { Level, Logger } from 'pino';
import { UNMATCHED_ROUTE, type Metrics } from '../../telemetry/metrics.ts';
import type { AppState } from '../app-state.ts';
import { whenClosed } from '../admission/response-closed.ts';

/** 5xx codes the service gives by design rather than because something failed. */
const EXPECTED_5XX: ReadonlySet<string> = new Set(['OVERLOADED', 'SHUTTING_DOWN']);

/** Probes and scrapes: logged at debug level while they succeed, so they do not drown the log. */
const ROUTINE_ROUTES: ReadonlySet<string> = new Set(['/healthz', '/readyz', '/metrics']);

export interface RequestTelemetryOptions {
  readonly logger: Logger;
  readonly metrics: Pick<Metrics, 'httpRequestDuration' | 'httpRequestsInFlight' | 'httpRequestsShed'>;
}

/**
 * requestTelemetry reports every request once it is answered: one JSON log line, one sample of
 * the request-duration histogram, and, when tracing is on, the route and failure on the server
 * span (started by the HTTP instrumentation before the request reached Koa). Routes are the
 * router's templates (`/v1/:instanceID/readCellData`), never raw paths, so table names and row
 * keys never become label values; nothing of the body, the query or the headers is logged.
 *
 * It must run after requestId and before problemResponder, which leaves the failure in
 * ctx.state.problem.
 */
export function requestTelemetry({ logger, metrics }: RequestTelemetryOptions): Middleware<AppState> {
  return async (ctx, next) => {
    const started = performance.now();
    const ids = traceIds(ctx);
    metrics.httpRequestsInFlight.inc();
    onResponseEnd(ctx.res, (aborted) => {
      const durationMs = performance.now() - started;
      const route = routeTemplate(ctx);
      metrics.httpRequestsInFlight.dec();
      // The store once the request is known to be served by one (never for probes, scrapes or refusals before that).
      const labels = { method: ctx.method, route, status_code: String(ctx.status) };
      metrics.httpRequestDuration.observe(ctx.state.store === undefined ? labels : { ...labels, store: ctx.state.store }, durationMs / 1000);

      if (ctx.state.shedBy !== undefined) metrics.httpRequestsShed.inc({ limit: ctx.state.shedBy });
      logRequest(logger, ctx, { route, durationMs, aborted, ids });
    });
    try {
      await next();
    } finally {
      // Before Koa writes the response: the HTTP instrumentation reads the route when it ends the span.
      annotateServerSpan(ctx);
    }
  };
}

/** The route template the router matched, or UNMATCHED_ROUTE. */
function routeTemplate(ctx: Context): string {
  const matched: unknown = (ctx as { _matchedRoute?: unknown })._matchedRoute;
  // A literal colon is escaped in the router's template (`rows/:key\\:mutate`).
  return typeof matched === 'string' ? matched.replaceAll('\\:', ':') : UNMATCHED_ROUTE;
}

/**
 * The ids to log: the server span's when the request is traced, otherwise the trace id of the
 * caller's `traceparent`, so the line can still be found from the caller's trace.
 */
function traceIds(ctx: Context): TraceIds | undefined {
  const active = trace.getSpanContext(context.active());
  if (active !== undefined && isSpanContextValid(active)) return { traceId: active.traceId, spanId: active.spanId };
  const incoming = parseTraceParent(ctx.get('traceparent'));
  return incoming !== null && isSpanContextValid(incoming) ? { traceId: incoming.traceId } : undefined;
}

interface TraceIds {
  readonly traceId: string;
  readonly spanId?: string;
}

/**
 * Names the server span by route (`GET /v1/:instanceID/readCellData`), puts the caller's name on
 * it and records a failure on it.
 */
function annotateServerSpan(ctx: Context & { state: AppState }): void {
  const active = context.active();
  const rpc = getRPCMetadata(active);
  const route = routeTemplate(ctx);
  if (rpc?.type === RPCType.HTTP && route !== UNMATCHED_ROUTE) rpc.route = route;
  const span = trace.getSpan(active);
  if (span === undefined) return;
  // Who called (set by authentication; a name such as apikey:orders-svc, never a credential).
  const principal: unknown = (ctx.state as { principal?: unknown }).principal;
  if (typeof principal === 'string') span.setAttribute('enduser.id', principal);
  const problem = ctx.state.problem;
  if (problem === undefined) return;
  span.setAttribute('kvcrud.problem.code', problem.code);
  // The instrumentation marks 5xx spans as errors; the exception says why.
  if (ctx.status >= 500 && problem.cause instanceof Error) span.recordException(problem.cause);
}

/**
 * Calls `done` once, when the response has been sent (aborted = false) or the connection closed
 * before that (aborted = true).
 */
function onResponseEnd(response: ServerResponse, done: (aborted: boolean) => void): void {
  let called = false;
  const end = () => {
    if (called) return;
    called = true;
    done(!response.writableFinished);
  };
  response.once('finish', end);
  whenClosed(response, end);
}

interface RequestOutcome {
  readonly route: string;
  readonly durationMs: number;
  readonly aborted: boolean;
  readonly ids: TraceIds | undefined;
}

function logRequest(logger: Logger, ctx: Context & { state: AppState }, outcome: RequestOutcome): void {
  const { status } = ctx;
  const problem = ctx.state.problem;
  // 5xx answers that are no fault of the service (load shed, draining for shutdown, a caller that
  // hung up first) are warnings without a stack: an error line each would bury the real failures.
  const expected = outcome.aborted || (problem !== undefined && EXPECTED_5XX.has(problem.code));
  const failed = status >= 500 && !expected;
  const level: Level = failed ? 'error' : status >= 400 ? 'warn' : ROUTINE_ROUTES.has(outcome.route) ? 'debug' : 'info';
  if (!logger.isLevelEnabled(level)) return;

  const line: Record<string, unknown> = {
    requestId: ctx.state.requestId,
    method: ctx.method,
    route: outcome.route,
    status,
    durationMs: Math.round(outcome.durationMs * 1000) / 1000,
  };
  if (outcome.ids !== undefined) Object.assign(line, outcome.ids);
  // Set by the authentication middleware: the caller's name, never its credential.
  const principal: unknown = (ctx.state as { principal?: unknown }).principal;
  if (typeof principal === 'string') line['principal'] = principal;
  if (ctx.state.store !== undefined) line['store'] = ctx.state.store;
  if (problem !== undefined) line['code'] = problem.code;
  if (problem !== undefined && failed) line['err'] = problem.cause;
  if (outcome.aborted) line['aborted'] = true;
  logger[level](line, `${ctx.method} ${outcome.route} ${status}${outcome.aborted ? ' (connection closed before the response was sent)' : ''}`);
}
