import type { ErrorCode } from '../service/errors.ts';

/** What middleware leaves on ctx.state for the handlers after it. */
export interface AppState {
  /** Set by the requestId middleware, first in the chain. */
  requestId: string;
  /** Set by problemResponder when the request failed: the code answered and what was thrown. */
  problem?: { readonly code: ErrorCode; readonly cause: unknown };
}
