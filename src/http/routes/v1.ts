import type { Router, RouterContext, RouterMiddleware } from '@koa/router';
import type Joi from 'joi';
import type { Middleware } from 'koa';
import type { Role } from '../../auth/access.ts';
import type { ErrorCode } from '../../service/errors.ts';
import type {
  CreateTableInput,
  DeleteTableInput,
  InsertDataInput,
  ReadCellDataInput,
  RequestOptions,
  TableService,
} from '../../service/table-service.ts';
import type { AppState } from '../app-state.ts';
import { authorize } from '../middleware/authorize.ts';
import { jsonBody } from '../middleware/json-body.ts';
import { parseQuery } from '../query.ts';
import { clientGone } from '../client-gone.ts';
import * as schemas from '../schemas.ts';
import { validate } from '../validate.ts';

/**
 * One v1 endpoint, described once: the router serves it and openapi.ts documents it from the
 * same description, so the two cannot disagree.
 */
export interface Operation {
  readonly operationId: string;
  readonly method: 'get' | 'post' | 'delete';
  /** OpenAPI path template. */
  readonly path: string;
  readonly summary: string;
  readonly description: string;
  /** The least role a caller needs on the instance (admin includes writer includes reader). */
  readonly role: Role;
  /** Schema of the JSON body, for operations that take one. */
  readonly body?: Joi.ObjectSchema;
  /** Schema of the query parameters, for operations that take them. */
  readonly query?: Joi.ObjectSchema;
  readonly success: { readonly status: number; readonly description: string; readonly schema: Joi.ObjectSchema };
  /** Error codes particular to this operation; the ones every v1 operation can answer are added. */
  readonly errors: readonly ErrorCode[];
  readonly handle: (service: TableService, instanceID: string, input: never, options: RequestOptions) => Promise<unknown>;
}

/** Codes any v1 operation may answer with. */
export const COMMON_ERRORS: readonly ErrorCode[] = [
  'VALIDATION_FAILED',
  'INSTANCE_NOT_FOUND',
  'BACKEND_UNAVAILABLE',
  'DEADLINE_EXCEEDED',
  'OVERLOADED',
  'RATE_LIMITED',
  'INTERNAL',
];
/** Codes any operation with a JSON body may answer with. */
export const BODY_ERRORS: readonly ErrorCode[] = ['MALFORMED_JSON', 'UNSUPPORTED_MEDIA_TYPE', 'PAYLOAD_TOO_LARGE', 'REQUEST_TIMEOUT'];

export const V1_OPERATIONS: readonly Operation[] = [
  {
    operationId: 'createTable',
    role: 'admin',
    method: 'post',
    path: '/v1/{instanceID}/createTable',
    summary: 'Create a table with one column family',
    description: 'Creates the table in the instance. Column families keep every version of a cell.',
    body: schemas.createTableBody,
    success: { status: 201, description: 'The table was created.', schema: schemas.createTableResponse },
    errors: ['TABLE_ALREADY_EXISTS'],
    handle: (service, instanceID, input: CreateTableInput, options) => service.createTable(instanceID, input, options),
  },
  {
    operationId: 'insertData',
    role: 'writer',
    method: 'post',
    path: '/v1/{instanceID}/insertData',
    summary: 'Write cells to one row',
    description:
      'Writes all cells to the row in one atomic mutation: all are written or none is. Every cell gets the same ' +
      'timestamp, assigned by the service. Earlier versions of the columns are kept. For bytes that are not UTF-8, ' +
      'set `encoding` to "base64" on the cell and send its column name and value in base64.',
    body: schemas.insertDataBody,
    success: { status: 200, description: 'The cells were written.', schema: schemas.insertDataResponse },
    errors: ['TABLE_NOT_FOUND', 'COLUMN_FAMILY_NOT_FOUND'],
    handle: (service, instanceID, input: InsertDataInput, options) => service.insertData(instanceID, input, options),
  },
  {
    operationId: 'readCellData',
    role: 'reader',
    method: 'get',
    path: '/v1/{instanceID}/readCellData',
    summary: 'Read the latest version of every column of a row',
    description:
      'Returns the cells in the shape insertData accepts, ordered by column family, then column name in byte order. ' +
      'A cell whose column name or value is not valid UTF-8 is returned with both in base64 and `encoding: "base64"`.',
    query: schemas.readCellDataQuery,
    success: { status: 200, description: 'The row.', schema: schemas.readCellDataResponse },
    errors: ['TABLE_NOT_FOUND', 'ROW_NOT_FOUND'],
    handle: (service, instanceID, input: ReadCellDataInput, options) => service.readCellData(instanceID, input, options),
  },
  {
    operationId: 'deleteTable',
    role: 'admin',
    method: 'delete',
    path: '/v1/{instanceID}/deleteTable',
    summary: 'Delete tables',
    description:
      'Checks that every named table exists, then deletes them in the order given. If any is missing, the answer is ' +
      '404 with `notFound` and nothing is deleted. If the data store fails part-way, the error lists the tables ' +
      '`deleted` and `notDeleted`.',
    body: schemas.deleteTableBody,
    success: { status: 200, description: 'All the tables were deleted.', schema: schemas.deleteTableResponse },
    errors: ['TABLE_NOT_FOUND'],
    handle: (service, instanceID, input: DeleteTableInput, options) => service.deleteTables(instanceID, input, options),
  },
];

