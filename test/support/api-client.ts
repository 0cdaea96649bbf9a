import { OpenApiContract } from './openapi-contract.ts';

export interface ApiResponse {
  readonly status: number;
  readonly headers: Headers;
  /** Parsed JSON for JSON media types, otherwise the text. */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  readonly body: any;
}

export interface RequestOptions {
  /** Sent as JSON with Content-Type application/json. */
  readonly json?: unknown;
  /** Sent as is (set the Content-Type yourself). */
  readonly body?: string | Uint8Array;
  readonly headers?: Record<string, string>;
}

/**
 * ApiClient calls a running kvcrud over real HTTP and checks every response against the
 * service's own OpenAPI document before a test sees it.
 */
export class ApiClient {
  readonly baseUrl: string;
  readonly contract: OpenApiContract;
  /** Sent with every request (a request's own headers win). */
  readonly headers: Readonly<Record<string, string>>;

  private constructor(baseUrl: string, contract: OpenApiContract, headers: Record<string, string> = {}) {
    this.baseUrl = baseUrl;
    this.contract = contract;
    this.headers = headers;
  }

  /** Connects to the service at baseUrl and loads its /openapi.json (sending `headers`, for protected docs). */
  static async connect(baseUrl: string, headers: Record<string, string> = {}): Promise<ApiClient> {
    const response = await fetch(new URL('/openapi.json', baseUrl), { headers });
    if (!response.ok) throw new Error(`GET /openapi.json answered ${response.status}`);
    return new ApiClient(baseUrl, new OpenApiContract((await response.json()) as Record<string, unknown>));
  }

  /** A client for the same service and document that sends `headers` (a credential) with every request. */
  as(headers: Record<string, string>): ApiClient {
    return new ApiClient(this.baseUrl, this.contract, headers);
  }

  get(path: string, options?: RequestOptions): Promise<ApiResponse> {
    return this.request('GET', path, options);
  }

  post(path: string, json: unknown): Promise<ApiResponse> {
    return this.request('POST', path, { json });
  }

  delete(path: string, json: unknown): Promise<ApiResponse> {
    return this.request('DELETE', path, { json });
  }

  async request(method: string, path: string, options: RequestOptions = {}): Promise<ApiResponse> {
    const url = new URL(path, this.baseUrl);
    const headers: Record<string, string> = { ...this.headers, ...options.headers };
    let body: string | Uint8Array | undefined = options.body;
    if (options.json !== undefined) {
      body = JSON.stringify(options.json);
      headers['content-type'] ??= 'application/json';
    }
    const response = await fetch(url, { method, headers, ...(body === undefined ? {} : { body }) });
    const text = await response.text();
    const mediaType = response.headers.get('content-type') ?? '';
    const parsed: unknown = /json/.test(mediaType) && text !== '' ? JSON.parse(text) : text;
    this.contract.check(method, url.pathname, response.status, response.headers, parsed);
    return { status: response.status, headers: response.headers, body: parsed };
  }
}
