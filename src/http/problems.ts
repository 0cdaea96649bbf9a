import { ApiError, type ErrorCode, IncompleteOperationError } from '../service/errors.ts';
import { INTERNAL_DETAIL, apiErrorOf } from '../service/store-errors.ts';
import { type StoreError, isStoreError } from '../store/errors.ts';

/** What each error code means over HTTP. The one table the error middleware and the OpenAPI document share. */
export const PROBLEM_TYPES: Readonly<Record<ErrorCode, { status: number; title: string; description: string }>> = {
  VALIDATION_FAILED: {
    status: 400,
    title: 'Request validation failed',
    description:
      'A parameter or body field is missing, of the wrong type, or out of bounds. `errors` lists the problems by field path ' +
      '(the first 20; `errorCount` says how many there were when there were more).',
  },
  MALFORMED_JSON: {
    status: 400,
    title: 'Malformed JSON',
    description:
      'The request body is not a JSON object or array in UTF-8 (bytes that are not UTF-8 are refused, never replaced), ' +
      'is cut short, or is not in the format its `Content-Encoding` names.',
  },
  UNSUPPORTED_MEDIA_TYPE: {
    status: 415,
    title: 'Unsupported media type',
    description: 'The request body is not `application/json` in UTF-8, has several `Content-Type` headers, or has a `Content-Encoding` other than gzip, deflate or br.',
  },
  PAYLOAD_TOO_LARGE: {
    status: 413,
    title: 'Payload too large',
    description: 'The request body is larger than the configured limit (MAX_BODY_BYTES), or its chunk extensions are larger than the service reads.',
  },
  REQUEST_TIMEOUT: {
    status: 408,
    title: 'Request timeout',
    description:
      'The request body arrived more slowly than the service accepts (MIN_BODY_BYTES_PER_SECOND, after a grace second), ' +
      'its headers took more than 10 s, or the whole request more than 30 s. The connection is closed.',
  },
  HEADERS_TOO_LARGE: {
    status: 431,
    title: 'Request header fields too large',
    description: 'The request line and headers are larger than the service reads (64 KiB). The connection is closed.',
  },
  MALFORMED_REQUEST: {
    status: 400,
    title: 'Malformed request',
    description:
      'The request is not valid HTTP/1.1 (a header with characters HTTP does not allow, both `Content-Length` and `Transfer-Encoding`…), ' +
      'so none of it was read. The connection is closed.',
  },
  UNAUTHENTICATED: {
    status: 401,
    title: 'Unauthenticated',
    description:
      'The request has no credential, or its API key or token is malformed, unknown, expired, badly signed, or for ' +
      'another issuer or audience. The `WWW-Authenticate` header says how to authenticate.',
  },
  PERMISSION_DENIED: {
    status: 403,
    title: 'Permission denied',
    description: "The caller's grant does not give the role this operation needs on this instance.",
  },
  STORE_NOT_FOUND: {
    status: 404,
    title: 'Store not found',
    description: 'The store in the path is not one this service is configured to serve (GET /v2/stores lists them).',
  },
  INSTANCE_NOT_FOUND: {
    status: 404,
    title: 'Instance not found',
    description: 'The instance in the path is not one this service is configured to serve (INSTANCE_IDS).',
  },
  TABLE_NOT_FOUND: { status: 404, title: 'Table not found', description: 'A named table does not exist in the instance.' },
  COLUMN_FAMILY_NOT_FOUND: {
    status: 404,
    title: 'Column family not found',
    description: 'A cell names a column family the table does not have. Nothing was written.',
  },
  ROW_NOT_FOUND: { status: 404, title: 'Row not found', description: 'The row has no cells.' },
  ROUTE_NOT_FOUND: { status: 404, title: 'Route not found', description: 'No endpoint has this path.' },
  METHOD_NOT_ALLOWED: {
    status: 405,
    title: 'Method not allowed',
    description: 'The path exists but not with this method; the `Allow` header lists the methods it has.',
  },
  TABLE_ALREADY_EXISTS: { status: 409, title: 'Table already exists', description: 'A table with this name exists in the instance.' },
  NOT_A_COUNTER: {
    status: 400,
    title: 'Not a counter',
    description:
      'An increment names a column whose latest live value is not 8 bytes (a 64-bit big-endian integer). Nothing was written: ' +
      'delete the column, or write it as a counter, first.',
  },
  INVALID_CURSOR: {
    status: 400,
    title: 'Invalid cursor',
    description: 'The change feed cursor is not one of this table: it belongs to another table, or was altered. Send a cursor the feed gave, or none to start from now.',
  },
  CURSOR_EXPIRED: {
    status: 410,
    title: 'Cursor expired',
    description:
      "The cursor or `since` is older than the store keeps changes (its `limits.changeRetentionSeconds`). Changes since may be lost to the caller: " +
      'read the table anew, then follow the feed from now.',
  },
  INVALID_PAGE_TOKEN: {
    status: 400,
    title: 'Invalid page token',
    description:
      'The page token is not one of this scan: it belongs to another table or query, or was altered. Send the previous ' +
      "page's `nextPageToken` with the same table and query parameters (only pageSize may change).",
  },
  NOT_SUPPORTED_BY_STORE: {
    status: 501,
    title: 'Not supported by the store',
    description:
      "The request needs something the store cannot do; `capability` names it among the store's published capabilities " +
      '(GET /v2/stores). Nothing was done.',
  },
  BACKEND_UNAVAILABLE: {
    status: 503,
    title: 'Backend unavailable',
    description:
      'The data store could not be reached or is overloaded, or (AUTH_MODE oidc) the token issuer\'s signing keys could not be fetched. ' +
      'Retry after the `Retry-After` delay.',
  },
  SHUTTING_DOWN: {
    status: 503,
    title: 'Shutting down',
    description: 'The service is draining before it stops: it finishes its in-flight requests and takes no new connections. Send requests to another replica.',
  },
  INSUFFICIENT_STORAGE: {
    status: 507,
    title: 'Insufficient storage',
    description:
      'The data store is out of space: its disk is full, it is at its memory limit (Redis `maxmemory` with `noeviction`), or a ' +
      'storage quota is reached. Nothing was written. Reads still work, and so do deletes but for a large deleteTable on a full ' +
      'disk (the embedded store needs room to free pages); writes fail until the operators free or add space, so retry after the ' +
      '`Retry-After` delay, not at once.',
  },
  DEADLINE_EXCEEDED: {
    status: 504,
    title: 'Deadline exceeded',
    description: 'The data store did not answer within the deadline (STORE_TIMEOUT_MS). A write may or may not have been applied.',
  },
  OVERLOADED: {
    status: 503,
    title: 'Overloaded',
    description:
      'The service has as many requests in flight as it takes (MAX_INFLIGHT), or as many change feeds open as it takes (FEEDS_MAX), ' +
      'or a large body or a batchGet answer waited 10 s for the memory to hold it. Retry after the `Retry-After` delay.',
  },
  RATE_LIMITED: {
    status: 429,
    title: 'Rate limited',
    description:
      'The caller sent more requests per second than allowed (RATE_LIMIT_PER_SECOND), has its share of the requests in flight while the ' +
      'service is near its limit (MAX_INFLIGHT_PER_CALLER), or has as many change feeds open as one caller may (FEEDS_MAX_PER_CALLER). ' +
      'Retry after the `Retry-After` delay.',
  },
  INTERNAL: { status: 500, title: 'Internal error', description: 'An unexpected failure; the requestId identifies it in the logs.' },
};

