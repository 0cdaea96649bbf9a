import type { ErrorCode } from '../../service/errors.ts';
import { PROBLEM_TYPES, problemType } from '../problems.ts';
import { type JsonObject, toJsonSchema } from './json-schema.ts';
import { AUTH_ERRORS, type ExampleNames, type Operation, operationErrors } from './operation.ts';

export type { ExampleNames, JsonObject };
export { toJsonSchema };

const PROBLEM_JSON = 'application/problem+json';
export const ref = (kind: string, name: string): JsonObject => ({ $ref: `#/components/${kind}/${name}` });

export interface OperationDocsOptions {
  /** Whether callers must authenticate: every operation then may answer 401 and 403, and names its role. */
  readonly authenticated: boolean;
  /** The OpenAPI security requirement of the operations when callers authenticate. */
  readonly security: readonly JsonObject[];
  /** The codes every operation of a tag (v1, v2) may answer with. */
  readonly commonErrors: Readonly<Record<Operation['tag'], readonly ErrorCode[]>>;
  readonly examples: ExampleNames;
}

/**
 * operationPaths describes operations as OpenAPI path items, adding the schemas they name to
 * `componentSchemas`: parameters, request body with a working example, the success response, and
 * one problem response per status with a real example per code.
 */
export function operationPaths(
  operations: readonly Operation[],
  componentSchemas: JsonObject,
  options: OperationDocsOptions,
): Record<string, JsonObject> {
  const paths: Record<string, JsonObject> = {};
  for (const operation of operations) {
    const successName = componentName(operation.operationId, 'Response');
    const success: JsonObject = {
      description: operation.success.description,
      headers: REQUEST_ID_HEADER,
    };
    if (operation.success.schema !== undefined) {
      componentSchemas[successName] = toJsonSchema(operation.success.schema);
      success['content'] = {
        'application/json': { schema: ref('schemas', successName), ...exampleOf(operation.success.example, options.examples) },
        ...(operation.success.eventStream === undefined ? {} : { 'text/event-stream': { schema: { type: 'string', description: operation.success.eventStream } } }),
      };
    }
    const codes = [...operationErrors(operation, options.commonErrors[operation.tag]), ...(options.authenticated ? AUTH_ERRORS : [])];
    const entry: JsonObject = {
      operationId: operation.operationId,
      tags: [operation.tag],
      summary: operation.summary,
      description: options.authenticated
        ? `${operation.description}\n\nNeeds the \`${operation.role}\` role (or a higher one) on the ${operation.tag === 'v1' ? 'instance' : 'store and instance'}.`
        : operation.description,
      ...(options.authenticated ? { security: options.security } : {}),
      parameters: [...operation.pathParameters.map((name) => ref('parameters', name)), ...queryParameters(operation)],
      responses: {
        [operation.success.status]: success,
        ...problemResponses(codes, examplePath(operation.path, options.examples)),
      },
    };
    if (operation.body) {
      const requestName = componentName(operation.operationId, 'Request');
      componentSchemas[requestName] = toJsonSchema(operation.body);
      entry['requestBody'] = {
        required: true,
        content: { 'application/json': { schema: ref('schemas', requestName), ...exampleOf(operation.bodyExample, options.examples) } },
      };
    }
    paths[operation.path] = { ...paths[operation.path], [operation.method]: entry };
  }
  return paths;
}

/** `tables.batchDelete` + `Request` -> `TablesBatchDeleteRequest`; `createTable` -> `CreateTableRequest`. */
function componentName(operationId: string, suffix: string): string {
  return `${operationId
    .split('.')
    .map((part) => `${part[0]?.toUpperCase() ?? ''}${part.slice(1)}`)
    .join('')}${suffix}`;
}

function exampleOf(example: ((names: ExampleNames) => unknown) | undefined, names: ExampleNames): JsonObject {
  return example === undefined ? {} : { example: example(names) };
}

