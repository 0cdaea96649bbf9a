import { readFileSync } from 'node:fs';
import { Router } from '@koa/router';
import { trace } from '@opentelemetry/api';
import Koa, { type Middleware } from 'koa';
import type { Logger } from 'pino';
import { type Authenticator, NO_AUTHENTICATION } from './auth/authenticator.ts';
import {
  type Config,
  DEFAULT_FEEDS_MAX,
  DEFAULT_FEEDS_MAX_PER_CALLER,
  DEFAULT_INFLIGHT_UNAUTHENTICATED,
  DEFAULT_MIN_BODY_BYTES_PER_SECOND,
  DEFAULT_V1_MAX_VERSIONS,
  defaultInflightPerCaller,
  perCallerBoundFrom,
} from './config.ts';
import { holdAnswers } from './http/admission/answer-holds.ts';
import { BodyBudget, bodyBudgetBytes } from './http/admission/body-budget.ts';
import { clientAddress } from './http/admission/client-address.ts';
import type { AppState } from './http/app-state.ts';
import { DrainState } from './http/admission/drain-state.ts';
import { FeedService } from './service/change-feeds.ts';
import { InflightLimits } from './http/admission/inflight-limits.ts';
import { authenticate } from './http/middleware/authenticate.ts';
import { requireGrant, requireGrantOnEveryStore } from './http/middleware/authorize.ts';
import { closeWhenDraining } from './http/middleware/close-when-draining.ts';
import { loadShedding } from './http/middleware/load-shedding.ts';
import { problemResponder } from './http/middleware/problem-responder.ts';
import { rateLimit } from './http/middleware/rate-limit.ts';
import { requestId } from './http/middleware/request-id.ts';
import { requestTelemetry } from './http/middleware/request-telemetry.ts';
import { buildOpenApiDocument } from './http/openapi/openapi.ts';
import { openApiDocuments } from './http/openapi/openapi-documents.ts';
import { docsRoutes } from './http/routes/docs.ts';
import { healthRoutes } from './http/routes/health.ts';
import { metricsRoutes } from './http/routes/metrics.ts';
import { API_OPERATIONS, COMMON_ERRORS } from './http/api.ts';
import type { Operation, Services } from './http/operations/operation.ts';
import { registerOperations } from './http/operations/register.ts';
import { v1Guards } from './http/v1/operations.ts';
import { v2Guards, v2PathParams } from './http/v2/guards.ts';
import { AnswerBudget, answerBudgetBytes } from './service/answer-budget.ts';
import { RowService } from './service/rows.ts';
import { StoreDirectory } from './service/stores.ts';
import { TableService } from './service/tables.ts';
import { type StoreInstrumentation, instrumentStores } from './store/instrumented-store.ts';
import type { StoreSet } from './store/store-set.ts';
import { type Metrics, createMetrics, feedMetrics } from './telemetry/metrics.ts';

/** One client address may take this share of the credential-check budget (MAX_INFLIGHT_UNAUTHENTICATED / 4). */
const CHECKS_SHARE_PER_ADDRESS = 4;

/**
 * A trailing slash is never another name of a resource: `…/rows/..`, which URL parsers turn into
 * `…/tables/{table}/`, must not reach the table, nor `…/rows/a/` the row `a`.
 */
const STRICT_ROUTING = { strict: true } as const;

const VERSION = (JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }).version;

