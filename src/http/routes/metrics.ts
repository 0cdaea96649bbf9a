import type { Router } from '@koa/router';
import type { Middleware } from 'koa';
import type { Registry } from 'prom-client';
import type { AppState } from '../app-state.ts';

/**
 * metricsRoutes serves GET /metrics: the registry in the Prometheus text format. `guard` runs
 * first: on the API's port with authentication on, a credential with a grant on every store is
 * needed, since the metrics name the stores and show versions, routes and memory; a listener of its
 * own (METRICS_PORT) has no guard.
 */
export function metricsRoutes(router: Router<AppState>, registry: Registry, guard: readonly Middleware<AppState>[] = []): void {
  router.get('/metrics', ...guard, async (ctx) => {
    const text = await registry.metrics();
    ctx.type = registry.contentType;
    ctx.body = text;
  });
}
