import { usableStores } from '../../auth/access.ts';
import { ApiError, type ErrorCode } from '../../service/errors.ts';
import { publishedLimits } from '../../service/limits.ts';
import type { TableTarget } from '../../service/tables.ts';
import { shorten } from '../../service/text.ts';
import { type Operation, defineOperation } from '../operations/operation.ts';
import { bodyBytes, columnSelector, inBase64, renderCell, renderCells, renderKey, renderRow, urlBytes, withCells } from './bytes.ts';
import { batchEntries, cellFields, familySpec, mutationFields, mutationsOf, requireDistinctCells, setsOf } from './mapping.ts';
import { CHANGES_OPERATION } from './changes.ts';
import { COORDINATION_OPERATIONS, int64Selectors } from './coordination.ts';
import { usableNames } from './guards.ts';
import * as schemas from './schemas.ts';

/** Codes any v2 operation may answer with. */
export const V2_COMMON_ERRORS: readonly ErrorCode[] = ['VALIDATION_FAILED', 'OVERLOADED', 'RATE_LIMITED', 'INTERNAL'];

/** Codes of an operation on an instance of a store: the target, and the store call. */
const ON_INSTANCE: readonly ErrorCode[] = ['STORE_NOT_FOUND', 'INSTANCE_NOT_FOUND', 'BACKEND_UNAVAILABLE', 'DEADLINE_EXCEEDED'];
const ON_TABLE: readonly ErrorCode[] = [...ON_INSTANCE, 'TABLE_NOT_FOUND'];

const TABLES = '/v2/stores/{store}/instances/{instance}/tables';
const TABLE = `${TABLES}/{table}`;
const ROWS = `${TABLE}/rows`;
const ROW = `${ROWS}/{key}`;
const INSTANCE_PARAMETERS = ['store', 'instance'];
const TABLE_PARAMETERS = [...INSTANCE_PARAMETERS, 'table'];
const ROW_PARAMETERS = [...TABLE_PARAMETERS, 'key'];

/** A store as GET /v2/stores describes it, for the examples: one that can do everything, with Bigtable's bounds. */
function exampleStore(name: string, instance: string) {
  const MIB = 1024 * 1024;
  return {
    name,
    driver: name,
    default: true,
    instances: [instance],
    capabilities: { multipleVersions: true, maxAge: true, reverseScan: true, checkAndMutate: true, readModifyWrite: true, changeFeed: true },
    limits: publishedLimits({
      keyBytes: 4096,
      columnBytes: 16 * 1024,
      valueBytes: 100 * MIB,
      mutationsPerRow: 100_000,
      bytesPerRow: 256 * MIB,
      entriesPerBatch: 1000,
      mutationsPerBatch: 100_000,
      bytesPerBatch: 256 * MIB,
      rowsPerPage: 1000,
      familiesPerTable: 100,
      versionsPerRead: 1000,
      timestampGranularityMicros: 1000,
      conditionsPerCheck: 16,
      rulesPerRow: 1000,
      changeRetentionSeconds: 86_400,
    }),
  };
}

const target = (params: schemas.TablePath): TableTarget => ({ store: params.store, instance: params.instance, table: params.table });
const selection = (query: schemas.ReadQuery, inUrl: boolean) => ({
  columns: query.columns?.map((column) => columnSelector(column, inBase64(query), inUrl)),
  versions: query.versions ?? 1,
});

/**
 * The v2 API, in the order a newcomer uses it: stores, tables, rows, then deletion; the explorer
 * shows them so. Each example request works as it is against a fresh service, in that order,
 * but the last: both table deletions name the example table, which the one before deleted.
 */
