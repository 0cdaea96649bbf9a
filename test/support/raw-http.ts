import { type IncomingHttpHeaders, request as httpRequest } from 'node:http';
import type { ApiClient, ApiResponse } from './api-client.ts';

/** One HTTP request as a hostile or broken client may send it: any bytes, any header, repeated. */
export interface RawRequest {
  readonly method: string;
  /** Path and query, sent as they are (not encoded again). */
  readonly path: string;
  /** Header lines in order; a name may repeat. */
  readonly headers?: ReadonlyArray<readonly [string, string]>;
  readonly body?: Uint8Array;
  /** Source address to connect from (any of 127.0.0.0/8 on Linux), to stand for another client. */
  readonly localAddress?: string;
}

export interface RawResponse extends ApiResponse {
  /** The response body's size in bytes, as sent. */
  readonly bytes: number;
}

/**
 * sendRaw sends a request with node:http (fetch merges repeated headers and re-encodes paths)
 * and, when given a client, checks the answer against its OpenAPI document as ApiClient does.
 */
export async function sendRaw(baseUrl: string, raw: RawRequest, contract?: Pick<ApiClient, 'contract'>): Promise<RawResponse> {
  const { hostname, port } = new URL(baseUrl);
  // A name given an array of values is sent as that many header lines.
  const headers: Record<string, string[]> = {};
  for (const [name, value] of raw.headers ?? []) (headers[name.toLowerCase()] ??= []).push(value);
  if (raw.body !== undefined) headers['content-length'] ??= [String(raw.body.length)];
  const answer = await new Promise<{ status: number; headers: IncomingHttpHeaders; body: Buffer }>((resolve, reject) => {
    const request = httpRequest(
      { host: hostname, port, method: raw.method, path: raw.path, headers, agent: false, ...(raw.localAddress === undefined ? {} : { localAddress: raw.localAddress }) },
      (response) => {
        const chunks: Buffer[] = [];
        response.on('data', (chunk: Buffer) => chunks.push(chunk));
        response.on('end', () => resolve({ status: response.statusCode ?? 0, headers: response.headers, body: Buffer.concat(chunks) }));
        response.on('error', reject);
      },
    );
    request.on('error', reject);
    request.end(raw.body === undefined ? undefined : Buffer.from(raw.body));
  });
  const responseHeaders = new Headers();
  for (const [name, value] of Object.entries(answer.headers)) {
    if (value !== undefined) responseHeaders.set(name, Array.isArray(value) ? value.join(', ') : value);
  }
  const text = answer.body.toString('utf8');
  const mediaType = responseHeaders.get('content-type') ?? '';
  const body: unknown = /json/.test(mediaType) && text !== '' ? JSON.parse(text) : text;
  // As sent: the service routes the path as it is, without resolving dot segments.
  const pathname = raw.path.split('?')[0] ?? raw.path;
  contract?.contract.check(raw.method, pathname, answer.status, responseHeaders, body);
  return { status: answer.status, headers: responseHeaders, body, bytes: answer.body.length };
}
