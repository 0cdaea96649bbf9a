import type { Router } from '@koa/router';
import { ApiError } from '../../service/errors.ts';
import type { TableService } from '../../service/table-service.ts';
import type { AppState } from '../app-state.ts';

/**
 * How long /readyz waits for the store. Below the kubelet's default probe timeout (1 s) so a slow
 * backend reads as "not ready" rather than as a failed probe.
 */
const READY_TIMEOUT_MS = 800;

/**
 * healthRoutes serves the probes: /healthz says the process serves HTTP (no backend call);
 * /readyz says the store answers. Concurrent /readyz requests share one store check, so probes
 * cannot multiply backend calls.
 */
export function healthRoutes(router: Router<AppState>, service: TableService): void {
  let inFlight: Promise<void> | undefined;

  router.get('/healthz', (ctx) => {
    ctx.body = { status: 'ok' };
  });

  router.get('/readyz', async (ctx) => {
    inFlight ??= service.checkReady(READY_TIMEOUT_MS).finally(() => {
      inFlight = undefined;
    });
    try {
      await inFlight;
    } catch (error) {
      throw new ApiError('BACKEND_UNAVAILABLE', 'The data store did not answer the readiness check.', {}, error);
    }
    ctx.body = { status: 'ready' };
  });
}
