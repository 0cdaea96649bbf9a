import type { Router } from '@koa/router';
import { ApiError } from '../../service/errors.ts';
import type { TableService } from '../../service/table-service.ts';
import type { AppState } from '../app-state.ts';
import type { DrainState } from '../drain-state.ts';

/**
 * How long /readyz waits for the store. Below the kubelet's default probe timeout (1 s) so a slow
 * backend reads as "not ready" rather than as a failed probe.
 */
const READY_TIMEOUT_MS = 800;

/**
 * healthRoutes serves the probes: /healthz says the process serves HTTP (no backend call);
 * /readyz says the store answers. Concurrent /readyz requests share one store check, so probes
 * cannot multiply backend calls. Once the process drains, /readyz answers 503 SHUTTING_DOWN, even
 * to a probe whose store check is still under way; /healthz stays 200, so the orchestrator does
 * not kill a process that is finishing its requests.
 */
export function healthRoutes(router: Router<AppState>, service: TableService, drain: DrainState): void {
  let inFlight: Promise<void> | undefined;

  router.get('/healthz', (ctx) => {
    ctx.body = { status: 'ok' };
  });

  router.get('/readyz', async (ctx) => {
    if (drain.draining) throw shuttingDown();
    inFlight ??= service.checkReady(READY_TIMEOUT_MS).finally(() => {
      inFlight = undefined;
    });
    try {
      await Promise.race([inFlight, drain.started]);
    } catch (error) {
      throw new ApiError('BACKEND_UNAVAILABLE', 'The data store did not answer the readiness check.', {}, error);
    }
    if (drain.draining) throw shuttingDown();
    ctx.body = { status: 'ready' };
  });
}

function shuttingDown(): ApiError {
  return new ApiError('SHUTTING_DOWN', 'The service is shutting down: it finishes its in-flight requests and takes no new connections.');
}
