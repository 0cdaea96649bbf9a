import type { Middleware } from 'koa';
import proxyAddr from 'proxy-addr';
import type { AppState } from '../app-state.ts';

/**
 * Whether `entry` is something TRUSTED_PROXIES may hold: an IP address, a CIDR range, or a name
 * proxy-addr knows (loopback, linklocal, uniquelocal).
 */
export function isTrustedProxy(entry: string): boolean {
  try {
    proxyAddr.compile(entry);
    return true;
  } catch {
    return false;
  }
}

/**
 * clientAddress makes `ctx.ip` the client's address for everything after it (fairness bounds, the
 * credential-check budget, rate limits, logs). Behind proxies in `trusted` (a mesh sidecar, an
 * ingress), that is the last address of `X-Forwarded-For` that is not one of them, read from the
 * right, as each appends the address it got the request from; so a client cannot pass for another
 * by sending the header itself. With no trusted proxy the header is ignored: the socket's address.
 */
export function clientAddress(trusted: readonly string[]): Middleware<AppState> {
  if (trusted.length === 0) return (_ctx, next) => next();
  const trust = proxyAddr.compile([...trusted]);
  return (ctx, next) => {
    ctx.request.ip = proxyAddr(ctx.req, trust);
    return next();
  };
}
