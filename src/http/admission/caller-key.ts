import type { Context } from 'koa';
import { ANONYMOUS } from '../../auth/access.ts';

/**
 * callerKey names who a request counts against for fairness limits: the authenticated principal,
 * or, for a caller authentication did not name (AUTH_MODE none, or a route without
 * authentication), the client's address: the socket's, or the one `X-Forwarded-For` gives behind
 * the proxies of TRUSTED_PROXIES (clientAddress). Without those, all anonymous callers behind a
 * proxy share its address.
 */
export function callerKey(ctx: Pick<Context, 'ip' | 'state'>): string {
  const principal: unknown = (ctx.state as { principal?: unknown }).principal;
  // With AUTH_MODE none every caller is "anonymous": one key for all would let one starve the rest.
  const named = typeof principal === 'string' && principal !== '' && principal !== ANONYMOUS.name;
  return named ? `principal:${principal}` : `address:${ctx.ip}`;
}
