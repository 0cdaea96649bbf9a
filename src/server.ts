import type { RequestListener, Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { getHeapStatistics } from 'node:v8';
import { createApp, createMetricsApp } from './app.ts';
import { type Authenticator, openAuthenticator } from './auth/authenticator.ts';
import { ConfigError, type Config, loadConfig } from './config.ts';
import { HEAP_CHOICE_VARIABLE, describeHeap } from './heap-size.ts';
import { DrainState } from './http/admission/drain-state.ts';
import { shutDown } from './shutdown.ts';
import { createHttpServer } from './http/server/http-server.ts';
import { findDriver } from './store/drivers.ts';
import { StoreOpenError, openStores } from './store/open-store.ts';
import type { StoreSet } from './store/store-set.ts';
import { createLogger } from './telemetry/logger.ts';
import { accessFileChecks, createMetrics } from './telemetry/metrics.ts';
import { flushTracing } from './telemetry/tracing.ts';

/** How long the check right after start waits for each store before warning that it is unreachable. */
const START_CHECK_MS = 2000;

/** What to change when a store of a driver cannot be opened, by driver. */
const STORE_SETTINGS_HINT: Readonly<Record<string, string>> = {
  embedded: 'Set DATA_DIR (with STORES_FILE, the store\'s dataDir) to a directory this user can write and no other kvcrud process uses.',
};

/** The answer to a request that arrives while the stores are being opened. */
const answerStarting: RequestListener = (_request, response) => {
  response.writeHead(503, { 'content-type': 'application/problem+json', 'retry-after': '1', connection: 'close' });
  response.end(JSON.stringify({ type: '/problems/backend-unavailable', title: 'Backend unavailable', status: 503, detail: 'The service is starting.', code: 'BACKEND_UNAVAILABLE' }));
};

/** Exit status for invalid configuration (EX_CONFIG in sysexits.h). */
const EXIT_CONFIG = 78;

function exitOnConfigError(error: unknown): never {
  if (!(error instanceof ConfigError)) throw error;
  // One line per problem, each complete on its own, so a log viewer shows every one.
  process.stderr.write(error.problems.map((problem) => `kvcrud: invalid configuration: ${problem}\n`).join(''));
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

/**
 * A start-up failure the operator fixes by changing a setting: one plain line on stderr saying
 * what to change, and exit status 1. No JSON, no stack: nothing went wrong inside the service.
 */
function exitOnStartFailure(line: string): never {
  process.stderr.write(`kvcrud: ${line}\n`);
  process.exit(1);
}

/** Listens on `port`, or exits with a line naming `variable` when the port cannot be taken. */
async function listenOrExit(target: Server, port: number, variable: string): Promise<void> {
  await new Promise<void>((resolve) => {
    const failed = (error: NodeJS.ErrnoException) => {
      const why = error.code === 'EADDRINUSE' ? 'another process is using it' : error.code === 'EACCES' ? 'this user may not use it' : error.message;
      exitOnStartFailure(`cannot listen on port ${port}: ${why}. Set ${variable} to a free port.`);
    };
    target.once('error', failed).listen(port, () => {
      target.off('error', failed);
      resolve();
    });
  });
}

// The ports come first, so that a start that cannot serve leaves nothing behind (a fresh data
// directory stays empty). Until the stores are open, a request gets 503.
let handle: RequestListener = answerStarting;
const server = createHttpServer(
  {
    callback: () => (request, response) => {
      handle(request, response);
    },
  },
  {},
  logger,
);
await listenOrExit(server, config.port, 'PORT');
// With METRICS_PORT, /metrics is served there only, apart from the API.
const metricsApp = createMetricsApp({ metrics, logger }).callback();
const metricsServer =
  config.metricsPort === undefined
    ? undefined
    : createHttpServer(
        {
          callback: () => (request, response) => {
            void metricsApp(request, response);
          },
        },
        {},
        logger,
      );
if (metricsServer !== undefined && config.metricsPort !== undefined) await listenOrExit(metricsServer, config.metricsPort, 'METRICS_PORT');

let stores: StoreSet;
try {
  stores = await openStores(config.stores, { logger, onBatch: (store, operation, size) => metrics.storeBatchSize.observe({ store, operation }, size) });
} catch (error) {
  if (!(error instanceof StoreOpenError)) throw error;
  exitOnStartFailure(`${error.message}. ${STORE_SETTINGS_HINT[error.driver] ?? 'Check its settings.'}`);
}
const drain = new DrainState();
const app = createApp({ config, stores, logger, metrics, drain, auth: { authenticator, protectDocs: config.auth.protectDocs } }).callback();
handle = (request, response) => {
  void app(request, response);
};
void authenticator.warmUp();

if (metricsServer !== undefined) {
  const { port } = metricsServer.address() as AddressInfo;
  logger.info({ metricsPort: port }, `metrics listening on port ${port}`);
  metricsServer.on('error', (error) => {
    logger.fatal({ err: error }, 'cannot serve metrics');
    process.exit(1);
  });
}

/**
 * Checks each store once, right after start, and warns loudly of one that cannot be reached: the
 * service keeps running (a backend may come up later, and readiness says when), but an operator
 * who just started it should not learn it from a first request that waits for its 503.
 */
async function warnOfUnreachableStores(opened: StoreSet): Promise<void> {
  const deadline = Date.now() + START_CHECK_MS;
  await Promise.all(
    opened.all.map(async (named) => {
      try {
        await named.store.checkHealth({ deadline });
      } catch (error) {
        const why = error instanceof Error ? error.message : String(error);
        logger.warn(
          { store: named.name, driver: named.driver, err: error },
          `STORE NOT REACHABLE: store ${named.name} did not answer within ${START_CHECK_MS} ms (${why}). kvcrud keeps running: requests to it answer 503 until it does, and /readyz says when. Check its settings and that its backend runs.`,
        );
      }
    }),
  );
}
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

// Last, once the signal handlers are in place: a supervisor may stop the service as soon as it
// reads that it listens.
announce();

/** The start-up line, and the warnings an operator must see at start. */
function announce(): void {
  const { port } = server.address() as AddressInfo;
  const auth = config.auth.modes.join(',') || 'none';
  // Each store with what its driver says of it (project, emulator, data directory), never a secret.
  const described: Record<string, { driver: string; instances: readonly string[] } & Record<string, unknown>> = Object.fromEntries(
    config.stores.all.map((store) => [
      store.name,
      { driver: store.driver, instances: store.instances, ...findDriver(store.driver)?.describe(store.settings) },
    ]),
  );
  const summary = Object.entries(described)
    .map(([name, { driver, instances, ...details }]) => {
      const settings = [driver, ...Object.entries(details).map(([key, value]) => `${key} ${String(value)}`)].join(', ');
      return `store ${name} (${settings}) serving ${instances.join(', ')}`;
    })
    .join('; ');
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
    `kvcrud listening on port ${port}: ${summary}`,
  );
  if (config.auth.modes.length === 0) {
    logger.warn('AUTH_MODE is none: every caller is admin on every instance. Set AUTH_MODE to apikey or oidc to say who may do what.');
  }
  void warnOfUnreachableStores(stores);
}
