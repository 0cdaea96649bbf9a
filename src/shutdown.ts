import type { Server } from 'node:http';
import type { Logger } from 'pino';
import type { DrainState } from './http/admission/drain-state.ts';
import { closeStores } from './store/open-store.ts';
import type { StoreSet } from './store/store-set.ts';

/** Longest wait for the stores to release their connections once the requests are done. */
const STORE_CLOSE_TIMEOUT_MS = 3000;

/** How often connections whose last request ended during the drain are closed. */
const IDLE_SWEEP_MS = 50;

export interface ShutdownDeps {
  readonly server: Server;
  readonly stores: StoreSet;
  readonly drain: DrainState;
  readonly logger: Logger;
  /** How long in-flight requests may run on (SHUTDOWN_TIMEOUT_MS). */
  readonly timeoutMs: number;
}

/**
 * shutDown drains the process, in this order: /readyz turns 503 at once; the listener closes, so
 * no new connection is accepted; in-flight requests run to their end, for up to `timeoutMs`, after
 * which the connections still open are cut; then the stores close. It resolves when all that is
 * done (it never rejects); the caller then exits.
 */
export async function shutDown({ server, stores, drain, logger, timeoutMs }: ShutdownDeps, signal: string): Promise<void> {
  const startedAt = performance.now();
  drain.start();
  logger.info({ signal, timeoutMs }, 'shutting down: finishing in-flight requests');

  // close() stops listening and closes the connections idle at that moment; it calls back once
  // every connection has closed. A keep-alive connection whose request ends later is closed by
  // Node after its `Connection: close` response (closeWhenDraining); the sweep closes any other
  // that falls idle.
  const closed = new Promise<void>((resolve) => server.close(() => resolve()));
  const sweep = setInterval(() => server.closeIdleConnections(), IDLE_SWEEP_MS);
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<'timeout'>((resolve) => {
    timer = setTimeout(() => resolve('timeout'), timeoutMs);
  });
  const outcome = await Promise.race([closed.then(() => 'drained' as const), deadline]);
  clearInterval(sweep);
  clearTimeout(timer);
  if (outcome === 'timeout') {
    const connections = await new Promise<number>((resolve) => server.getConnections((_error, count) => resolve(count)));
    logger.warn({ timeoutMs, connections }, 'shutdown timeout: cutting the connections still open');
    server.closeAllConnections();
  }

  try {
    await Promise.race([
      closeStores(stores),
      new Promise((_resolve, reject) => setTimeout(() => reject(new Error(`not closed within ${STORE_CLOSE_TIMEOUT_MS} ms`)), STORE_CLOSE_TIMEOUT_MS).unref()),
    ]);
  } catch (error) {
    logger.error({ err: error }, 'closing the data stores failed');
  }
  logger.info({ durationMs: Math.round(performance.now() - startedAt), cutOff: outcome === 'timeout' }, 'shut down');
}
