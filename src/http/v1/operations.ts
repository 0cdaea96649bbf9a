import type { RouterMiddleware } from '@koa/router';
import Joi from 'joi';
import type { ErrorCode } from '../../service/errors.ts';
import type { AppState } from '../app-state.ts';
import { authorize } from '../middleware/authorize.ts';
import { type Operation, type Services, defineOperation } from '../operations/operation.ts';
import * as schemas from './schemas.ts';

/** Codes any v1 operation may answer with. */
export const V1_COMMON_ERRORS: readonly ErrorCode[] = [
  'VALIDATION_FAILED',
  'INSTANCE_NOT_FOUND',
  'BACKEND_UNAVAILABLE',
  'DEADLINE_EXCEEDED',
  'OVERLOADED',
  'RATE_LIMITED',
  'INTERNAL',
];

interface InstancePath {
  readonly instanceID: string;
}

// The guards have checked the instance before the body was read (v1Guards).
const instancePath = Joi.object<InstancePath>({ instanceID: Joi.string().required() });

/** The v1 API: four operations on the default store, whose wire shapes never change. */
export const V1_OPERATIONS: readonly Operation[] = [
  defineOperation<InstancePath, undefined, schemas.CreateTableBody>({
    operationId: 'createTable',
    tag: 'v1',
    role: 'admin',
    method: 'post',
    path: '/v1/{instanceID}/createTable',
    pathParameters: ['instanceID'],
    params: instancePath,
    summary: 'Create a table with one column family',
    description: 'Creates the table in the instance. Column families keep every version of a cell.',
    body: schemas.createTableBody,
    bodyExample: () => ({ tableName: 'orders', columnFamily: 'cf' }),
    success: {
      status: 201,
      description: 'The table was created.',
      schema: schemas.createTableResponse,
      example: ({ instance }) => ({ instanceID: instance, tableName: 'orders', columnFamily: 'cf' }),
    },
    errors: ['TABLE_ALREADY_EXISTS'],
    handle: ({ params, body }, { services, signal }) => services.legacyV1.createTable(params.instanceID, body, { signal }),
  }),
  defineOperation<InstancePath, undefined, schemas.InsertDataBody>({
    operationId: 'insertData',
    tag: 'v1',
    role: 'writer',
    method: 'post',
    path: '/v1/{instanceID}/insertData',
    pathParameters: ['instanceID'],
    params: instancePath,
    summary: 'Write cells to one row',
    description:
      'Writes all cells to the row in one atomic mutation: all are written or none is. Every cell gets the same ' +
      'timestamp, assigned by the service. Earlier versions of the columns are kept. For bytes that are not UTF-8, ' +
      'set `encoding` to "base64" on the cell and send its column name and value in base64.',
    body: schemas.insertDataBody,
    bodyExample: () => ({ tableName: 'orders', rowKeyId: 'order#1001', data: [{ columnFamily: 'cf', columnName: 'status', columnValue: 'shipped' }] }),
    success: {
      status: 200,
      description: 'The cells were written.',
      schema: schemas.insertDataResponse,
      example: ({ instance }) => ({ instanceID: instance, tableName: 'orders', rowKeyId: 'order#1001', cellsWritten: 1 }),
    },
    errors: ['TABLE_NOT_FOUND', 'COLUMN_FAMILY_NOT_FOUND'],
    handle: ({ params, body }, { services, signal }) => services.legacyV1.insertData(params.instanceID, body, { signal }),
  }),
  defineOperation<InstancePath, schemas.ReadCellDataQuery>({
    operationId: 'readCellData',
    tag: 'v1',
    role: 'reader',
    method: 'get',
    path: '/v1/{instanceID}/readCellData',
    pathParameters: ['instanceID'],
    params: instancePath,
    summary: 'Read the latest version of every column of a row',
    description:
      'Returns the cells in the shape insertData accepts, ordered by column family, then column name in byte order. ' +
      'A cell whose column name or value is not valid UTF-8 is returned with both in base64 and `encoding: "base64"`.',
    query: schemas.readCellDataQuery,
    success: {
      status: 200,
      description: 'The row.',
      schema: schemas.readCellDataResponse,
      example: ({ instance }) => ({
        instanceID: instance,
        tableName: 'orders',
        rowKeyId: 'order#1001',
        data: [{ columnFamily: 'cf', columnName: 'status', columnValue: 'shipped', timestamp: '2026-11-21T04:27:00.123000Z' }],
      }),
    },
    errors: ['TABLE_NOT_FOUND', 'ROW_NOT_FOUND'],
    handle: ({ params, query }, { services, signal }) => services.legacyV1.readCellData(params.instanceID, query, { signal }),
  }),
  defineOperation<InstancePath, undefined, schemas.DeleteTableBody>({
    operationId: 'deleteTable',
    tag: 'v1',
    role: 'admin',
    method: 'delete',
    path: '/v1/{instanceID}/deleteTable',
    pathParameters: ['instanceID'],
    params: instancePath,
    summary: 'Delete tables',
    description:
      'Checks that every named table exists, then deletes them in the order given. If any is missing, the answer is ' +
      '404 with `notFound` and nothing is deleted. If the data store fails part-way, the error lists the tables ' +
      '`deleted` and `notDeleted`.',
    body: schemas.deleteTableBody,
    bodyExample: () => ({ tableList: ['orders'] }),
    success: {
      status: 200,
      description: 'All the tables were deleted.',
      schema: schemas.deleteTableResponse,
      example: ({ instance }) => ({ instanceID: instance, deleted: ['orders'] }),
    },
    errors: ['TABLE_NOT_FOUND'],
    handle: ({ params, body }, { services, signal }) => services.legacyV1.deleteTables(params.instanceID, body, { signal }),
  }),
];

/**
 * The checks of a v1 operation before its body is read: the caller's grant on the instance of the
 * default store (403), then whether the default store serves the instance (404).
 */
export function v1Guards(services: Services, defaultStore: string): (operation: Operation) => Array<RouterMiddleware<AppState>> {
  const servedInstance: RouterMiddleware<AppState> = (ctx, next) => {
    services.legacyV1.requireInstance(ctx.params['instanceID'] ?? '');
    return next();
  };
  return (operation) => [authorize(operation.role, operation.operationId, defaultStore), servedInstance];
}
