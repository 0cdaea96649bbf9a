/**
 * Roles and grants: what an authenticated caller may do. Independent of how the caller proved who
 * it is (API key, OIDC token, or nobody at all with AUTH_MODE none).
 */

/** Roles from least to most: each includes the ones before it. */
export const ROLES = ['reader', 'writer', 'admin'] as const;
export type Role = (typeof ROLES)[number];

/** A grant's `instances` entry that stands for every instance of every store the service serves. */
export const ALL_INSTANCES = '*';

/**
 * One role on some instances. Each entry of `instances` is a scope:
 * - `store/instance`: that instance of that store;
 * - `store/*`: every instance of that store;
 * - `*`: every instance of every store;
 * - `instance` (no store): that instance of the default store, so grants written before there
 *   were several stores keep their meaning.
 * A scope naming a store or an instance that is not served is allowed (files may be shared) and
 * covers nothing until it is served.
 */
export interface Grant {
  readonly role: Role;
  readonly instances: readonly string[];
}

/** One instance of one store: what a request works on. */
export interface AccessTarget {
  readonly store: string;
  readonly instance: string;
}

/**
 * The stores and instances the process serves, as authorization needs them: a StoreSet or the
 * stores' configuration will do.
 */
export interface ServedStores {
  readonly default: { readonly name: string };
  readonly all: ReadonlyArray<{ readonly name: string; readonly instances: readonly string[] }>;
}

/** Whether `held` includes everything `needed` may do: admin includes writer includes reader. */
export function roleIncludes(held: Role, needed: Role): boolean {
  return ROLES.indexOf(held) >= ROLES.indexOf(needed);
}

/**
 * Caller is who made a request, as authentication established it. `name` goes into logs and
 * traces (`apikey:orders-svc`, `oidc:system:serviceaccount:shop:orders`); it is never a secret.
 */
export interface Caller {
  readonly name: string;
  readonly grants: readonly Grant[];
  /** When the credential stops being valid (a token's exp), in milliseconds since the epoch; absent: it does not expire. */
  readonly expiresAtMs?: number;
}

/** A scope split into its store (undefined: the default store) and instance (`*`: all). */
export function parseScope(scope: string): { readonly store: string | undefined; readonly instance: string } {
  if (scope === ALL_INSTANCES) return { store: ALL_INSTANCES, instance: ALL_INSTANCES };
  const slash = scope.indexOf('/');
  return slash === -1 ? { store: undefined, instance: scope } : { store: scope.slice(0, slash), instance: scope.slice(slash + 1) };
}

/** Whether a grant's scope entry covers `target`; a bare instance name means the default store's. */
export function scopeCovers(scope: string, target: AccessTarget, defaultStore: string): boolean {
  const { store, instance } = parseScope(scope);
  const storeMatches = store === ALL_INSTANCES || (store ?? defaultStore) === target.store;
  return storeMatches && (instance === ALL_INSTANCES || instance === target.instance);
}

/**
 * callerRole is the most the caller may do on `target`, over all its grants, or undefined when
 * no grant covers it. `defaultStore` is the name of the store bare instance names mean.
 */
export function callerRole(caller: Caller, target: AccessTarget, defaultStore: string): Role | undefined {
  let best: Role | undefined;
  for (const grant of caller.grants) {
    if (grant.instances.some((scope) => scopeCovers(scope, target, defaultStore)) && (best === undefined || roleIncludes(grant.role, best))) {
      best = grant.role;
    }
  }
  return best;
}

/**
 * callerMay tells whether any of the caller's grants gives `role` (or more) on `target`. A grant
 * naming an instance literally matches it whether or not it is served; `*` matches any.
 */
export function callerMay(caller: Caller, role: Role, target: AccessTarget, defaultStore: string): boolean {
  const held = callerRole(caller, target, defaultStore);
  return held !== undefined && roleIncludes(held, role);
}

/** A store the caller may use, with the instances it may use there and its role on each. */
export interface UsableStore {
  readonly name: string;
  readonly instances: ReadonlyArray<{ readonly name: string; readonly role: Role }>;
}

/**
 * usableStores lists what the caller may use, in configuration order: each served store where
 * it holds a role on at least one served instance, with those instances. What GET /v2/stores
 * shows a caller.
 */
export function usableStores(caller: Caller, served: ServedStores): UsableStore[] {
  const usable: UsableStore[] = [];
  for (const store of served.all) {
    const instances = store.instances.flatMap((instance) => {
      const role = callerRole(caller, { store: store.name, instance }, served.default.name);
      return role === undefined ? [] : [{ name: instance, role }];
    });
    if (instances.length > 0) usable.push({ name: store.name, instances });
  }
  return usable;
}

/** With AUTH_MODE none: everyone is this caller, admin on every instance of every store. */
export const ANONYMOUS: Caller = Object.freeze({
  name: 'anonymous',
  grants: Object.freeze([Object.freeze({ role: 'admin', instances: Object.freeze([ALL_INSTANCES]) })]),
});