/** The operation's path with the example store and instance, as the `instance` of an example problem. */
function examplePath(template: string, names: ExampleNames): string {
  const values: Record<string, string> = { instanceID: names.instance, instance: names.instance, store: names.store, table: 'orders', key: 'order%231001' };
  return template.replace(/\{(\w+)\}/g, (whole, name: string) => values[name] ?? whole);
}

function queryParameters(operation: Operation): JsonObject[] {
  if (!operation.query) return [];
  const schema = toJsonSchema(operation.query) as { properties?: Record<string, JsonObject>; required?: string[] };
  return Object.entries(schema.properties ?? {}).map(([name, property]) => {
    const { description, examples, ...rest } = property as { description?: string; examples?: unknown[]; type?: string };
    return {
      name,
      in: 'query',
      required: schema.required?.includes(name) ?? false,
      ...(description === undefined ? {} : { description }),
      // Arrays are comma-separated lists (query.ts).
      ...(rest.type === 'array' ? { style: 'form', explode: false } : {}),
      ...(examples?.[0] === undefined ? {} : { example: examples[0] }),
      schema: rest,
    };
  });
}

/**
 * Codes any request may be answered with, whatever its operation: headers larger than the service
 * reads (431, answered before routing), and a method the path does not serve (405: the document
 * says it of each operation of the path, since OpenAPI has no place for a path's other methods).
 */
const EVERY_REQUEST_ERRORS: readonly ErrorCode[] = ['METHOD_NOT_ALLOWED', 'HEADERS_TOO_LARGE'];

/** The header every answer carries, success or failure. */
export const REQUEST_ID_HEADER: JsonObject = { 'X-Request-Id': ref('headers', 'X-Request-Id') };

/**
 * One response per status, whose schema admits exactly the codes the operation can answer with
 * (and EVERY_REQUEST_ERRORS), with the X-Request-Id header, and an example of each of those codes
 * as the operation would answer it.
 */
export function problemResponses(codes: readonly ErrorCode[], path: string): JsonObject {
  const byStatus = new Map<number, ErrorCode[]>();
  for (const code of new Set([...codes, ...EVERY_REQUEST_ERRORS])) {
    const status = PROBLEM_TYPES[code].status;
    byStatus.set(status, [...(byStatus.get(status) ?? []), code]);
  }
  const responses: JsonObject = {};
  for (const [status, statusCodes] of [...byStatus].sort(([a], [b]) => a - b)) {
    responses[status] = {
      description: statusCodes.map((code) => `\`${code}\`: ${PROBLEM_TYPES[code].description}`).join('\n\n'),
      headers: {
        ...REQUEST_ID_HEADER,
        ...(status === 503 || status === 429 || status === 507 ? { 'Retry-After': ref('headers', 'Retry-After') } : {}),
        ...(status === 401 ? { 'WWW-Authenticate': ref('headers', 'WWW-Authenticate') } : {}),
        ...(status === 405 ? { Allow: ref('headers', 'Allow') } : {}),
      },
      content: {
        [PROBLEM_JSON]: {
          schema: { allOf: [ref('schemas', 'Problem'), { properties: { code: { enum: statusCodes }, status: { const: status } } }] },
          examples: Object.fromEntries(statusCodes.map((code) => [code, { summary: PROBLEM_TYPES[code].title, value: problemExample(code, path) }])),
        },
      },
    };
  }
  return responses;
}