export interface AppDeps {
  readonly config: Pick<Config, 'maxBodyBytes' | 'storeTimeoutMs' | 'maxInflight' | 'rateLimitPerSecond' | 'metricsPort'> &
    Partial<Pick<Config, 'maxInflightPerCaller' | 'maxInflightUnauthenticated' | 'minBodyBytesPerSecond' | 'v1MaxVersions' | 'trustedProxies' | 'feedsMax' | 'feedsMaxPerCaller'>>;
  /**
   * The stores as the drivers opened them (openStores); the app measures, traces and
   * deadline-checks every call to them. The default store serves v1.
   */
  readonly stores: StoreSet;
  /** A logger from createLogger, whose `err` serializer keeps what an error carries out of the log. */
  readonly logger: Logger;
  /** The app's metrics; a fresh set when not given. Pass them to share with createMetricsApp. */
  readonly metrics?: Metrics;
  /** Set by the entry point on SIGTERM; a fresh one (never draining) when left out. */
  readonly drain?: DrainState;
  /**
   * Who may call what (AUTH_MODE). Without it every caller is admin, as with AUTH_MODE none.
   * `protectDocs` (AUTH_PROTECT_DOCS) puts the explorer and the OpenAPI document behind it too.
   */
  readonly auth?: { readonly authenticator: Authenticator; readonly protectDocs: boolean };
  /** The bytes of rows that scan pages and batchGet answers hold at once; sized from the heap when not given. */
  readonly answerBudget?: AnswerBudget;
}

/**
 * createApp wires the service: HTTP middleware and routes in front of the TableService, in front
 * of the stores it is given. The only place that knows all the layers.
 */
