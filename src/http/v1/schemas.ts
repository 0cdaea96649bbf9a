/**
 * The request and response schemas of the v1 API. They validate requests and, through
 * openapi.ts, are the OpenAPI document: one source of truth for both.
 *
 * The limits are Bigtable's own, so a request that would break one gets a clear 400 instead of a
 * backend error: https://cloud.google.com/bigtable/quotas#limits-data-size
 */
import { isUtf8 } from 'node:buffer';
import Joi, { type CustomHelpers } from 'joi';
import { base64WithEncoding } from '../operations/json-schema.ts';
import { itemwise } from '../validation/validate.ts';
import { BASE64, NAME_LIMITS, base64Length, carriesRowKeys, columnFamily, tableName, wellFormed } from '../validation/schemas.ts';

export const LIMITS = Object.freeze({
  ...NAME_LIMITS,
  rowKeyBytes: 4096,
  columnNameBytes: 16 * 1024,
  cellsPerInsert: 100_000,
  tablesPerDelete: 100,
});

const rowKey = Joi.string()
  .min(1)
  .max(LIMITS.rowKeyBytes, 'utf8')
  .rule({ message: { 'string.max': `{{#label}} must be at most ${LIMITS.rowKeyBytes} bytes in UTF-8` } })
  .custom(wellFormed)
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
  columnName: base64WithEncoding(Joi.string().allow(''))
    .max(base64Length(LIMITS.columnNameBytes))
    .custom(encodedText(LIMITS.columnNameBytes))
    .required()
    .description(`Column qualifier: at most ${LIMITS.columnNameBytes} bytes (UTF-8 text, or base64 when \`encoding\` is "base64").`)
    .example('status'),
  columnValue: base64WithEncoding(Joi.string().allow(''))
    .custom(encodedText(undefined))
    .required()
    .description('Cell value: UTF-8 text, or base64 when `encoding` is "base64".')
    .example('shipped'),
  encoding: Joi.string()
    .valid('base64')
    .description('"base64" when columnName and columnValue are base64 of arbitrary bytes; absent for UTF-8 text.'),
}).label('cell');

/**
 * A cell's column as the check for duplicates sees it: a text name as itself, with no conversion
 * (a 100,000-cell row is checked in a few milliseconds, not a hundred); a base64 name whose bytes
 * are UTF-8 as that text, so the same column sent both ways is found; other bytes, which no text
 * can stand for, as their base64, kept apart from the text names.
 */
function columnOf(cell: { columnName?: unknown; encoding?: unknown }): { readonly text: boolean; readonly name: string } {
  const name = typeof cell.columnName === 'string' ? cell.columnName : '';
  if (cell.encoding !== 'base64') return { text: true, name };
  const bytes = Buffer.from(name, 'base64');
  return isUtf8(bytes) ? { text: true, name: bytes.toString('utf8') } : { text: false, name: bytes.toString('base64') };
}

/** The columns of a row seen so far, per family (text names, then names of other bytes), with where each was first. */
class ColumnsSeen {
  readonly #families = new Map<unknown, [Map<string, number>, Map<string, number>]>();
  // Cells of one family tend to come together: its maps are kept at hand.
  #family: unknown;
  #names: [Map<string, number>, Map<string, number>] | undefined;

  /** Adds the cell at `position`; if its column was seen already, answers where. */
  add(cell: Record<string, unknown>, position: number): number | undefined {
    const family = cell['columnFamily'];
    if (this.#names === undefined || family !== this.#family) {
      this.#names = this.#families.get(family) ?? [new Map<string, number>(), new Map<string, number>()];
      this.#families.set(family, this.#names);
      this.#family = family;
    }
    // Text names, the common case, are taken as they are, without building a column for them.
    const column = cell['encoding'] === 'base64' ? columnOf(cell) : undefined;
    const names = this.#names[column === undefined || column.text ? 0 : 1];
    const name = column?.name ?? (typeof cell['columnName'] === 'string' ? cell['columnName'] : '');
    const first = names.get(name);
    if (first === undefined) names.set(name, position);
    return first;
  }
}

/**
 * Refuses a second cell for a column, in linear time (Joi's comparator form is quadratic), one
 * cell at a time so that a large row is checked in slices. Cells that are not objects are
 * refused by their own schema and skipped here.
 */
const distinctColumns = itemwise(() => {
  const seen = new ColumnsSeen();
  return (cell, position) => {
    if (typeof cell !== 'object' || cell === null) return undefined;
    const dupePos = seen.add(cell as Record<string, unknown>, position);
    return dupePos === undefined ? undefined : { code: 'array.unique', local: { dupePos } };
  };
});

/** The v1 request shapes, as the schemas below leave them. */
export interface CreateTableBody {
  readonly tableName: string;
  readonly columnFamily: string;
}
export interface CellBody {
  readonly columnFamily: string;
  readonly columnName: string;
  readonly columnValue: string;
  readonly encoding?: 'base64';
}
export interface InsertDataBody {
  readonly tableName: string;
  readonly rowKeyId: string;
  readonly data: readonly CellBody[];
}
export interface ReadCellDataQuery {
  readonly tableName: string;
  readonly id: string;
}
export interface DeleteTableBody {
  readonly tableList: readonly string[];
}

export const createTableBody = Joi.object<CreateTableBody>({
  tableName: tableName.required(),
  columnFamily: columnFamily.required(),
})
  .label('request body')
  .required();

export const insertDataBody = Joi.object<InsertDataBody>({
  tableName: tableName.required(),
  rowKeyId: carriesRowKeys(rowKey.required()),
  data: Joi.array()
    .items(cellInput)
    .min(1)
    .max(LIMITS.cellsPerInsert)
    .custom(distinctColumns)
    .rule({ message: { 'array.unique': '{{#label}} writes the same column as data[{{#dupePos}}]' } })
    .required()
    .description(`1-${LIMITS.cellsPerInsert} cells, each for a different column, written to the row in one atomic mutation.`),
})
  .label('request body')
  .required();

export const readCellDataQuery = Joi.object<ReadCellDataQuery>({
  tableName: tableName.required(),
  id: carriesRowKeys(rowKey.required().description(`Row key to read, UTF-8 text of 1-${LIMITS.rowKeyBytes} bytes.`)),
})
  .label('query')
  .required();

export const deleteTableBody = Joi.object<DeleteTableBody>({
  tableList: Joi.array()
    .items(tableName)
    .min(1)
    .max(LIMITS.tablesPerDelete)
    .unique()
    .rule({ message: { 'array.unique': '{{#label}} names the same table as tableList[{{#dupePos}}]' } })
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
  columnName: base64WithEncoding(Joi.string().allow('')).required().example('status'),
  columnValue: base64WithEncoding(Joi.string().allow('')).required().example('shipped'),
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

