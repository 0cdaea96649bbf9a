import type { AddressInfo } from 'node:net';
import { resolve } from 'node:path';
import { pino } from 'pino';
import { createApp } from './app.ts';
import { ConfigError, type Config, loadConfig } from './config.ts';
import { createHttpServer } from './http/http-server.ts';
import { isStoreError } from './store/errors.ts';
import { openStore } from './store/open-store.ts';
import type { DataStore } from './store/store.ts';

/** Exit status for invalid configuration (EX_CONFIG in sysexits.h). */
const EXIT_CONFIG = 78;

const logger = pino({ base: { service: 'kvcrud' } });

let config: Config;
try {
  config = loadConfig(process.env);
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
const server = createHttpServer(createApp({ config, store, logger })).listen(config.port);

server.on('listening', () => {
  const { port } = server.address() as AddressInfo;
  const dataDir = config.store.type === 'embedded' ? { dataDir: resolve(config.store.dataDir) } : {};
  logger.info({ port, store: store.type, instances: config.instanceIds, ...dataDir }, `kvcrud listening on port ${port}`);
});
server.on('error', (error) => {
  logger.fatal({ err: error }, 'cannot serve HTTP');
  process.exit(1);
});

/** Longest wait for in-flight requests on shutdown; Kubernetes' default grace period is 30 s. */
const SHUTDOWN_GRACE_MS = 20_000;

// Stop accepting connections, let in-flight requests finish (bounded), then close the store.
async function shutdown(signal: string): Promise<void> {
  logger.info({ signal }, 'shutting down');
  const closed = new Promise((resolve) => server.close(resolve));
  // close() drops the connections idle at that moment; keep-alive connections whose request
  // finishes later would otherwise linger until their keep-alive timeout.
  const sweep = setInterval(() => server.closeIdleConnections(), 50);
  await Promise.race([closed, new Promise((resolve) => setTimeout(resolve, SHUTDOWN_GRACE_MS).unref())]);
  clearInterval(sweep);
  await store.close();
  process.exit(0);
}
process.once('SIGTERM', () => void shutdown('SIGTERM'));
process.once('SIGINT', () => void shutdown('SIGINT'));
