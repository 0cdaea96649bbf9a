import type { Caller } from '../auth/access.ts';
import type { AnswerHold } from '../service/answer-budget.ts';
import type { ErrorCode } from '../service/errors.ts';

/** What middleware leaves on ctx.state for the handlers after it. */
export interface AppState {
  /** Set by the requestId middleware, first in the chain. */
  requestId: string;
  /**
   * The caller's name for logs and traces (`apikey:orders-svc`, `oidc:<subject>`, `anonymous`
   * with AUTH_MODE none); set by the authenticate middleware on the routes that need a caller.
   * Never a credential.
   */
  principal?: string;
  /** The authenticated caller with its grants; set with `principal`. */
  caller?: Caller;
  /** Set by the middleware that refused the request to protect the service: which bound it was (a metric label). */
  shedBy?: ShedLimit;
  /**
   * The name of the store the request works on, set once it is known to be served (v1: the
   * default store, once the instance is). Logged with the request.
   */
  store?: string;
  /** The request's share of the answer budget, for operations whose answers hold rows (answer-holds.ts). */
  answer?: AnswerHold;
  /** Set by problemResponder when the request failed: the code answered and what was thrown. */
  problem?: { readonly code: ErrorCode; readonly cause: unknown };
}

/** The bounds that refuse requests to keep the service available (kvcrud_http_requests_shed_total's `limit`). */
export const SHED_LIMITS = [
  'inflight',
  'inflight_per_caller',
  'credential_checks',
  'body_rate',
  'body_bytes',
  'answer_bytes',
  'rate_limit',
  // The service's own bounds (ShedError): the change feeds open in all and per caller.
  'feeds',
  'feeds_per_caller',
] as const;
export type ShedLimit = (typeof SHED_LIMITS)[number];
