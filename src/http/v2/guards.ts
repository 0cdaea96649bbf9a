import type { RouterContext, RouterMiddleware } from '@koa/router';
import { ALL_INSTANCES, type Caller, type Role, type ServedStores, parseScope, usableStores } from '../../auth/access.ts';
import { ApiError } from '../../service/errors.ts';
import { shorten } from '../../service/text.ts';
import type { AppState } from '../app-state.ts';
import { authorize } from '../middleware/authorize.ts';
import { DOT_KEY_ADVICE } from '../routes/route-hints.ts';
import type { Operation, Services } from '../operations/operation.ts';

/**
 * The checks of a v2 operation before its body is read: the caller's grant on the store and
 * instance of the path (403), then whether the store serves the instance (404 STORE_NOT_FOUND,
 * INSTANCE_NOT_FOUND). Listing the stores needs no grant: it shows only what the caller may use.
 */
export function v2Guards(services: Services, defaultStore: string): (operation: Operation) => Array<RouterMiddleware<AppState>> {
  const servedTarget: RouterMiddleware<AppState> = (ctx, next) => {
    ctx.state.store = services.stores.instance(ctx.params['store'] ?? '', ctx.params['instance'] ?? '', usableNames(ctx.state.caller, services)).name;
    return next();
  };
  return (operation) => {
    if (operation.pathParameters.includes('instance')) return [authorize(operation.role, operation.operationId, defaultStore), servedTarget];
    if (operation.pathParameters.includes('store')) return [authorizeStore(operation.role, operation.operationId, services.stores)];
    return [];
  };
}

/** The names of the stores `caller` may use, for a STORE_NOT_FOUND to list. */
export function usableNames(caller: Caller | undefined, services: Pick<Services, 'stores'>): () => readonly string[] {
  return () => (caller === undefined ? [] : usableStores(caller, services.stores).map((store) => store.name));
}

/**
 * authorizeStore lets a request about a whole store on if the caller may use one of its served
 * instances (as GET /v2/stores shows it); for a store not served, if one of the caller's grants
 * would cover it (it names the store, or every store), so that such a caller learns that the store
 * does not exist (404), as with instances. Otherwise 403.
 */
function authorizeStore(role: Role, operationId: string, served: ServedStores): RouterMiddleware<AppState> {
  return async (ctx, next) => {
    const store = ctx.params['store'] ?? '';
    const caller = ctx.state.caller;
    const granted =
      caller !== undefined &&
      (served.all.some((candidate) => candidate.name === store)
        ? usableStores(caller, served).some((usable) => usable.name === store)
        : caller.grants.some((grant) =>
            grant.instances.some((scope) => {
              const scoped = parseScope(scope).store;
              return scoped === ALL_INSTANCES || (scoped ?? served.default.name) === store;
            }),
          ));
    if (!granted) {
      throw new ApiError('PERMISSION_DENIED', `${ctx.state.caller?.name ?? 'The caller'} may not ${operationId} on store "${shorten(store)}": it has no grant there (${role} at least).`);
    }
    await next();
  };
}

/**
 * The path parameters of a v2 request. The row key is read from the raw path and decoded
 * strictly: the router would keep a malformed percent-encoding as it is and so name another row.
 * A `:` in a key must be sent as %3A, so that `rows/{key}:mutate` is never ambiguous. A key that a
 * URL parser would rewrite is refused even when it arrives intact (from a client that sends paths
 * as they are), since the same request from fetch, a browser or curl would reach another path: a
 * raw `\` (read as `/`), and the dot segments `.` and `..` however they are encoded.
 */
export function v2PathParams(ctx: RouterContext<AppState>, operation: Operation): Record<string, string> {
  if (!operation.pathParameters.includes('key')) return ctx.params;
  // /v2/stores/{store}/instances/{instance}/tables/{table}/rows/{key}[:mutate]
  let raw = ctx.path.split('/')[9] ?? '';
  const suffix = operation.path.slice(operation.path.lastIndexOf('}') + 1);
  if (suffix !== '' && raw.toLowerCase().endsWith(suffix.toLowerCase())) raw = raw.slice(0, raw.length - suffix.length);
  if (raw.includes(':')) throw invalidKey('a ":" in a key must be sent percent-encoded, as %3A');
  if (raw.includes('\\')) throw invalidKey('a "\\" in a key must be sent percent-encoded, as %5C: URL parsers read a raw one as "/"');
  let key: string;
  try {
    key = decodeURIComponent(raw);
  } catch {
    throw invalidKey('key is not valid percent-encoded UTF-8');
  }
  if (key === '.' || key === '..') throw invalidKey(`the key "${key}" cannot be sent in a path: ${DOT_KEY_ADVICE}`);
  return { ...ctx.params, key };
}

function invalidKey(message: string): ApiError {
  return new ApiError('VALIDATION_FAILED', `${message[0]?.toUpperCase() ?? ''}${message.slice(1)}.`, { errors: [{ path: 'key', message }] });
}
