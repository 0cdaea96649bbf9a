/**
 * The request and response schemas of the v1 API. They validate requests and, through
 * openapi.ts, are the OpenAPI document: one source of truth for both.
 *
 * The limits are Bigtable's own, so a request that would break one gets a clear 400 instead of a
 * backend error: https://cloud.google.com/bigtable/quotas#limits-data-size
 */
import Joi, { type CustomHelpers } from 'joi';
import { ERROR_CODES } from '../service/errors.ts';

export const LIMITS = Object.freeze({
  tableNameChars: 50,
  columnFamilyChars: 64,
  rowKeyBytes: 4096,
  columnNameBytes: 16 * 1024,
  cellsPerInsert: 100_000,
  tablesPerDelete: 100,
});

// Strict RFC 4648 base64 with padding; Buffer.from(..., 'base64') would skip invalid characters.
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/** Characters of base64 needed for n bytes. */
const base64Length = (bytes: number): number => Math.ceil(bytes / 3) * 4;

export const tableName = Joi.string()
  .min(1)
  .max(LIMITS.tableNameChars)
  .pattern(/^[_a-zA-Z0-9][-_.a-zA-Z0-9]*$/)
  .messages({ 'string.pattern.base': '{{#label}} must start with a letter, digit or _ and contain only letters, digits, _ - and .' })
  .description(`Table ID: 1-${LIMITS.tableNameChars} characters, \`[_a-zA-Z0-9][-_.a-zA-Z0-9]*\`.`)
  .example('orders');

export const columnFamily = Joi.string()
  .min(1)
  .max(LIMITS.columnFamilyChars)
  .pattern(/^[-_.a-zA-Z0-9]+$/)
  .messages({ 'string.pattern.base': '{{#label}} must contain only letters, digits, _ - and .' })
  .description(`Column family: 1-${LIMITS.columnFamilyChars} characters, \`[-_.a-zA-Z0-9]+\`.`)
  .example('cf');

/** Rejects strings with lone UTF-16 surrogates: they have no UTF-8 form and would be altered. */
function wellFormed(value: string, helpers: CustomHelpers): string | Joi.ErrorReport {
  return value.isWellFormed() ? value : helpers.message({ custom: '{{#label}} contains a lone UTF-16 surrogate' });
}

const rowKey = Joi.string()
  .min(1)
  .max(LIMITS.rowKeyBytes, 'utf8')
  .custom(wellFormed)
  .messages({ 'string.max': `{{#label}} must be at most ${LIMITS.rowKeyBytes} bytes in UTF-8` })
  .description(`Row key, UTF-8 text of 1-${LIMITS.rowKeyBytes} bytes.`)
  .example('order#1001');

/**
 * A cell's column name and value are text, or base64 when the cell's `encoding` is "base64".
 * Checked per field (not with Joi.when) so errors name the field and the OpenAPI schema stays one
 * plain string type.
 */
function encodedText(maxBytes: number | undefined) {
  return (value: string, helpers: CustomHelpers): string | Joi.ErrorReport => {
    const cell = (helpers.state.ancestors as unknown[])[0] as { encoding?: unknown };
    if (cell.encoding === 'base64') {
      if (!BASE64.test(value)) return helpers.message({ custom: '{{#label}} is not valid base64 (RFC 4648, padded)' });
      if (maxBytes !== undefined && Buffer.byteLength(value, 'base64') > maxBytes) {
        return helpers.message({ custom: `{{#label}} must decode to at most ${maxBytes} bytes` });
      }
      return value;
    }
    if (!value.isWellFormed()) return helpers.message({ custom: '{{#label}} contains a lone UTF-16 surrogate' });
    if (maxBytes !== undefined && Buffer.byteLength(value, 'utf8') > maxBytes) {
      return helpers.message({ custom: `{{#label}} must be at most ${maxBytes} bytes in UTF-8` });
    }
    return value;
  };
}

const cellInput = Joi.object({
  columnFamily: columnFamily.required(),
  columnName: Joi.string()
    .allow('')
    .max(base64Length(LIMITS.columnNameBytes))
    .custom(encodedText(LIMITS.columnNameBytes))
    .required()
    .description(`Column qualifier: at most ${LIMITS.columnNameBytes} bytes (UTF-8 text, or base64 when \`encoding\` is "base64").`)
    .example('status'),
  columnValue: Joi.string()
    .allow('')
    .custom(encodedText(undefined))
    .required()
    .description('Cell value: UTF-8 text, or base64 when `encoding` is "base64".')
    .example('shipped'),
  encoding: Joi.string()
    .valid('base64')
    .description('"base64" when columnName and columnValue are base64 of arbitrary bytes; absent for UTF-8 text.'),
}).label('cell');

/** One key per distinct column, so a duplicate is found in linear time (Joi's comparator form is quadratic). */
function columnKey(cell: { columnFamily?: unknown; columnName?: unknown; encoding?: unknown }): string {
  const name = typeof cell.columnName === 'string' ? cell.columnName : '';
  const bytes = Buffer.from(name, cell.encoding === 'base64' ? 'base64' : 'utf8');
  return `${String(cell.columnFamily)}\u0000${bytes.toString('base64')}`;
}

