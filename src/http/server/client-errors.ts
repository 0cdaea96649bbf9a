import { randomUUID } from 'node:crypto';
import { STATUS_CODES, type ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import { ApiError, type ErrorCode } from '../../service/errors.ts';
import { toProblem } from '../problems.ts';

/** What Node's parser and timers report of a request they refuse before the app sees it. */
export interface ClientError extends Error {
  readonly code?: string;
  /** llhttp's words for a parse error, e.g. "Invalid header value char". */
  readonly reason?: string;
}

/** The limits a detail names: the server's own (tests may lower them). */
export interface ClientErrorLimits {
  readonly maxHeaderSize: number;
  readonly headersTimeoutMs: number;
  readonly requestTimeoutMs: number;
}

/**
 * A refusal as the problem document says it: Node answers these without a body, a type or a
 * request id (a bare `HTTP/1.1 431`), which no client can tell from a proxy's page.
 */
function refusal(error: ClientError, limits: ClientErrorLimits, inFlight: boolean): { code: ErrorCode; detail: string } {
  switch (error.code) {
    case 'HPE_HEADER_OVERFLOW':
      return { code: 'HEADERS_TOO_LARGE', detail: `The request line and headers are larger than ${limits.maxHeaderSize} bytes, the most the service reads. The connection is closed.` };
    case 'HPE_CHUNK_EXTENSIONS_OVERFLOW':
      return { code: 'PAYLOAD_TOO_LARGE', detail: 'The chunk extensions of the body are larger than the service reads. The connection is closed.' };
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return inFlight
        ? { code: 'REQUEST_TIMEOUT', detail: `The request did not arrive whole within ${limits.requestTimeoutMs} ms. The connection is closed.` }
        : { code: 'REQUEST_TIMEOUT', detail: `The request line and headers did not arrive within ${limits.headersTimeoutMs} ms. The connection is closed.` };
    default: {
      const why = typeof error.reason === 'string' && error.reason !== '' ? ` (${error.reason})` : '';
      return { code: 'MALFORMED_REQUEST', detail: `The request is not valid HTTP/1.1${why}, so none of it was read. The connection is closed.` };
    }
  }
}

/**
 * answerClientErrors answers what Node's HTTP server refuses before the app sees a request (headers
 * too large, bytes that are not HTTP, a request or headers too slow) with a problem document,
 * `X-Request-Id` and `Connection: close`, as every other failure is answered, and logs it under that
 * id. Where Node would write nothing (the socket is gone, or a response to the request has begun),
 * the connection is only closed.
 */
export function answerClientErrors(
  server: { on(event: 'clientError', listener: (error: ClientError, socket: Duplex) => void): unknown },
  limits: ClientErrorLimits,
  logger?: Logger,
): void {
  server.on('clientError', (error, socket) => {
    // The response of a request being handled, when the error is that request's timeout.
    const response = (socket as Duplex & { _httpMessage?: ServerResponse | null })._httpMessage ?? undefined;
    if (error.code === 'ECONNRESET' || !socket.writable || response?.headersSent === true) {
      socket.destroy();
      return;
    }
    const { code, detail } = refusal(error, limits, response !== undefined);
    const known = response?.getHeader('x-request-id');
    const requestId = typeof known === 'string' ? known : randomUUID();
    // The path only when a request was read: otherwise the bytes were not HTTP, or not all there.
    const path = response?.req.url?.split('?')[0] ?? '';
    const problem = toProblem(new ApiError(code, detail), { path, requestId });
    const body = JSON.stringify(problem);
    const head = [
      `HTTP/1.1 ${problem.status} ${STATUS_CODES[problem.status] ?? ''}`,
      'Content-Type: application/problem+json',
      `Content-Length: ${Buffer.byteLength(body)}`,
      `X-Request-Id: ${requestId}`,
      'Connection: close',
    ];
    logger?.info({ requestId, status: problem.status, code, reason: error.code }, 'request refused before it was read');
    // Sent, then closed: a client that keeps its side open does not keep the socket.
    socket.end(`${head.join('\r\n')}\r\n\r\n${body}`, () => socket.destroy());
  });
}
