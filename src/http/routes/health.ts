import type { Router } from '@koa/router';
import type { Logger } from 'pino';
import { ApiError } from '../../service/errors.ts';
import type { StoreSet } from '../../store/store-set.ts';
import type { AppState } from '../app-state.ts';
import type { DrainState } from '../admission/drain-state.ts';

/**
 * How long /readyz waits for the stores. Below the kubelet's default probe timeout (1 s) so a slow
 * backend reads as "not ready" rather than as a failed probe.
 */
const READY_TIMEOUT_MS = 800;

export interface HealthOptions {
  /** Deadline of a store call (STORE_TIMEOUT_MS); a readiness check waits no longer either. */
  readonly storeTimeoutMs: number;
  /** Says when stores stop or start answering readiness checks again. */
  readonly logger: Logger;
}

/** The outcome of one readiness check: each store that did not answer, with its error. */
type Failures = ReadonlyMap<string, unknown>;

/**
 * healthRoutes serves the probes: /healthz says the process serves HTTP (no backend call);
 * /readyz asks every store at once.
 *
 * /readyz answers 200 `ready` when every store answers, 200 `degraded` when some do and some do
 * not, and 503 BACKEND_UNAVAILABLE when none does (with one store: when it does not). A pod
 * that can serve one store is worth routing to: the stores' backends are shared by every
 * replica, so failing readiness for one store would take every pod out of the Service together
 * and stop the stores that work as well. Calls to the store that does not answer fail fast on
 * their own (503 BACKEND_UNAVAILABLE). The body never names stores (the probe needs no
 * credential); the log does, once each time the set of failing stores changes, and so does
 * the checkHealth metric, per store.
 *
 * Concurrent /readyz requests share one check, so probes cannot multiply backend calls. Once
 * the process drains, /readyz answers 503 SHUTTING_DOWN, even to a probe whose check is still
 * under way; /healthz stays 200, so the orchestrator does not kill a process that is finishing
 * its requests.
 */
export function healthRoutes(router: Router<AppState>, stores: StoreSet, drain: DrainState, options: HealthOptions): void {
  const timeoutMs = Math.min(READY_TIMEOUT_MS, options.storeTimeoutMs);
  let inFlight: Promise<Failures> | undefined;
  let lastFailing = '';

  const check = async (): Promise<Failures> => {
    const deadline = Date.now() + timeoutMs;
    const outcomes = await Promise.allSettled(stores.all.map((named) => named.store.checkHealth({ deadline })));
    const failures = new Map<string, unknown>();
    for (const [index, outcome] of outcomes.entries()) {
      if (outcome.status === 'rejected') failures.set(stores.all[index]?.name ?? '', outcome.reason);
    }
    const failing = [...failures.keys()];
    if (failing.join() !== lastFailing) {
      lastFailing = failing.join();
      if (failing.length > 0) {
        const causes = Object.fromEntries([...failures].map(([name, error]) => [name, error instanceof Error ? error.message : String(error)]));
        options.logger.warn({ stores: failing, causes }, `not answering readiness checks: ${failing.join(', ')}`);
      } else {
        options.logger.info({ stores: stores.all.map((named) => named.name) }, 'every store answers readiness checks again');
      }
    }
    return failures;
  };

  router.get('/healthz', (ctx) => {
    ctx.body = { status: 'ok' };
  });

  router.get('/readyz', async (ctx) => {
    if (drain.draining) throw shuttingDown();
    inFlight ??= check().finally(() => {
      inFlight = undefined;
    });
    const failures = await Promise.race([inFlight, drain.started.then(() => undefined)]);
    if (drain.draining || failures === undefined) throw shuttingDown();
    if (failures.size === stores.all.length) {
      const [cause] = failures.values();
      throw new ApiError('BACKEND_UNAVAILABLE', `The data ${failures.size === 1 ? 'store' : 'stores'} did not answer the readiness check.`, {}, cause);
    }
    ctx.body = { status: failures.size === 0 ? 'ready' : 'degraded' };
  });
}

function shuttingDown(): ApiError {
  return new ApiError('SHUTTING_DOWN', 'The service is shutting down: it finishes its in-flight requests and takes no new connections.');
}
