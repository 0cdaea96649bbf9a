import { type RequestListener, type Server, type ServerOptions, createServer } from 'node:http';
import type { Logger } from 'pino';
import { answerClientErrors } from './client-errors.ts';

/**
 * How the HTTP server treats slow and idle clients. Node's defaults let a client hold a socket
 * for five minutes with a trickled request, and check those limits only every 30 s.
 */
export const SERVER_LIMITS = {
  /** The request line and headers must arrive within this time (slowloris). */
  headersTimeoutMs: 10_000,
  /** The whole request, body included, must arrive within this time: 10 MiB at ~350 KiB/s. */
  requestTimeoutMs: 30_000,
  /**
   * An idle keep-alive connection is closed after this time. Longer than the 60 s idle timeout
   * of common load balancers, so the service never closes a connection a balancer is about to
   * reuse (which the balancer would report as a 502).
   */
  keepAliveTimeoutMs: 65_000,
  /** How often the two request timeouts are checked; also their precision. */
  connectionsCheckingIntervalMs: 1000,
  /**
   * Largest request line plus headers, in bytes. Node's 16 KiB default is too small for a 16 KiB
   * JWT in Authorization plus the other headers; a larger request gets 431.
   */
  maxHeaderSize: 64 * 1024,
} as const;

export type ServerLimits = { -readonly [K in keyof typeof SERVER_LIMITS]: number };

/**
 * createHttpServer makes the Node HTTP server for the app, with the limits above (tests may
 * shorten them). What Node refuses before the app sees a request is answered with a problem
 * document too, and logged to `logger`. The caller listens.
 */
export function createHttpServer(app: { callback(): RequestListener }, limits: Partial<ServerLimits> = {}, logger?: Logger): Server {
  const settings = { ...SERVER_LIMITS, ...limits };
  const options: ServerOptions = {
    headersTimeout: settings.headersTimeoutMs,
    requestTimeout: settings.requestTimeoutMs,
    keepAliveTimeout: settings.keepAliveTimeoutMs,
    connectionsCheckingInterval: settings.connectionsCheckingIntervalMs,
    maxHeaderSize: settings.maxHeaderSize,
  };
  const server = createServer(options, app.callback());
  answerClientErrors(server, settings, logger);
  return server;
}
