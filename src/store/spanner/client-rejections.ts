import type { Logger } from 'pino';

let installed = false;

/**
 * The Spanner client leaves promises of its own unhandled when Spanner is unreachable or a
 * database's sessions vanish (an emulator restarted): a call it retries internally that runs out
 * of time ("Total timeout of API google.spanner.v1.Spanner exceeded", about 30 s into an outage),
 * or a BeginTransaction on a session that no longer exists ("Session not found"), which it then
 * retries itself on a new session. Node's default for an unhandled rejection is to end the
 * process: a Spanner outage would restart every replica in a loop. This handler logs those, and
 * only those: gRPC errors raised by a call of the Spanner client. Any other unhandled rejection is
 * thrown again, so it ends the process as before.
 */
export function tolerateSpannerClientRejections(logger: Logger): void {
  if (installed) return;
  installed = true;
  process.on('unhandledRejection', (reason: unknown) => {
    if (isSpannerClientError(reason)) {
      logger.warn({ error: reason.message.split('\n')[0]?.slice(0, 300) }, 'spanner: a call the client made on its own failed, and nothing awaited it');
      return;
    }
    throw reason;
  });
}

/** An error with a gRPC status code whose call the Spanner client made (its stack passes through the client). */
export function isSpannerClientError(reason: unknown): reason is Error {
  return reason instanceof Error && typeof (reason as { code?: unknown }).code === 'number' && /[\\/]@google-cloud[\\/]spanner(-api)?[\\/]/.test(reason.stack ?? '');
}
