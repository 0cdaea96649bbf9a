/** What middleware leaves on ctx.state for the handlers after it. */
export interface AppState {
  /** Set by the requestId middleware, first in the chain. */
  requestId: string;
}
