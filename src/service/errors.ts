/**
 * ErrorCode is the closed set of stable error codes of the API. Clients act on these; each has
 * one HTTP status (see http/problems.ts). Adding a code is a contract change.
 */
export const ERROR_CODES = [
  'VALIDATION_FAILED',
  'MALFORMED_JSON',
  'UNSUPPORTED_MEDIA_TYPE',
  'PAYLOAD_TOO_LARGE',
  'REQUEST_TIMEOUT',
  'HEADERS_TOO_LARGE',
  'MALFORMED_REQUEST',
  'UNAUTHENTICATED',
  'PERMISSION_DENIED',
  'STORE_NOT_FOUND',
  'INSTANCE_NOT_FOUND',
  'TABLE_NOT_FOUND',
  'COLUMN_FAMILY_NOT_FOUND',
  'ROW_NOT_FOUND',
  'ROUTE_NOT_FOUND',
  'METHOD_NOT_ALLOWED',
  'TABLE_ALREADY_EXISTS',
  'INVALID_PAGE_TOKEN',
  'NOT_A_COUNTER',
  'INVALID_CURSOR',
  'CURSOR_EXPIRED',
  'NOT_SUPPORTED_BY_STORE',
  'BACKEND_UNAVAILABLE',
  'SHUTTING_DOWN',
  'DEADLINE_EXCEEDED',
  'INSUFFICIENT_STORAGE',
  'OVERLOADED',
  'RATE_LIMITED',
  'INTERNAL',
] as const;

export type ErrorCode = (typeof ERROR_CODES)[number];

/** One problem with one field of a request. */
export interface FieldError {
  /** Path of the field, such as `data[1].columnValue`; empty for the request body as a whole. */
  readonly path: string;
  readonly message: string;
}

/**
 * ApiError is a failure the caller is meant to see: its code, detail and extension members go
 * into the problem document as they are, so they must never carry backend internals.
 */
export class ApiError extends Error {
  readonly code: ErrorCode;
  readonly detail: string;
  readonly extensions: Readonly<Record<string, unknown>>;

  constructor(code: ErrorCode, detail: string, extensions: Record<string, unknown> = {}, cause?: unknown) {
    super(detail, cause === undefined ? undefined : { cause });
    this.name = 'ApiError';
    this.code = code;
    this.detail = detail;
    this.extensions = extensions;
  }
}

/**
 * The bounds of the service itself (not of the HTTP layer) that refuse requests to keep the
 * service available, as kvcrud_http_requests_shed_total's `limit` names them: the change feeds
 * open in all (`feeds`, FEEDS_MAX) and those of one caller (`feeds_per_caller`, FEEDS_MAX_PER_CALLER).
 */
export type ServiceShedLimit = 'feeds' | 'feeds_per_caller';

/**
 * ShedError is a request refused by one of those bounds: 503 OVERLOADED when the service is full,
 * 429 RATE_LIMITED when the caller is over its own share. The HTTP layer counts it as shed.
 */
export class ShedError extends ApiError {
  readonly limit: ServiceShedLimit;

  constructor(limit: ServiceShedLimit, code: 'OVERLOADED' | 'RATE_LIMITED', detail: string) {
    super(code, detail);
    this.name = 'ShedError';
    this.limit = limit;
  }
}

/**
 * IncompleteOperationError reports a multi-step operation that failed part-way: `cause` is the
 * failure (it decides the code and status), `progress` says what was and was not done.
 */
export class IncompleteOperationError extends Error {
  readonly progress: Readonly<Record<string, unknown>>;

  constructor(cause: unknown, progress: Record<string, unknown>) {
    super('operation failed part-way', { cause });
    this.name = 'IncompleteOperationError';
    this.progress = progress;
  }
}
