/**
 * Roles and grants: what an authenticated caller may do. Independent of how the caller proved who
 * it is (API key, OIDC token, or nobody at all with AUTH_MODE none).
 */

/** Roles from least to most: each includes the ones before it. */
export const ROLES = ['reader', 'writer', 'admin'] as const;
export type Role = (typeof ROLES)[number];

/** A grant's `instances` entry that stands for every instance the service serves. */
export const ALL_INSTANCES = '*';

/** One role on some instances (`*` for all served ones). */
export interface Grant {
  readonly role: Role;
  readonly instances: readonly string[];
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
}

/**
 * callerMay tells whether any of the caller's grants gives `role` (or more) on `instance`.
 * A grant naming an instance literally matches it whether or not it is served; `*` matches any.
 */
export function callerMay(caller: Caller, instance: string, role: Role): boolean {
  return caller.grants.some(
    (grant) => roleIncludes(grant.role, role) && (grant.instances.includes(ALL_INSTANCES) || grant.instances.includes(instance)),
  );
}

/** With AUTH_MODE none: everyone is this caller, admin on every instance. */
export const ANONYMOUS: Caller = Object.freeze({
  name: 'anonymous',
  grants: Object.freeze([Object.freeze({ role: 'admin', instances: Object.freeze([ALL_INSTANCES]) })]),
});
