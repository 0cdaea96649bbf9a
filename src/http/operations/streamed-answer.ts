import type { Context } from 'koa';

/**
 * StreamedAnswer is what an operation returns to answer with a stream it writes itself (a change
 * feed's events, or a long poll's answer once it has gathered it) instead of a JSON body: the
 * router hands it the request's context once the operation has run, and its status is the
 * operation's success status. The request's middleware is done once it has been handed over, so
 * the request gives back its in-flight slot (load-shedding.ts) then, whatever the stream does after.
 */
export abstract class StreamedAnswer {
  /** Takes over the response: sets its headers and body. */
  abstract send(ctx: Context): void;
}
