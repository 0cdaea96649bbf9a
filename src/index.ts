import type { AddressInfo } from 'node:net';
import { resolve } from 'node:path';
import { pino } from 'pino';
import { createApp } from './app.ts';
import { type Authenticator, openAuthenticator } from './auth/authenticator.ts';
import { ConfigError, type Config, loadConfig } from './config.ts';
import { DrainState } from './http/drain-state.ts';
import { shutDown } from './shutdown.ts';
import { createHttpServer } from './http/http-server.ts';
import { isStoreError } from './store/errors.ts';
import { openStore } from './store/open-store.ts';
import type { DataStore } from './store/store.ts';

/** Exit status for invalid configuration (EX_CONFIG in sysexits.h). */
const EXIT_CONFIG = 78;

const logger = pino({ base: { service: 'kvcrud' } });

let config: Config;
let authenticator: Authenticator;
try {
  config = loadConfig(process.env);
  // Reads the keys and grants files: an invalid one is a configuration error too.
  authenticator = openAuthenticator(config.auth, { logger, instanceIds: config.instanceIds });
} catch (error) {
  if (!(error instanceof ConfigError)) throw error;
  process.stderr.write(`kvcrud: ${error.message}\n`);
  process.exit(EXIT_CONFIG);
}

let store: DataStore;
try {
  store = openStore(config);
} catch (error) {
  if (!isStoreError(error)) throw error;
  logger.fatal({ err: error, store: config.store.type }, `cannot open the ${config.store.type} store: ${error.message}`);
  process.exit(1);
}
const drain = new DrainState();
const server = createHttpServer(
  createApp({ config, store, logger, drain, auth: { authenticator, protectDocs: config.auth.protectDocs } }),
).listen(config.port);
void authenticator.warmUp();

server.on('listening', () => {
  const { port } = server.address() as AddressInfo;
  const dataDir = config.store.type === 'embedded' ? { dataDir: resolve(config.store.dataDir) } : {};
  const auth = config.auth.modes.join(',') || 'none';
  logger.info({ port, store: store.type, instances: config.instanceIds, ...dataDir, auth }, `kvcrud listening on port ${port}`);
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
  shutDown({ server, store, drain, logger, timeoutMs: config.shutdownTimeoutMs }, signal).then(
    () => process.exit(0),
    (error: unknown) => {
      logger.fatal({ err: error }, 'shutdown failed');
      process.exit(1);
    },
  );
}
process.on('SIGTERM', onSignal);
process.on('SIGINT', onSignal);
