import type { ServerResponse } from 'node:http';

const callbacks = new WeakMap<ServerResponse, Array<() => void>>();

/**
 * whenClosed calls `callback` when the response closes: after it has been written, or when its
 * client has gone. The service's callbacks for one response (its log line, the signal of work done
 * for the client, its hold on the answer budget) share one 'close' listener. A streamed answer
 * adds seven of Koa's stream pipeline, and tracing one: with a listener each, a response passed the
 * ten at which Node warns of a leak, once per answer.
 *
 * The caller checks first that the response has not closed already (`res.destroyed`): then no
 * 'close' comes.
 */
export function whenClosed(res: ServerResponse, callback: () => void): void {
  const registered = callbacks.get(res);
  if (registered !== undefined) {
    registered.push(callback);
    return;
  }
  const list = [callback];
  callbacks.set(res, list);
  res.once('close', () => {
    callbacks.delete(res);
    for (const each of list) each();
  });
}