/** What the service answers with `code` (detail and extension members of a typical case). */
const PROBLEM_EXAMPLES: Readonly<Record<ErrorCode, { readonly detail: string } & JsonObject>> = {
  VALIDATION_FAILED: {
    detail: 'tableName is required.',
    errors: [{ path: 'tableName', message: 'tableName is required' }],
  },
  MALFORMED_JSON: { detail: 'The body is not a valid JSON object or array: it ends before the JSON does.' },
  UNSUPPORTED_MEDIA_TYPE: { detail: 'The body must be application/json, not "text/plain".' },
  PAYLOAD_TOO_LARGE: { detail: 'The body is larger than the limit of 10485760 bytes.' },
  REQUEST_TIMEOUT: { detail: 'The body arrived too slowly. Send it at once, or at least at the rate the service asks for.' },
  HEADERS_TOO_LARGE: { detail: 'The request line and headers are larger than 65536 bytes, the most the service reads. The connection is closed.' },
  MALFORMED_REQUEST: { detail: 'The request is not valid HTTP/1.1 (Invalid header value char), so none of it was read. The connection is closed.' },
  UNAUTHENTICATED: { detail: 'The request has no credential: send an API key or a bearer token.' },
  PERMISSION_DENIED: { detail: 'apikey:orders-svc may not createTable on instance "local": that needs the admin role there.' },
  STORE_NOT_FOUND: { detail: 'Store "prod-bt" is not served by this service. You may use "embedded". GET /v2/stores lists the stores you may use, with their instances.' },
  INSTANCE_NOT_FOUND: { detail: 'Instance "orders-prod" is not served by this service. It serves "local". The served instances are set by INSTANCE_IDS (with STORES_FILE, by the default store\'s instances).' },
  TABLE_NOT_FOUND: { detail: 'Table "orders" does not exist in the instance.' },
  COLUMN_FAMILY_NOT_FOUND: { detail: 'Column family "meta" does not exist in the table. Nothing was written.' },
  ROW_NOT_FOUND: { detail: 'Row "order#1001" does not exist in table "orders".' },
  ROUTE_NOT_FOUND: { detail: 'No problem type at /problems/table-missing.' },
  METHOD_NOT_ALLOWED: { detail: 'PUT is not allowed on /v1/local/createTable; allowed: POST.' },
  TABLE_ALREADY_EXISTS: { detail: 'Table "orders" already exists in the instance.' },
  NOT_A_COUNTER: { detail: 'An increment names a column whose latest value is not an 8-byte counter. Nothing was written.' },
  INVALID_CURSOR: { detail: 'The cursor is not one of this table: it belongs to another table, or was altered.' },
  CURSOR_EXPIRED: { detail: 'The feed position is older than the store keeps changes. Start again from now, and read the table anew.' },
  INVALID_PAGE_TOKEN: {
    detail:
      'pageToken is not a token of this scan: send the nextPageToken of the previous page, with the same table and query parameters (pageSize may change).',
    errors: [{ path: 'pageToken', message: 'pageToken does not belong to this scan' }],
  },
  NOT_SUPPORTED_BY_STORE: { detail: 'Store "cache" cannot scan in reverse key order (capability reverseScan).', capability: 'reverseScan' },
  BACKEND_UNAVAILABLE: { detail: 'The data store is unavailable. Retry later.' },
  SHUTTING_DOWN: { detail: 'The service is shutting down: it finishes its in-flight requests and takes no new connections.' },
  DEADLINE_EXCEEDED: { detail: 'The data store did not answer in time.' },
  INSUFFICIENT_STORAGE: {
    detail: 'The data store is out of space: nothing was written. Reads still work; writes fail until the operators free or add space.',
  },
  OVERLOADED: { detail: 'The service is handling 256 requests, its limit. Retry shortly.' },
  RATE_LIMITED: { detail: 'More than 100 requests per second. Retry after the Retry-After delay.' },
  INTERNAL: { detail: 'The service failed unexpectedly. Report the requestId to the operators.' },
};

function problemExample(code: ErrorCode, path: string): JsonObject {
  const { detail, ...extensions } = PROBLEM_EXAMPLES[code];
  const type = PROBLEM_TYPES[code];
  return {
    type: problemType(code),
    title: type.title,
    status: type.status,
    detail,
    instance: path,
    code,
    requestId: 'c0ffee00-1234-4abc-9def-0123456789ab',
    ...extensions,
  };
}