export function createApp({ config, stores: opened, logger, metrics = createMetrics(), drain = new DrainState(), auth, answerBudget }: AppDeps): Koa<AppState> {
  // Every store call is measured, traced and checked for its deadline here, whichever driver opened it.
  const instrumentation: StoreInstrumentation = { duration: metrics.storeOperationDuration, tracer: trace.getTracer('kvcrud', VERSION) };
  const stores = instrumentStores(opened, instrumentation);
  const directory = new StoreDirectory(stores);
  const services: Services = {
    stores: directory,
    tables: new TableService({ stores: directory, storeTimeoutMs: config.storeTimeoutMs }),
    rows: new RowService({ stores: directory, storeTimeoutMs: config.storeTimeoutMs }),
    v1MaxVersions: config.v1MaxVersions ?? DEFAULT_V1_MAX_VERSIONS,
    feeds: new FeedService({
      stores: directory,
      limits: { total: config.feedsMax ?? DEFAULT_FEEDS_MAX, perCaller: config.feedsMaxPerCaller ?? DEFAULT_FEEDS_MAX_PER_CALLER },
      observer: feedMetrics(metrics),
      draining: drain.started,
    }),
  };
  const servesMetrics = config.metricsPort === undefined;
  const { authenticator, protectDocs } = auth ?? { authenticator: NO_AUTHENTICATION, protectDocs: false };
  const openApi = openApiDocuments({
    served: stores,
    authenticated: authenticator.modes.length > 0,
    build: (documented) =>
      buildOpenApiDocument({
        version: VERSION,
        operations: API_OPERATIONS,
        commonErrors: COMMON_ERRORS,
        stores: documented,
        maxBodyBytes: config.maxBodyBytes,
        auth: { modes: authenticator.modes, protectDocs },
        servesMetrics,
      }),
  });
  // A request counts against MAX_INFLIGHT and its caller's share only once authenticated; until
  // then only the (smaller) budget of credential checks bounds it, and only if its check is costly.
  const inflight = new InflightLimits({
    total: config.maxInflight,
    perKey: config.maxInflightPerCaller ?? defaultInflightPerCaller(config.maxInflight),
    perKeyFrom: perCallerBoundFrom(config.maxInflight),
  });
  const checksTotal = config.maxInflightUnauthenticated ?? DEFAULT_INFLIGHT_UNAUTHENTICATED;
  const checks = new InflightLimits({ total: checksTotal, perKey: Math.ceil(checksTotal / CHECKS_SHARE_PER_ADDRESS) });
  const identify = authenticate(authenticator, logger, { checks });
  const shed = loadShedding(inflight);
  const caller: Middleware<AppState> = async (ctx, next) => {
    await identify(ctx, async () => {
      await shed(ctx, next);
    });
  };

  const router = new Router<AppState>(STRICT_ROUTING);
  // The probes and the metrics scrape are never shed nor rate limited: an overloaded pod is
  // alive, and its metrics are what shows the overload.
  healthRoutes(router, stores, drain, { storeTimeoutMs: config.storeTimeoutMs, logger });
  docsRoutes(router, openApi, protectDocs ? [caller, requireGrant()] : [shed], API_OPERATIONS.map((operation) => operation.operationId));
  // Keyed by the principal, so it runs in the API's routes right after authentication.
  const limit = config.rateLimitPerSecond === undefined ? undefined : rateLimit({ perSecond: config.rateLimitPerSecond });
  const registration = {
    services,
    maxBodyBytes: config.maxBodyBytes,
    // One budget for v1 and v2: a few of the largest bodies at once would not fit in the heap.
    bodyBudget: new BodyBudget(bodyBudgetBytes(config.maxBodyBytes)),
    minBodyBytesPerSecond: config.minBodyBytesPerSecond ?? DEFAULT_MIN_BODY_BYTES_PER_SECOND,
    authenticate: caller,
    rateLimit: limit,
  };
  // Answers hold rows until they are written (scan pages, batchGets, large rows): a few of the
  // largest at once would not fit in the pod's memory either.
  const answers = holdAnswers(answerBudget ?? new AnswerBudget(answerBudgetBytes()));
  const v1Checks = v1Guards(services, stores.default.name);
  registerOperations(router, byTag('v1'), { ...registration, guards: (operation: Operation) => [...v1Checks(operation), ...answers(operation)] });
  const v2Checks = v2Guards(services, stores.default.name);
  const v2 = { ...registration, guards: (operation: Operation) => [...v2Checks(operation), ...answers(operation)], pathParams: v2PathParams };
  registerOperations(router, byTag('v2'), v2);
  // On the API's port the metrics need a credential when callers authenticate, with a grant on
  // every store, since they name them all (the scrape is not counted against the slots, so it still
  // answers under overload); on METRICS_PORT they need none.
  if (servesMetrics) metricsRoutes(router, metrics.registry, authenticator.modes.length > 0 ? [identify, requireGrantOnEveryStore(stores, '/metrics')] : []);

  const app = new Koa<AppState>();
  // First: who the client is, behind the proxies trusted to say so.
  app.use(clientAddress(config.trustedProxies ?? []));
  app.use(closeWhenDraining(drain));
  app.use(requestId());
  // Outside the problem responder, so every answer, failures and shed requests included, is
  // counted and logged once.
  app.use(requestTelemetry({ logger, metrics }));
  app.use(problemResponder());
  app.use(router.routes());
  app.use(router.allowedMethods());
  logKoaErrors(app, logger);
  return app;
}

function byTag(tag: Operation['tag']): Operation[] {
  return API_OPERATIONS.filter((operation) => operation.tag === tag);
}

/**
 * createMetricsApp serves only GET /metrics, for a listener of its own (METRICS_PORT) that can be
 * kept from the API's callers.
 */
export function createMetricsApp({ metrics, logger }: { metrics: Metrics; logger: Logger }): Koa<AppState> {
  const router = new Router<AppState>(STRICT_ROUTING);
  metricsRoutes(router, metrics.registry);
  const app = new Koa<AppState>();
  app.use(requestId());
  app.use(requestTelemetry({ logger, metrics }));
  app.use(problemResponder());
  app.use(router.routes());
  app.use(router.allowedMethods());
  logKoaErrors(app, logger);
  return app;
}

// Failures of a request are logged on its own line (requestTelemetry). Koa reports here what
// happens outside the middleware, such as a response stream failing while being sent.
function logKoaErrors(app: Koa<AppState>, logger: Logger): void {
  app.on('error', (error: unknown, ctx?: Koa.ParameterizedContext<AppState>) => {
    logger.error({ err: error, requestId: ctx?.state.requestId, method: ctx?.method, status: ctx?.status }, 'response failed');
  });
}