export const V2_OPERATIONS: readonly Operation[] = [
  defineOperation<undefined, schemas.NoQuery>({
    operationId: 'stores.list',
    tag: 'v2',
    role: 'reader',
    method: 'get',
    path: '/v2/stores',
    pathParameters: [],
    query: schemas.noQuery,
    summary: 'List the stores',
    description: 'The stores the caller may use, each with the instances it may use there, what the store can do and its limits.',
    success: {
      status: 200,
      description: 'The stores.',
      schema: schemas.storesResponse,
      example: ({ store, instance }) => ({ stores: [exampleStore(store, instance)] }),
    },
    errors: [],
    handle: (_input, { services, caller }) => {
      const usable = caller === undefined ? [] : usableStores(caller, services.stores);
      return Promise.resolve({
        stores: usable.map(({ name, instances }) =>
          services.stores.describe(
            services.stores.store(name),
            instances.map((instance) => instance.name),
          ),
        ),
      });
    },
  }),
  defineOperation<schemas.StorePath, schemas.NoQuery>({
    operationId: 'stores.get',
    tag: 'v2',
    role: 'reader',
    method: 'get',
    path: '/v2/stores/{store}',
    pathParameters: ['store'],
    params: schemas.storePath,
    query: schemas.noQuery,
    summary: 'Describe a store',
    description: 'The store, with the instances the caller may use there, what it can do (`capabilities`) and its `limits`.',
    success: { status: 200, description: 'The store.', schema: schemas.storeResponse, example: ({ store, instance }) => exampleStore(store, instance) },
    errors: ['STORE_NOT_FOUND'],
    handle: ({ params }, { services, caller }) => {
      const usable = caller === undefined ? undefined : usableStores(caller, services.stores).find((store) => store.name === params.store);
      return Promise.resolve(
        services.stores.describe(
          services.stores.store(params.store, usableNames(caller, services)),
          usable?.instances.map((instance) => instance.name) ?? [],
        ),
      );
    },
  }),
  defineOperation<schemas.InstancePath, schemas.NoQuery, schemas.CreateTableBody>({
    operationId: 'tables.create',
    tag: 'v2',
    role: 'admin',
    method: 'post',
    path: TABLES,
    pathParameters: INSTANCE_PARAMETERS,
    params: schemas.instancePath,
    query: schemas.noQuery,
    body: schemas.createTableBody,
    bodyExample: () => ({ name: 'orders', families: [{ name: 'cf', maxVersions: 3 }, { name: 'meta' }] }),
    summary: 'Create a table',
    description:
      'Creates the table with its column families, each with its retention policy: `maxVersions` keeps the newest N versions of each column, ' +
      '`maxAgeSeconds` drops versions older than that; a version is gone as soon as either says so, and no read returns it. ' +
      'A family with neither keeps every version.',
    success: {
      status: 201,
      description: 'The table was created; its families, ordered by name.',
      schema: schemas.tableResponse,
      example: () => ({ name: 'orders', families: [{ name: 'cf', maxVersions: 3 }, { name: 'meta' }] }),
    },
    errors: [...ON_INSTANCE, 'TABLE_ALREADY_EXISTS', 'NOT_SUPPORTED_BY_STORE', 'INSUFFICIENT_STORAGE'],
    handle: ({ params, body }, { services, signal }) =>
      services.tables.create({ ...params, table: body.name }, body.families.map(familySpec), { signal }),
  }),
  defineOperation<schemas.InstancePath, schemas.NoQuery>({
    operationId: 'tables.list',
    tag: 'v2',
    role: 'reader',
    method: 'get',
    path: TABLES,
    pathParameters: INSTANCE_PARAMETERS,
    params: schemas.instancePath,
    query: schemas.noQuery,
    summary: 'List tables',
    description: 'The names of the tables of the instance, in byte order.',
    success: { status: 200, description: 'The tables.', schema: schemas.tablesResponse, example: () => ({ tables: ['orders'] }) },
    errors: ON_INSTANCE,
    handle: async ({ params }, { services, signal }) => ({ tables: await services.tables.list(params.store, params.instance, { signal }) }),
  }),
  defineOperation<schemas.TablePath, schemas.NoQuery>({
    operationId: 'tables.get',
    tag: 'v2',
    role: 'reader',
    method: 'get',
    path: TABLE,
    pathParameters: TABLE_PARAMETERS,
    params: schemas.tablePath,
    query: schemas.noQuery,
    summary: 'Describe a table',
    description: 'The table\'s column families with their effective retention policies, ordered by name.',
    success: { status: 200, description: 'The table.', schema: schemas.tableResponse },
    errors: ON_TABLE,
    handle: ({ params }, { services, signal }) => services.tables.describe(target(params), { signal }),
  }),
  defineOperation<schemas.RowPath, schemas.EncodingQuery, schemas.WriteRowBody>({
    operationId: 'rows.write',
    tag: 'v2',
    role: 'writer',
    method: 'put',
    path: ROW,
    pathParameters: ROW_PARAMETERS,
    params: schemas.rowPath,
    query: schemas.encodingOnlyQuery,
    body: schemas.writeRowBody,
    bodyExample: () => ({
      cells: [
        { family: 'cf', column: 'status', value: 'shipped' },
        { family: 'cf', column: 'total', value: '42.50' },
      ],
    }),
    summary: 'Write cells to a row',
    description:
      'Writes the cells in one atomic row mutation: all or none. Cells without a `timestamp` all get the time of the request; ' +
      'earlier versions are kept as the family\'s policy allows. The key is percent-encoded UTF-8 in the path (a `:` as `%3A`).',
    success: { status: 200, description: 'The cells were written.', schema: schemas.writeRowResponse },
    errors: [...ON_TABLE, 'COLUMN_FAMILY_NOT_FOUND', 'INSUFFICIENT_STORAGE'],
    handle: async ({ params, query, body }, { services, signal }) => {
      const base64 = inBase64(query);
      const key = urlBytes(params.key, base64);
      const cells = await setsOf(body.cells, base64);
      await requireDistinctCells(cells);
      await services.rows.mutate(target(params), key, cells, cellFields('key'), { signal });
      return { key: renderKey(key, base64).key, cellsWritten: cells.length };
    },
  }),
  defineOperation<schemas.RowPath, schemas.ReadQuery>({
    operationId: 'rows.get',
    tag: 'v2',
    role: 'reader',
    method: 'get',
    path: ROW,
    pathParameters: ROW_PARAMETERS,
    params: schemas.rowPath,
    query: schemas.readQuery,
    summary: 'Read a row',
    description:
      'The row\'s cells, ordered by family, column (bytes) and timestamp, newest first: the latest version of each column, or ' +
      'the newest `versions`, of the `columns` selected (all by default). A row of 64 KiB or more waits for room among the rows the service holds ' +
      'for answers, as a batchGet of one key does (at most 10 s, then 503 OVERLOADED).',
    success: { status: 200, description: 'The row.', schema: schemas.rowResponse },
    holdsRows: true,
    errors: [...ON_TABLE, 'ROW_NOT_FOUND', 'NOT_SUPPORTED_BY_STORE'],
    handle: async ({ params, query }, { services, signal, answer }) => {
      const base64 = inBase64(query);
      const key = urlBytes(params.key, base64);
      const row = await services.rows.read(target(params), key, selection(query, true), 'key', { signal, answer });
      if (row === null) throw rowNotFound(params);
      const cells = await renderCells(row.cells, base64, int64Selectors(query.int64, base64, true));
      return { ...renderKey(row.key, base64), cells };
    },
  }),
  defineOperation<schemas.RowPath, schemas.EncodingQuery, schemas.MutateRowBody>({
    operationId: 'rows.mutate',
    tag: 'v2',
    role: 'writer',
    method: 'post',
    path: `${ROW}:mutate`,
    pathParameters: ROW_PARAMETERS,
    params: schemas.rowPath,
    query: schemas.encodingOnlyQuery,
    body: schemas.mutateRowBody,
    bodyExample: () => ({
      mutations: [{ set: { family: 'cf', column: 'status', value: 'delivered' } }, { deleteColumn: { family: 'cf', column: 'total' } }],
    }),
    summary: 'Mutate a row',
    description:
      'Applies the mutations to the row atomically and in order: `set` writes a version of a column, `deleteColumn` deletes every ' +
      'version of a column, `deleteFamily` every column of a family, `deleteRow` the whole row. Sets without a timestamp all get the time of the request.',
    success: { status: 200, description: 'The mutations were applied.', schema: schemas.mutateRowResponse },
    errors: [...ON_TABLE, 'COLUMN_FAMILY_NOT_FOUND', 'INSUFFICIENT_STORAGE'],
    handle: async ({ params, query, body }, { services, signal }) => {
      const base64 = inBase64(query);
      const key = urlBytes(params.key, base64);
      const mutations = await mutationsOf(body.mutations, base64);
      const applied = await services.rows.mutate(target(params), key, mutations, mutationFields('key', 'mutations', body.mutations), { signal });
      return { key: renderKey(key, base64).key, mutationsApplied: applied };
    },
  }),
  defineOperation<schemas.TablePath, schemas.ScanQuery>({
    operationId: 'rows.scan',
    tag: 'v2',
    role: 'reader',
    method: 'get',
    path: ROWS,
    pathParameters: TABLE_PARAMETERS,
    params: schemas.tablePath,
    query: schemas.scanQuery,
    summary: 'Scan rows',
    description:
      'Rows in key byte order (descending with `reverse=true`) from `start` (inclusive) to `end` (exclusive), or with a `prefix`, a page at a time. ' +
      'Send `nextPageToken` as `pageToken` for the next page, with the same other parameters (pageSize may change); any replica of the service ' +
      'resumes it. A page may hold fewer than pageSize rows and still have a next one: it ends before it would pass `pageBytes`, and earlier ' +
      'while the service holds as many rows for answers as its memory allows (never before its first row). A scan is not a snapshot: a row that exists and is not ' +
      'changed while the scan runs is returned exactly once; a row written or deleted meanwhile may or may not be, and never twice.',
    success: { status: 200, description: 'One page of rows.', schema: schemas.scanResponse },
    holdsRows: true,
    errors: [...ON_TABLE, 'INVALID_PAGE_TOKEN', 'NOT_SUPPORTED_BY_STORE'],
    handle: async ({ params, query }, { services, signal, answer }) => {
      const base64 = inBase64(query);
      const bound = (text: string | undefined) => (text === undefined ? undefined : urlBytes(text, base64));
      const page = await services.rows.scan(
        target(params),
        {
          start: bound(query.start),
          end: bound(query.end),
          prefix: bound(query.prefix),
          reverse: query.reverse ?? false,
          limit: query.limit,
          pageSize: query.pageSize,
          pageToken: query.pageToken,
          ...selection(query, true),
        },
        { signal, answer },
      );
      const counters = int64Selectors(query.int64, base64, true);
      return {
        rows: page.rows.map((row) => renderRow(row, base64, counters)),
        ...(page.nextPageToken === undefined ? {} : { nextPageToken: page.nextPageToken }),
      };
    },
  }),
  defineOperation<schemas.TablePath, schemas.EncodingQuery, schemas.BatchGetBody>({
    operationId: 'rows.batchGet',
    tag: 'v2',
    role: 'reader',
    method: 'post',
    path: `${ROWS}:batchGet`,
    pathParameters: TABLE_PARAMETERS,
    params: schemas.tablePath,
    query: schemas.encodingOnlyQuery,
    body: schemas.batchGetBody,
    bodyExample: () => ({ keys: ['order#1001', 'order#1002', 'order#9999'] }),
    summary: 'Read several rows',
    description:
      'One answer per key, in request order; a row with none of the selected cells (or none at all) is answered with `found: false`, not an error. ' +
      'The answer is never cut short: while the service holds as many rows for answers as its memory allows, the request waits for room, ' +
      'before reading and again before answering, at most 10 s each, then is refused with 503 OVERLOADED.',
    success: { status: 200, description: 'The rows, in request order.', schema: schemas.batchGetResponse },
    holdsRows: true,
    errors: [...ON_TABLE, 'NOT_SUPPORTED_BY_STORE'],
    handle: async ({ params, query, body }, { services, signal, answer }) => {
      const base64 = inBase64(query);
      const keys = body.keys.map((key) => bodyBytes(key, base64));
      const rows = await services.rows.readMany(
        target(params),
        keys,
        { columns: body.columns?.map((column) => columnSelector(column, base64, false)), versions: body.versions ?? 1 },
        { signal, answer },
      );
      const counters = int64Selectors(body.int64, base64, false);
      return {
        rows: keys.map((key, index) => {
          const row = rows[index] ?? null;
          return withCells({ ...renderKey(key, base64), found: row !== null, cells: row?.cells.map((cell) => renderCell(cell, base64, counters)) ?? [] });
        }),
      };
    },
  }),
  defineOperation<schemas.TablePath, schemas.EncodingQuery, schemas.BatchWriteBody>({
    operationId: 'rows.batchWrite',
    tag: 'v2',
    role: 'writer',
    method: 'post',
    path: `${ROWS}:batchWrite`,
    pathParameters: TABLE_PARAMETERS,
    params: schemas.tablePath,
    query: schemas.encodingOnlyQuery,
    body: schemas.batchWriteBody,
    bodyExample: () => ({
      entries: [
        { key: 'order#1002', mutations: [{ set: { family: 'cf', column: 'status', value: 'new' } }] },
        { key: 'order#1003', mutations: [{ set: { family: 'cf', column: 'status', value: 'new' } }] },
      ],
    }),
    summary: 'Write several rows',
    description:
      'Applies each entry\'s mutations to its row, each entry atomic on its own, the batch not: an entry that fails (a family the table ' +
      'does not have, a key or value beyond the store\'s limits) is reported by its index and the others are applied. Sets without a ' +
      'timestamp all get the time of the request. An entry with `conditions` is a checkAndMutate of its row, reporting `matched`; entries naming ' +
      'the same row are applied in entry order. Conditions need the store capability `checkAndMutate`.',
    success: { status: 200, description: 'One result per entry, in entry order.', schema: schemas.batchWriteResponse },
    errors: [...ON_TABLE, 'NOT_SUPPORTED_BY_STORE', 'INSUFFICIENT_STORAGE'],
    handle: async ({ params, query, body }, { services, signal }) => {
      const base64 = inBase64(query);
      const entries = await batchEntries(body.entries, base64);
      const results = await services.rows.mutateMany(target(params), entries, { signal });
      return {
        results: entries.map((entry, index) => {
          const { error, matched } = results[index] ?? {};
          const limit = error?.extensions['limit'];
          return {
            index,
            ...renderKey(entry.key, base64),
            code: error?.code ?? 'OK',
            ...(matched === undefined || error !== undefined ? {} : { matched }),
            ...(error === undefined ? {} : { detail: error.detail }),
            ...(typeof limit === 'string' ? { limit } : {}),
          };
        }),
      };
    },
  }),
  ...COORDINATION_OPERATIONS,
  CHANGES_OPERATION,
  defineOperation<schemas.RowPath, schemas.EncodingQuery>({
    operationId: 'rows.delete',
    tag: 'v2',
    role: 'writer',
    method: 'delete',
    path: ROW,
    pathParameters: ROW_PARAMETERS,
    params: schemas.rowPath,
    query: schemas.encodingOnlyQuery,
    summary: 'Delete a row',
    description: 'Deletes every cell of the row. Deleting a row that does not exist is not an error.',
    success: { status: 204, description: 'The row is gone.' },
    errors: [...ON_TABLE, 'INSUFFICIENT_STORAGE'],
    handle: async ({ params, query }, { services, signal }) => {
      const key = urlBytes(params.key, inBase64(query));
      await services.rows.mutate(target(params), key, [{ type: 'deleteRow' }], { key: 'key', mutations: '', field: () => '' }, { signal });
      return undefined;
    },
  }),
  defineOperation<schemas.TablePath, schemas.NoQuery>({
    operationId: 'tables.delete',
    tag: 'v2',
    role: 'admin',
    method: 'delete',
    path: TABLE,
    pathParameters: TABLE_PARAMETERS,
    params: schemas.tablePath,
    query: schemas.noQuery,
    summary: 'Delete a table',
    description: 'Deletes the table and all its rows.',
    success: { status: 204, description: 'The table is gone.' },
    // The embedded store needs room in its journal to free a large table's pages.
    errors: [...ON_TABLE, 'INSUFFICIENT_STORAGE'],
    handle: async ({ params }, { services, signal }) => {
      await services.tables.delete(target(params), { signal });
      return undefined;
    },
  }),
  defineOperation<schemas.InstancePath, schemas.NoQuery, schemas.BatchDeleteBody>({
    operationId: 'tables.batchDelete',
    tag: 'v2',
    role: 'admin',
    method: 'post',
    path: `${TABLES}:batchDelete`,
    pathParameters: INSTANCE_PARAMETERS,
    params: schemas.instancePath,
    query: schemas.noQuery,
    body: schemas.batchDeleteBody,
    bodyExample: () => ({ tables: ['orders'] }),
    summary: 'Delete several tables',
    description:
      'Checks that every named table exists, then deletes them in the order given. If any is missing, the answer is 404 with `notFound` ' +
      'and nothing is deleted. If the store fails part-way, the error lists the tables `deleted` and `notDeleted`. ' +
      '(The example deletes the example table, which "Delete a table" above deleted: create it again first, and this example answers 200.)',
    success: { status: 200, description: 'All the tables were deleted.', schema: schemas.batchDeleteResponse, example: () => ({ deleted: ['orders'] }) },
    errors: [...ON_INSTANCE, 'TABLE_NOT_FOUND', 'INSUFFICIENT_STORAGE'],
    handle: async ({ params, body }, { services, signal }) => ({
      deleted: await services.tables.deleteMany(params.store, params.instance, body.tables, { signal }),
    }),
  }),
];

function rowNotFound(params: schemas.RowPath): ApiError {
  return new ApiError('ROW_NOT_FOUND', `Row "${shorten(params.key)}" does not exist in table "${params.table}", or has none of the cells asked for.`);
}