function distinctColumns(cells: Array<Record<string, unknown>>, helpers: CustomHelpers) {
  const seen = new Map<string, number>();
  for (const [position, cell] of cells.entries()) {
    const key = columnKey(cell);
    const first = seen.get(key);
    if (first !== undefined) {
      return helpers.error('array.unique', { dupePos: first }, { ...helpers.state, path: [...(helpers.state.path ?? []), position] });
    }
    seen.set(key, position);
  }
  return cells;
}

export const createTableBody = Joi.object({
  tableName: tableName.required(),
  columnFamily: columnFamily.required(),
})
  .label('request body')
  .required();

export const insertDataBody = Joi.object({
  tableName: tableName.required(),
  rowKeyId: rowKey.required(),
  data: Joi.array()
    .items(cellInput)
    .min(1)
    .max(LIMITS.cellsPerInsert)
    .custom(distinctColumns)
    .messages({ 'array.unique': '{{#label}} writes the same column as data[{{#dupePos}}]' })
    .required()
    .description(`1-${LIMITS.cellsPerInsert} cells, each for a different column, written to the row in one atomic mutation.`),
})
  .label('request body')
  .required();

export const readCellDataQuery = Joi.object({
  tableName: tableName.required(),
  id: rowKey.required().description(`Row key to read, UTF-8 text of 1-${LIMITS.rowKeyBytes} bytes.`),
})
  .label('query')
  .required();

export const deleteTableBody = Joi.object({
  tableList: Joi.array()
    .items(tableName)
    .min(1)
    .max(LIMITS.tablesPerDelete)
    .unique()
    .messages({ 'array.unique': '{{#label}} names the same table as tableList[{{#dupePos}}]' })
    .required()
    .description(`1-${LIMITS.tablesPerDelete} distinct table names. If any does not exist, none is deleted.`),
})
  .label('request body')
  .required();

// Responses. Validation never runs on these; they document what the service sends, and the
// tests check real responses against the OpenAPI document made from them.

const instanceID = Joi.string().required().description('The instance from the path.').example('my-instance');

export const createTableResponse = Joi.object({
  instanceID,
  tableName: tableName.required(),
  columnFamily: columnFamily.required(),
});

export const insertDataResponse = Joi.object({
  instanceID,
  tableName: tableName.required(),
  rowKeyId: Joi.string().required().example('order#1001'),
  cellsWritten: Joi.number().integer().min(1).required().example(1),
});

const cellOutput = Joi.object({
  columnFamily: columnFamily.required(),
  columnName: Joi.string().allow('').required().example('status'),
  columnValue: Joi.string().allow('').required().example('shipped'),
  encoding: Joi.string()
    .valid('base64')
    .description('Present when the column name or value is not valid UTF-8: both are then base64.'),
  timestamp: Joi.string()
    .pattern(/^(?:\d{4}|[+-]\d{6})-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/)
    .required()
    .description(
      'The version\'s timestamp: RFC 3339, UTC, microseconds. Years after 9999 (reverse timestamps) take the ISO 8601 expanded form, +294247-01-10T04:00:54.775807Z.',
    )
    .example('2026-11-21T04:27:00.123000Z'),
});

export const readCellDataResponse = Joi.object({
  instanceID,
  tableName: tableName.required(),
  rowKeyId: Joi.string().required().example('order#1001'),
  data: Joi.array()
    .items(cellOutput)
    .min(1)
    .required()
    .description('The latest version of each column, ordered by column family, then column name (byte order).'),
});

export const deleteTableResponse = Joi.object({
  instanceID,
  deleted: Joi.array().items(tableName).required().description('The tables deleted, in request order.'),
});

export const healthResponse = Joi.object({
  // degraded: /readyz with some of several stores not answering.
  status: Joi.string().valid('ok', 'ready', 'degraded').required(),
});

export const problemType = Joi.object({
  type: Joi.string().required().example('/problems/table-not-found'),
  code: Joi.string()
    .valid(...ERROR_CODES)
    .required(),
  status: Joi.number().integer().required().example(404),
  title: Joi.string().required().example('Table not found'),
  description: Joi.string().required(),
});

export const problem = Joi.object({
  type: Joi.string().required().description('URI reference identifying the problem type; see `code`.').example('/problems/table-not-found'),
  title: Joi.string().required().example('Table not found'),
  status: Joi.number().integer().required().example(404),
  detail: Joi.string().required().example('Table "orders" does not exist in the instance.'),
  instance: Joi.string().required().description('The request path.').example('/v1/my-instance/readCellData'),
  code: Joi.string()
    .valid(...ERROR_CODES)
    .required()
    .description('Stable, machine-readable error code.'),
  requestId: Joi.string().required().description('Also in the X-Request-Id response header; quote it to operators.'),
  errors: Joi.array()
    .items(Joi.object({ path: Joi.string().allow('').required(), message: Joi.string().required() }))
    .description('VALIDATION_FAILED: one entry per problem, by field path such as `data[1].columnValue`.'),
  notFound: Joi.array().items(Joi.string()).description('deleteTable TABLE_NOT_FOUND: the tables that do not exist.'),
  deleted: Joi.array().items(Joi.string()).description('deleteTable failing part-way: the tables that were deleted.'),
  notDeleted: Joi.array().items(Joi.string()).description('deleteTable failing part-way: the tables that were not deleted.'),
});