/** Slug of an error code for its problem type URI: TABLE_NOT_FOUND -> table-not-found. */
export function problemSlug(code: ErrorCode): string {
  return code.toLowerCase().replaceAll('_', '-');
}

/** The problem type URI of a code. Relative: it resolves against the service, which documents it. */
export function problemType(code: ErrorCode): string {
  return `/problems/${problemSlug(code)}`;
}

/** An RFC 9457 problem document, with the kvcrud extension members. */
export interface Problem {
  type: string;
  title: string;
  status: number;
  detail: string;
  instance: string;
  code: ErrorCode;
  requestId: string;
  [extension: string]: unknown;
}

/**
 * toProblem turns anything thrown while handling a request into the problem the caller sees.
 * Only ApiErrors and the categories of StoreErrors reach the caller; everything else becomes
 * INTERNAL with a generic detail, so no message of a backend or a bug leaks out.
 */
export function toProblem(error: unknown, request: { path: string; requestId: string }): Problem {
  let extensions: Record<string, unknown> = {};
  let cause = error;
  if (error instanceof IncompleteOperationError) {
    extensions = { ...error.progress };
    cause = error.cause;
  }
  const { code, detail, ...more } = describe(cause);
  const type = PROBLEM_TYPES[code];
  return {
    type: problemType(code),
    title: type.title,
    status: type.status,
    detail,
    instance: request.path,
    code,
    requestId: request.requestId,
    ...more,
    ...extensions,
  };
}


function describe(error: unknown): { code: ErrorCode; detail: string } & Record<string, unknown> {
  if (error instanceof ApiError) return { ...error.extensions, code: error.code, detail: error.detail };
  if (isStoreError(error)) return describeStoreError(error);
  return { code: 'INTERNAL', detail: INTERNAL_DETAIL };
}

function describeStoreError(error: StoreError): { code: ErrorCode; detail: string } & Record<string, unknown> {
  const mapped = apiErrorOf(error);
  return { ...mapped.extensions, code: mapped.code, detail: mapped.detail };
}
