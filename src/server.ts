import type { AddressInfo } from 'node:net';
import { getHeapStatistics } from 'node:v8';
import { createApp, createMetricsApp } from './app.ts';
import { type Authenticator, openAuthenticator } from './auth/authenticator.ts';
import { ConfigError, type Config, loadConfig } from './config.ts';
import { HEAP_CHOICE_VARIABLE, describeHeap } from './heap-size.ts';
import { DrainState } from './http/drain-state.ts';
import { shutDown } from './shutdown.ts';
import { createHttpServer } from './http/http-server.ts';
import { findDriver } from './store/drivers.ts';
import { StoreOpenError, openStores } from './store/open-store.ts';
import type { StoreSet } from './store/store-set.ts';
import { createLogger } from './telemetry/logger.ts';
import { accessFileChecks, createMetrics } from './telemetry/metrics.ts';
import { flushTracing } from './telemetry/tracing.ts';

/** Exit status for invalid configuration (EX_CONFIG in sysexits.h). */
const EXIT_CONFIG = 78;

function exitOnConfigError(error: unknown): never {
  if (!(error instanceof ConfigError)) throw error;
  process.stderr.write(`kvcrud: ${error.message}\n`);
  process.exit(EXIT_CONFIG);
}

let config: Config;
try {
  config = loadConfig(process.env);
} catch (error) {
  exitOnConfigError(error);
}
const logger = createLogger(config.logLevel);

const metrics = createMetrics();
let authenticator: Authenticator;
try {
  // Reads the keys and grants files: an invalid one is a configuration error too.
  authenticator = openAuthenticator(config.auth, { logger, stores: config.stores, onFileCheck: accessFileChecks(metrics) });
} catch (error) {
  exitOnConfigError(error);
}

let stores: StoreSet;
try {
  stores = await openStores(config.stores, { logger });
} catch (error) {
  if (!(error instanceof StoreOpenError)) throw error;
  logger.fatal({ err: error.cause, store: error.store, driver: error.driver }, error.message);
  process.exit(1);
}
const drain = new DrainState();
const server = createHttpServer(
  createApp({ config, stores, logger, metrics, drain, auth: { authenticator, protectDocs: config.auth.protectDocs } }),
).listen(config.port);
void authenticator.warmUp();

// With METRICS_PORT, /metrics is served there only, apart from the API.
if (config.metricsPort !== undefined) {
  const metricsServer = createMetricsApp({ metrics, logger }).listen(config.metricsPort);
  metricsServer.on('listening', () => {
    const { port } = metricsServer.address() as AddressInfo;
    logger.info({ metricsPort: port }, `metrics listening on port ${port}`);
  });
  metricsServer.on('error', (error) => {
    logger.fatal({ err: error }, 'cannot serve metrics');
    process.exit(1);
  });
}

server.on('listening', () => {
  const { port } = server.address() as AddressInfo;
  const auth = config.auth.modes.join(',') || 'none';
  // Each store with what its driver says of it (project, emulator, data directory), never a secret.
  const described = Object.fromEntries(
    config.stores.all.map((store) => [
      store.name,
      { driver: store.driver, instances: store.instances, ...findDriver(store.driver)?.describe(store.settings) },
    ]),
  );
  // The default store at the top, as the line had it with one store; then every store.
  logger.info(
    {
      port,
      store: config.stores.default.name,
      ...described[config.stores.default.name],
      stores: described,
      auth,
      heap: describeHeap(getHeapStatistics().heap_size_limit, process.env[HEAP_CHOICE_VARIABLE]),
    },
    `kvcrud listening on port ${port}`,
  );
  if (config.auth.modes.length === 0) {
    logger.warn('AUTH_MODE is none: every caller is admin on every instance. Set AUTH_MODE to apikey or oidc to say who may do what.');
  }
});
server.on('error', (error) => {
  logger.fatal({ err: error }, 'cannot serve HTTP');
  process.exit(1);
});

// SIGTERM (Kubernetes, docker stop) or SIGINT (Ctrl-C) drains and exits 0. A repeated signal
// changes nothing: `npm start` forwards the signal its process group already got, and the drain is
// bounded by SHUTDOWN_TIMEOUT_MS anyway. As PID 1 in a container, Node gets signals only because
// these handlers exist.
let stopping = false;
function onSignal(signal: NodeJS.Signals): void {
  if (stopping) return;
  stopping = true;
  shutDown({ server, stores, drain, logger, timeoutMs: config.shutdownTimeoutMs }, signal)
    // Spans still batched are sent before the process goes (a no-op when tracing is off).
    .then(() => flushTracing())
    .then(
    () => process.exit(0),
    (error: unknown) => {
      logger.fatal({ err: error }, 'shutdown failed');
      process.exit(1);
    },
  );
}
process.on('SIGTERM', onSignal);
process.on('SIGINT', onSignal);
