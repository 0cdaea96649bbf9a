import type { Context } from 'koa';

/**
 * StreamedAnswer is what an operation returns to answer with a stream it writes itself (a change
 * feed's events) instead of a JSON body: the router hands it the request's context once the
 * operation has run, and its status is the operation's success status.
 */
export abstract class StreamedAnswer {
  /** Takes over the response: sets its headers and body. */
  abstract send(ctx: Context): void;
}