/** The codes an operation may answer with: the common ones, the body ones if it takes a body, then its own. */
export function operationErrors(operation: Operation): ErrorCode[] {
  return [...new Set([...COMMON_ERRORS, ...(operation.body ? BODY_ERRORS : []), ...operation.errors])];
}

/** Codes every v1 operation may answer with when callers must authenticate (AUTH_MODE other than none). */
export const AUTH_ERRORS: readonly ErrorCode[] = ['UNAUTHENTICATED', 'PERMISSION_DENIED'];

/**
 * v1Routes serves V1_OPERATIONS. For each request: the caller is authenticated first (401) and
 * counted against the in-flight bounds (`authenticate` does both), then rate limited if
 * configured (429), then authorized for the operation on the instance (403), then the instance
 * is checked (404), then the body's media type, size and rate, then the input against the
 * schema, and only then is the service called. Nothing about a request is looked at for a
 * caller who may not make it.
 */
export function v1Routes(
  router: Router<AppState>,
  service: TableService,
  options: {
    maxBodyBytes: number;
    minBodyBytesPerSecond?: number;
    authenticate: Middleware<AppState>;
    rateLimit?: Middleware<AppState> | undefined;
  },
): void {
  const body = jsonBody({ limitBytes: options.maxBodyBytes, minBytesPerSecond: options.minBodyBytesPerSecond ?? 0 });
  // The service checks the instance too; this runs it before the body is read and validated.
  const servedInstance: RouterMiddleware<AppState> = (ctx, next) => {
    service.requireInstance(ctx.params['instanceID'] ?? '');
    return next();
  };

  for (const operation of V1_OPERATIONS) {
    const path = operation.path.replace(/\{(\w+)\}/g, ':$1');
    const input = operation.body
      ? (ctx: RouterContext<AppState>) => validate<never>(operation.body as Joi.ObjectSchema, ctx.request.body)
      : (ctx: RouterContext<AppState>) => validate<never>(operation.query as Joi.ObjectSchema, parseQuery(ctx.querystring));
    const handler: RouterMiddleware<AppState> = async (ctx) => {
      const instanceID = ctx.params['instanceID'] ?? '';
      ctx.body = await operation.handle(service, instanceID, await input(ctx), { signal: clientGone(ctx) });
      ctx.status = operation.success.status;
    };
    const limited = options.rateLimit === undefined ? [] : [options.rateLimit];
    const access = [options.authenticate, ...limited, authorize(operation.role, operation.operationId), servedInstance];
    if (operation.body) {
      router[operation.method](path, ...access, body, handler);
    } else {
      router[operation.method](path, ...access, handler);
    }
  }
}
