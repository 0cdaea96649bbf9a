import type { Context } from 'koa';
import { ANONYMOUS } from '../auth/access.ts';

/**
 * callerKey names who a request counts against for fairness limits: the authenticated principal,
 * or, for a caller authentication did not name (AUTH_MODE none, or a route without
 * authentication), the client's address as the socket shows it. `X-Forwarded-For` is not trusted,
 * so behind a proxy all anonymous callers share the proxy's address.
 */
export function callerKey(ctx: Pick<Context, 'ip' | 'state'>): string {
  const principal: unknown = (ctx.state as { principal?: unknown }).principal;
  // With AUTH_MODE none every caller is "anonymous": one key for all would let one starve the rest.
  const named = typeof principal === 'string' && principal !== '' && principal !== ANONYMOUS.name;
  return named ? `principal:${principal}` : `address:${ctx.ip}`;
}
