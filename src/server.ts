import type { AddressInfo } from 'node:net';
import { createApp, createMetricsApp } from './app.ts';
import { ConfigError, type Config, loadConfig } from './config.ts';
import { openStore } from './store/open-store.ts';
import { createLogger } from './telemetry/logger.ts';
import { createMetrics } from './telemetry/metrics.ts';
import { flushTracing } from './telemetry/tracing.ts';

/** Exit status for invalid configuration (EX_CONFIG in sysexits.h). */
const EXIT_CONFIG = 78;

let config: Config;
try {
  config = loadConfig(process.env);
} catch (error) {
  if (!(error instanceof ConfigError)) throw error;
  process.stderr.write(`kvcrud: ${error.message}\n`);
  process.exit(EXIT_CONFIG);
}

const logger = createLogger(config.logLevel);
const store = openStore(config);
const metrics = createMetrics();
const server = createApp({ config, store, logger, metrics }).listen(config.port);

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
  logger.info({ port, store: store.type, instances: config.instanceIds }, `kvcrud listening on port ${port}`);
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
  await flushTracing();
  process.exit(0);
}
process.once('SIGTERM', () => void shutdown('SIGTERM'));
process.once('SIGINT', () => void shutdown('SIGINT'));
