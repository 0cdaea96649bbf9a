import type { RouterMiddleware } from '@koa/router';
import Joi from 'joi';
import { usableStores } from '../../auth/access.ts';
import { ApiError, type ErrorCode } from '../../service/errors.ts';
import type { MutationFields } from '../../service/rows.ts';
import type { TableTarget } from '../../service/tables.ts';
import { shorten } from '../../service/text.ts';
import type { AppState } from '../app-state.ts';
import { authorize } from '../middleware/authorize.ts';
import { type Operation, type Services, defineOperation } from '../operations/operation.ts';
import { cellOutputs, cellSets } from './cells.ts';
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

/** The default store's table a v1 request names. */
function tableTarget(services: Services, params: InstancePath, table: string): TableTarget {
  return { store: services.stores.default.name, instance: params.instanceID, table };
}

/** v1's names for the fields the service's limit checks refer to. */
const INSERT_FIELDS: MutationFields = {
  key: 'rowKeyId',
  mutations: 'data',
  field: (index, name) => `data[${index}].${name === 'column' ? 'columnName' : name === 'value' ? 'columnValue' : name}`,
};

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
    description: 'Creates the table in the instance. Its column family keeps the latest version of each cell (V1_MAX_VERSIONS: that many, or 0 for every version).',
    body: schemas.createTableBody,
    bodyExample: () => ({ tableName: 'orders', columnFamily: 'cf' }),
    success: {
      status: 201,
      description: 'The table was created.',
      schema: schemas.createTableResponse,
      example: ({ instance }) => ({ instanceID: instance, tableName: 'orders', columnFamily: 'cf' }),
    },
    errors: ['TABLE_ALREADY_EXISTS', 'INSUFFICIENT_STORAGE'],
    handle: async ({ params, body }, { services, signal }) => {
      const { store } = services.stores.default;
      // V1_MAX_VERSIONS (0: every version). A store that keeps only the latest keeps one whatever
      // it says: v1, which reads only the latest, cannot tell.
      const maxVersions = store.capabilities.multipleVersions ? services.v1MaxVersions : 1;
      const family = maxVersions === 0 ? { name: body.columnFamily } : { name: body.columnFamily, maxVersions };
      await services.tables.create(tableTarget(services, params, body.tableName), [family], { signal });
      return { instanceID: params.instanceID, tableName: body.tableName, columnFamily: body.columnFamily };
    },
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
    errors: ['TABLE_NOT_FOUND', 'COLUMN_FAMILY_NOT_FOUND', 'INSUFFICIENT_STORAGE'],
    handle: async ({ params, body }, { services, signal }) => {
      const cells = await cellSets(body.data);
      await services.rows.mutate(tableTarget(services, params, body.tableName), Buffer.from(body.rowKeyId, 'utf8'), cells, INSERT_FIELDS, { signal });
      return { instanceID: params.instanceID, tableName: body.tableName, rowKeyId: body.rowKeyId, cellsWritten: cells.length };
    },
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
    holdsRows: true,
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
    handle: async ({ params, query }, { services, signal, answer }) => {
      const row = await services.rows.read(tableTarget(services, params, query.tableName), Buffer.from(query.id, 'utf8'), { versions: 1 }, 'id', { signal, answer });
      if (row === null) throw new ApiError('ROW_NOT_FOUND', `Row "${shorten(query.id)}" does not exist in table "${query.tableName}".`);
      const data = await cellOutputs(row.cells);
      return { instanceID: params.instanceID, tableName: query.tableName, rowKeyId: query.id, data };
    },
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
    // The embedded store needs room in its journal to free a large table's pages.
    errors: ['TABLE_NOT_FOUND', 'INSUFFICIENT_STORAGE'],
    handle: async ({ params, body }, { services, signal }) => ({
      instanceID: params.instanceID,
      deleted: await services.tables.deleteMany(services.stores.default.name, params.instanceID, body.tableList, { signal }),
    }),
  }),
];

/**
 * The checks of a v1 operation before its body is read: the caller's grant on the instance of the
 * default store (403), then whether the default store serves the instance (404).
 */
export function v1Guards(services: Services, defaultStore: string): (operation: Operation) => Array<RouterMiddleware<AppState>> {
  const servedInstance: RouterMiddleware<AppState> = (ctx, next) => {
    const instanceID = ctx.params['instanceID'] ?? '';
    if (!services.stores.default.instances.includes(instanceID)) {
      // The served instances are named only to a caller who may use them all: naming them tells
      // it nothing new. Without authentication every caller may.
      const caller = ctx.state.caller;
      const visible = caller === undefined ? [] : (usableStores(caller, services.stores).find((store) => store.name === defaultStore)?.instances ?? []);
      const served = services.stores.default.instances;
      const list = visible.length === served.length ? ` It serves ${served.map((name) => `"${name}"`).join(', ')}.` : '';
      throw new ApiError(
        'INSTANCE_NOT_FOUND',
        `Instance "${shorten(instanceID)}" is not served by this service.${list} The served instances are set by INSTANCE_IDS (with STORES_FILE, by the default store's instances).`,
      );
    }
    ctx.state.store = defaultStore;
    return next();
  };
  return (operation) => [authorize(operation.role, operation.operationId, defaultStore), servedInstance];
}
