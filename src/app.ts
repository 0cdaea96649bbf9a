import { readFileSync } from 'node:fs';
import { Router } from '@koa/router';
import { trace } from '@opentelemetry/api';
import Koa from 'koa';
import type { Logger } from 'pino';
import type { Config } from './config.ts';
import type { AppState } from './http/app-state.ts';
import { problemResponder } from './http/middleware/problem-responder.ts';
import { requestId } from './http/middleware/request-id.ts';
import { requestTelemetry } from './http/middleware/request-telemetry.ts';
import { buildOpenApiDocument } from './http/openapi.ts';
import { docsRoutes } from './http/routes/docs.ts';
import { healthRoutes } from './http/routes/health.ts';
import { metricsRoutes } from './http/routes/metrics.ts';
import { v1Routes } from './http/routes/v1.ts';
import { TableService } from './service/table-service.ts';
import { InstrumentedStore } from './store/instrumented-store.ts';
import type { DataStore } from './store/store.ts';
import { type Metrics, createMetrics } from './telemetry/metrics.ts';

const VERSION = (JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }).version;

export interface AppDeps {
  readonly config: Pick<Config, 'instanceIds' | 'maxBodyBytes' | 'storeTimeoutMs' | 'metricsPort'>;
  readonly store: DataStore;
  /** A logger from createLogger, whose `err` serializer keeps what an error carries out of the log. */
  readonly logger: Logger;
  /** The app's metrics; a fresh set when not given. Pass them to share with createMetricsApp. */
  readonly metrics?: Metrics;
}

/**
 * createApp wires the service: HTTP middleware and routes in front of the TableService, in front
 * of whichever DataStore it is given. The only place that knows all the layers.
 */
export function createApp({ config, store, logger, metrics = createMetrics() }: AppDeps): Koa<AppState> {
  // Every store call is measured and traced here, whichever adapter `store` is.
  const observedStore = new InstrumentedStore(store, {
    duration: metrics.storeOperationDuration,
    tracer: trace.getTracer('kvcrud', VERSION),
  });
  const service = new TableService({ store: observedStore, instanceIds: config.instanceIds, storeTimeoutMs: config.storeTimeoutMs });
  const servesMetrics = config.metricsPort === undefined;
  const openApi = buildOpenApiDocument({
    version: VERSION,
    instanceIds: config.instanceIds,
    maxBodyBytes: config.maxBodyBytes,
    servesMetrics,
  });

  const router = new Router<AppState>();
  healthRoutes(router, service);
  docsRoutes(router, openApi);
  v1Routes(router, service, { maxBodyBytes: config.maxBodyBytes });
  if (servesMetrics) metricsRoutes(router, metrics.registry);

  const app = new Koa<AppState>();
  app.use(requestId());
  app.use(requestTelemetry({ logger, metrics }));
  app.use(problemResponder());
  app.use(router.routes());
  app.use(router.allowedMethods());
  logKoaErrors(app, logger);
  return app;
}

/**
 * createMetricsApp serves only GET /metrics, for a listener of its own (METRICS_PORT) that can be
 * kept from the API's callers.
 */
export function createMetricsApp({ metrics, logger }: { metrics: Metrics; logger: Logger }): Koa<AppState> {
  const router = new Router<AppState>();
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
