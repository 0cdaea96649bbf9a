import type { Logger } from 'pino';

let installed = false;

/**
 * The Spanner client leaves promises of its own unhandled when Spanner is unreachable or a
 * database's sessions vanish (an emulator restarted): a call it retries internally that runs out
 * of time ("Total timeout of API google.spanner.v1.Spanner exceeded", about 30 s into an outage),
 * or a BeginTransaction on a session that no longer exists ("Session not found"), which it then
 * retries itself on a new session. Node's default for an unhandled rejection is to end the
 * process: a Spanner outage would restart every replica in a loop. This handler logs those, and
 * only those (isSpannerClientError). Any other unhandled rejection is thrown again, so it ends the
 * process as before.
 */
export function tolerateSpannerClientRejections(logger: Logger): void {
  if (installed) return;
  installed = true;
  const tolerate = (reason: unknown): void => {
    if (isSpannerClientError(reason)) {
      const message = reason instanceof Error ? reason.message : String(reason);
      logger.warn({ error: message.split('\n')[0]?.slice(0, 300) }, 'spanner: a call the client made on its own failed, and nothing awaited it');
      return;
    }
    // With no other listener, Node would have ended the process: so it still does. Another
    // listener (a test runner's) decides for itself.
    if (process.listenerCount('unhandledRejection') === 1) throw reason;
  };
  process.on('unhandledRejection', tolerate);
}

const CLOSED = 'The client has already been closed.';

/**
 * A failure of a call the Spanner client made: an error raised on the client's path (its stack
 * passes through it) with a gRPC status code, or the client's own answer to a call made after it
 * was closed (when the store closes, calls the client retries on its own may still be pending).
 */
export function isSpannerClientError(reason: unknown): boolean {
  if (reason === CLOSED) return true;
  if (!(reason instanceof Error) || !/[\\/]@google-cloud[\\/]spanner(-api)?[\\/]/.test(reason.stack ?? '')) return false;
  return typeof (reason as { code?: unknown }).code === 'number' || reason.message === CLOSED;
}
