import type { Router } from '@koa/router';
import type { Registry } from 'prom-client';
import type { AppState } from '../app-state.ts';

/** metricsRoutes serves GET /metrics: the registry in the Prometheus text format. */
export function metricsRoutes(router: Router<AppState>, registry: Registry): void {
  router.get('/metrics', async (ctx) => {
    const text = await registry.metrics();
    ctx.type = registry.contentType;
    ctx.body = text;
  });
}
