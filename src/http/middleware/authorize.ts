import type { Middleware } from 'koa';
import { type AccessTarget, type Role, type ServedStores, callerMay, usableStores } from '../../auth/access.ts';
import { ApiError } from '../../service/errors.ts';
import { shorten } from '../../service/text.ts';
import type { AppState } from '../app-state.ts';

/**
 * authorize lets the request on only if the authenticated caller (see authenticate) has `role`
 * or more on the path's instance of the path's store; otherwise 403 PERMISSION_DENIED. A v1 path
 * (`{instanceID}`, no store) works on the default store; a v2 path names `{store}` and
 * `{instance}`. It runs before the store and instance are looked up, so a caller learns whether
 * one exists only if granted access to it (a `*` grant covers every served instance, so unknown
 * ones then answer 404).
 */
export function authorize(role: Role, operationId: string, defaultStore: string): Middleware<AppState> {
  return async (ctx, next) => {
    const caller = ctx.state.caller;
    const params = (ctx as { params?: Record<string, string> }).params ?? {};
    const target: AccessTarget = { store: params['store'] ?? defaultStore, instance: params['instance'] ?? params['instanceID'] ?? '' };
    if (caller === undefined || !callerMay(caller, role, target, defaultStore)) {
      const where = params['store'] === undefined ? '' : ` of store "${shorten(target.store)}"`;
      throw new ApiError(
        'PERMISSION_DENIED',
        `${caller?.name ?? 'The caller'} may not ${operationId} on instance "${shorten(target.instance)}"${where}: that needs the ${role} role there.`,
      );
    }
    await next();
  };
}

/** requireGrant lets the request on if the authenticated caller has any grant at all (the docs need no more). */
export function requireGrant(): Middleware<AppState> {
  return async (ctx, next) => {
    const caller = ctx.state.caller;
    if (caller === undefined || caller.grants.length === 0) {
      throw new ApiError('PERMISSION_DENIED', `${caller?.name ?? 'The caller'} has no grant on this service.`);
    }
    await next();
  };
}

/**
 * requireGrantOnEveryStore lets the request on if the authenticated caller may use every served
 * store (as GET /v2/stores shows it): the metrics name every store and show its traffic, and store
 * names are shown only to callers granted them. The refusal does not name the stores it lacks.
 */
export function requireGrantOnEveryStore(served: ServedStores, what: string): Middleware<AppState> {
  return async (ctx, next) => {
    const caller = ctx.state.caller;
    const usable = caller === undefined ? 0 : usableStores(caller, served).length;
    if (usable < served.all.length) {
      throw new ApiError(
        'PERMISSION_DENIED',
        `${caller?.name ?? 'The caller'} may not read ${what}: it names every store, and this caller has no grant on ${served.all.length - usable} of the ${served.all.length}. Scrape METRICS_PORT, or grant it every store.`,
      );
    }
    await next();
  };
}
