/**
 * The request and response schemas of the v2 API. They validate requests and, through
 * openapi.ts, are the OpenAPI document. Bounds that differ between stores (key and value sizes,
 * batch sizes, page size, versions) are the target store's published limits, checked by the
 * service with a 400 naming the limit; the schemas check shapes and what every store shares.
 */
import Joi, { type CustomHelpers } from 'joi';
import { ERROR_CODES } from '../../service/errors.ts';
import { CAPABILITY_DESCRIPTIONS, LIMIT_DESCRIPTIONS, SERVICE_LIMITS } from '../../service/limits.ts';
import { MAX_CURSOR_CHARS } from '../../service/feed-cursors.ts';
import { MAX_PAGE_TOKEN_CHARS } from '../../service/page-tokens.ts';
import { RFC_3339_TIMESTAMP, parseTimestamp } from '../../service/timestamps.ts';
import { base64WithEncoding } from '../operations/json-schema.ts';
import { BASE64, carriesRowKeys, columnFamily, tableName } from '../validation/schemas.ts';
import { BASE64URL } from './bytes.ts';

/** Largest count the schemas take for sizes and counts: past every store's limit, within safe integers. */
const MAX_COUNT = 2_147_483_647;
const TIMESTAMP_PATTERN = /^(?:\d{4}|[+-]\d{6})-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/;

// Request shapes, as the schemas leave them.

export interface EncodingQuery {
  readonly encoding?: 'base64';
}
export interface StorePath {
  readonly store: string;
}
export interface InstancePath extends StorePath {
  readonly instance: string;
}
export interface TablePath extends InstancePath {
  readonly table: string;
}
export interface RowPath extends TablePath {
  readonly key: string;
}
export interface FamilyBody {
  readonly name: string;
  readonly maxVersions?: number;
  readonly maxAgeSeconds?: number;
}
export interface CreateTableBody {
  readonly name: string;
  readonly families: readonly FamilyBody[];
}
export interface BatchDeleteBody {
  readonly tables: readonly string[];
}
export interface ReadQuery extends EncodingQuery {
  readonly columns?: readonly string[];
  readonly versions?: number;
  readonly int64?: readonly string[];
}
export interface ScanQuery extends ReadQuery {
  readonly start?: string;
  readonly end?: string;
  readonly prefix?: string;
  readonly reverse?: boolean;
  readonly limit?: number;
  readonly pageSize?: number;
  readonly pageToken?: string;
}
export interface CellBody {
  readonly family: string;
  readonly column: string;
  readonly value: string;
  readonly timestamp?: string;
  readonly encoding?: 'base64';
}
export interface WriteRowBody {
  readonly cells: readonly CellBody[];
}
export type MutationBody =
  | { readonly set: CellBody }
  | { readonly deleteColumn: { readonly family: string; readonly column: string; readonly encoding?: 'base64' } }
  | { readonly deleteFamily: { readonly family: string } }
  | { readonly deleteRow: Record<string, never> };
export interface MutateRowBody {
  readonly mutations: readonly MutationBody[];
}
export interface BatchGetBody {
  readonly keys: readonly string[];
  readonly columns?: readonly string[];
  readonly versions?: number;
  readonly int64?: readonly string[];
}
export type ConditionBody =
  | { readonly rowExists: boolean }
  | { readonly family: string; readonly exists: boolean }
  | { readonly family: string; readonly column: string; readonly exists: boolean; readonly encoding?: 'base64' }
  | { readonly family: string; readonly column: string; readonly equals: string; readonly encoding?: 'base64' };
export interface CheckAndMutateBody {
  readonly conditions: readonly ConditionBody[];
  readonly mutations?: readonly MutationBody[];
  readonly otherwise?: readonly MutationBody[];
}
export type RuleBody =
  | { readonly family: string; readonly column: string; readonly increment: number | string; readonly encoding?: 'base64' }
  | { readonly family: string; readonly column: string; readonly append: string; readonly encoding?: 'base64' };
export interface ReadModifyWriteBody {
  readonly rules: readonly RuleBody[];
}
export interface EntryBody {
  readonly key: string;
  readonly encoding?: 'base64';
  readonly conditions?: readonly ConditionBody[];
  readonly mutations?: readonly MutationBody[];
  readonly otherwise?: readonly MutationBody[];
}
export interface BatchWriteBody {
  readonly entries: readonly EntryBody[];
}

// Bytes and names.

/** Whether the query of the request (the validation context of a body) asks for base64 everywhere. */
function requestInBase64(helpers: CustomHelpers): boolean {
  const context = helpers.prefs.context as { query?: { encoding?: unknown } } | undefined;
  return context?.query?.encoding === 'base64';
}

/** Whether the object holding the field says its byte fields are base64. */
function objectInBase64(helpers: CustomHelpers): boolean {
  const holder = (helpers.state.ancestors as unknown[])[0] as { encoding?: unknown } | undefined;
  return holder?.encoding === 'base64';
}

function checkText(value: string, helpers: CustomHelpers): string | Joi.ErrorReport {
  return value.isWellFormed() ? value : helpers.message({ custom: '{{#label}} contains a lone UTF-16 surrogate' });
}

/** A byte string in a JSON body: base64 in base64 mode or when its object says so, else UTF-8 text. */
function bodyBytes(description: string, empty = true) {
  return base64WithEncoding(empty ? Joi.string().allow('') : Joi.string().min(1))
    .custom((value: string, helpers) => {
      if (!requestInBase64(helpers) && !objectInBase64(helpers)) return checkText(value, helpers);
      return BASE64.test(value) ? value : helpers.message({ custom: '{{#label}} is not valid base64 (RFC 4648, padded)' });
    })
    .description(`${description}: UTF-8 text, or base64 with \`encoding=base64\` (on the request or on this object).`);
}

/** A byte string in the path or the query: base64url in base64 mode, else UTF-8 text. */
function urlBytes(description: string, siblingEncoding: boolean) {
  return Joi.string().allow('').custom((value: string, helpers) => {
    const base64 = siblingEncoding ? objectInBase64(helpers) : requestInBase64(helpers);
    if (!base64) return checkText(value, helpers);
    return BASE64URL.test(value) ? value : helpers.message({ custom: '{{#label}} is not valid base64url (RFC 4648 section 5)' });
  })
    .description(`${description}: UTF-8 text, or base64url with \`encoding=base64\`.`);
}

const FAMILY_NAME = /^[-_.a-zA-Z0-9]{1,64}$/;
/** What a column selector looks like whatever the encoding: a family name, then optionally `:` and a column. */
const COLUMN_SELECTOR = /^[-_.a-zA-Z0-9]{1,64}(?::[\s\S]*)?$/;
const SELECTOR_MESSAGE = '{{#label}} must be family or family:column, with a family of 1-64 characters [-_.a-zA-Z0-9]';

/** `family` or `family:column`: the column in base64 (base64url in the query) in base64 mode. */
function columnSelectors(inQuery: boolean) {
  const item = Joi.string()
    .min(1)
    .pattern(COLUMN_SELECTOR)
    .rule({ message: { 'string.pattern.base': SELECTOR_MESSAGE } })
    .custom((value: string, helpers) => {
      const colon = value.indexOf(':');
      const family = colon === -1 ? value : value.slice(0, colon);
      if (!FAMILY_NAME.test(family)) return helpers.message({ custom: SELECTOR_MESSAGE });
      if (colon === -1) return value;
      const column = value.slice(colon + 1);
      // In the query the selectors are items of an array of the query object.
      const base64 = inQuery ? ((helpers.state.ancestors as unknown[])[1] as { encoding?: unknown } | undefined)?.encoding === 'base64' : requestInBase64(helpers);
      if (!base64) return column.isWellFormed() ? value : helpers.message({ custom: '{{#label}} contains a lone UTF-16 surrogate' });
      return (inQuery ? BASE64URL : BASE64).test(column) ? value : helpers.message({ custom: '{{#label}} has a column that is not valid base64' });
    })
    .example('cf:status');
  return Joi.array()
    .items(item)
    .min(1)
    .max(SERVICE_LIMITS.columnsPerRead)
    .rule({ message: { 'array.max': `{{#label}} has more than {{#limit}} selectors (limit columnsPerRead)` } })
    .description(
      `Only these columns: \`family\` (all its columns) or \`family:column\`, at most ${SERVICE_LIMITS.columnsPerRead}. ` +
        (inQuery
          ? 'Comma-separated; a comma or `%` in a column is percent-encoded. The column is base64url with `encoding=base64`.'
          : 'The column is base64 with `encoding=base64`.'),
    );
}

/** Columns whose 8-byte values the answer also gives as decimal int64: counters, read without decoding bytes. */
function int64Selectors(inQuery: boolean) {
  return columnSelectors(inQuery).description(
    'Columns that hold counters: `family` (all its columns) or `family:column`, selected as `columns` are. Each of their cells whose value is 8 bytes ' +
      '(a 64-bit two\'s-complement big-endian integer, as readModifyWrite writes it) also carries `int64`, its decimal value; other cells are as they are.' +
      (inQuery ? ' Comma-separated.' : ''),
  );
}

const versions = Joi.number()
  .integer()
  .min(1)
  .max(MAX_COUNT)
  .description("Versions of each column to read, newest first; 1 (the default) for the latest only. At most the store's `versionsPerRead`.");

const TIMESTAMP_MESSAGE = '{{#label}} must be an RFC 3339 timestamp from 1970 on, with at most microsecond precision';
const timestamp = Joi.string()
  .pattern(RFC_3339_TIMESTAMP)
  .rule({ message: { 'string.pattern.base': TIMESTAMP_MESSAGE } })
  .custom((value: string, helpers) => (parseTimestamp(value) === undefined ? helpers.message({ custom: TIMESTAMP_MESSAGE }) : value))
  .description(
    "The version's timestamp (RFC 3339, e.g. 2026-11-21T04:27:00.123Z), a multiple of the store's `timestampGranularityMicros`. " +
      'Absent: the service assigns the time of the request, the same to every cell of the request. Set it to make a retried write idempotent.',
  );

const encodingQuery = Joi.string()
  .valid('base64')
  .description('`base64`: every key, column and value of the request (path and query: base64url) and of the answer is base64.');

// Query strings arrive as text: their numbers and booleans are converted, nothing else. A number
// only from the form the document gives it, decimal digits: joi alone would read `01`, `+1`,
// `1e0`, `1.0` and ` 1` as 1, which is the coercion the API has not.
const DECIMAL_INTEGER = /^(?:0|-?[1-9][0-9]*)$/;
const queryNumber = (schema: Joi.NumberSchema) =>
  schema.prefs({ convert: true }).custom((value: number, helpers) =>
    typeof helpers.original !== 'string' || DECIMAL_INTEGER.test(helpers.original)
      ? value
      : helpers.message({ custom: '{{#label}} must be decimal digits only (no sign, leading zero, exponent, fraction or space)' }),
  );
// A boolean only from `true` or `false` as they are (joi would trim spaces).
const queryBoolean = Joi.boolean()
  .sensitive()
  .prefs({ convert: true })
  .custom((value: boolean, helpers) =>
    typeof helpers.original !== 'string' || helpers.original === 'true' || helpers.original === 'false' ? value : helpers.message({ custom: '{{#label}} must be true or false' }),
  );

/** A query with no parameters: any is refused. */
export type NoQuery = Record<string, never>;
export const noQuery = Joi.object<NoQuery>({}).label('query');
export const encodingOnlyQuery = Joi.object<EncodingQuery>({ encoding: encodingQuery }).label('query');

export const readQuery = Joi.object<ReadQuery>({
  columns: columnSelectors(true),
  versions: queryNumber(versions),
  int64: int64Selectors(true),
  encoding: encodingQuery,
}).label('query');

export const scanQuery = Joi.object<ScanQuery>({
  start: carriesRowKeys(urlBytes('First key of the scan (inclusive); empty or absent: from the first key', true)),
  end: carriesRowKeys(urlBytes('Key the scan stops before (exclusive); empty or absent: to the last key', true)),
  prefix: carriesRowKeys(urlBytes('Only keys starting with these bytes; excludes start and end', true).example('order#')),
  reverse: queryBoolean
    .description('`true`: descending key order, from the largest key below `end`. Needs the store capability `reverseScan`.'),
  limit: queryNumber(Joi.number().integer().min(1).max(Number.MAX_SAFE_INTEGER)).description('Most rows over all pages.'),
  pageSize: queryNumber(Joi.number().integer().min(1).max(MAX_COUNT)).description(
    "Most rows in this page (default 100, at most the store's `rowsPerPage`). A page may hold fewer and still have a next one.",
  ),
  // A page token holds the key the next page starts from.
  pageToken: carriesRowKeys(
    Joi.string()
      .max(MAX_PAGE_TOKEN_CHARS)
      .description('`nextPageToken` of the previous page; every other parameter but pageSize must be the same as for that page.'),
  ),
  columns: columnSelectors(true),
  versions: queryNumber(versions),
  int64: int64Selectors(true),
  encoding: encodingQuery,
})
  .oxor('prefix', 'start')
  .oxor('prefix', 'end')
  .label('query');

const pathName = Joi.string().required();
export const storePath = Joi.object<StorePath>({ store: pathName });
export const instancePath = Joi.object<InstancePath>({ store: pathName, instance: pathName });
export const tablePath = Joi.object<TablePath>({ store: pathName, instance: pathName, table: tableName.required() });
export const rowPath = Joi.object<RowPath>({
  store: pathName,
  instance: pathName,
  table: tableName.required(),
  key: carriesRowKeys(urlBytes('Row key', false).min(1).required()),
});

const familySpec = Joi.object<FamilyBody>({
  name: columnFamily.required(),
  maxVersions: Joi.number()
    .integer()
    .min(1)
    .max(MAX_COUNT)
    .description('Keep only the newest N versions of each column. Absent (and no maxAgeSeconds): keep every version.'),
  maxAgeSeconds: Joi.number()
    .integer()
    .min(1)
    .max(MAX_COUNT)
    .description('Versions older than this are gone. Needs the store capability `maxAge`.'),
}).label('family');

export const createTableBody = Joi.object<CreateTableBody>({
  name: tableName.required(),
  families: Joi.array()
    .items(familySpec)
    .min(1)
    .unique('name')
    .rule({ message: { 'array.unique': '{{#label}} names the same family as families[{{#dupePos}}]' } })
    .required()
    .description(
      "One or more column families with their retention policies, at most the store's `familiesPerTable`. A version is gone as soon as either bound says so; " +
        'reads never return it, even before the store removes it. A family keeping more than one version needs the store capability `multipleVersions`.',
    ),
})
  .label('request body')
  .required();

export const batchDeleteBody = Joi.object<BatchDeleteBody>({
  tables: Joi.array()
    .items(tableName)
    .min(1)
    .unique()
    .rule({ message: { 'array.unique': '{{#label}} names the same table as tables[{{#dupePos}}]' } })
    .required()
    .description(`1-${SERVICE_LIMITS.tablesPerBatchDelete} distinct table names (limit tablesPerBatchDelete). If any does not exist, none is deleted.`),
})
  .label('request body')
  .required();

const cellBody = Joi.object<CellBody>({
  family: columnFamily.required(),
  column: bodyBytes('Column name').required().example('status'),
  value: bodyBytes('Value').required().example('shipped'),
  timestamp,
  encoding: Joi.string().valid('base64').description('"base64": this column and value are base64.'),
}).label('cell');

export const writeRowBody = Joi.object<WriteRowBody>({
  cells: Joi.array()
    .items(cellBody)
    .min(1)
    .required()
    .description(
      "Cells written to the row in one atomic mutation, at most the store's `mutationsPerRow`; no two with the same family, column and timestamp. " +
        'Earlier versions are kept, as the family\'s policy allows.',
    ),
})
  .label('request body')
  .required();

const mutation = Joi.object<MutationBody>({
  set: cellBody.description('Writes one version of a column.'),
  deleteColumn: Joi.object({
    family: columnFamily.required(),
    column: bodyBytes('Column name').required(),
    encoding: Joi.string().valid('base64').description('"base64": this column is base64.'),
  }).description('Deletes every version of a column.'),
  deleteFamily: Joi.object({ family: columnFamily.required() }).description('Deletes every column of a family.'),
  deleteRow: Joi.object({}).description('Deletes the whole row.'),
})
  .xor('set', 'deleteColumn', 'deleteFamily', 'deleteRow')
  // joi names the peers by their labels, and `set` holds a schema labelled `cell`: the keys are what the caller writes.
  .messages({
    'object.missing': '{{#label}} must have one of {{#peers}}',
    'object.xor': '{{#label}} must have only one of {{#peers}}, not {{#present}}',
  })
  .label('mutation');

const mutations = Joi.array()
  .items(mutation)
  .min(1)
  .description("Applied atomically and in order, at most the store's `mutationsPerRow`. Each is one of set, deleteColumn, deleteFamily or deleteRow.");

export const mutateRowBody = Joi.object<MutateRowBody>({ mutations: mutations.required() }).label('request body').required();

export const batchGetBody = Joi.object<BatchGetBody>({
  keys: carriesRowKeys(
    Joi.array()
      .items(bodyBytes('Row key', false))
      .min(1)
      .required()
      .description("Row keys, at most the store's `entriesPerBatch`; they may repeat. Answered in this order."),
  ),
  columns: columnSelectors(false),
  versions,
  int64: int64Selectors(false),
})
  .label('request body')
  .required();

const encodingField = (what: string) => Joi.string().valid('base64').description(`"base64": ${what} base64.`);

/**
 * Object shapes of which a value is exactly one. Each shape forbids the members only the others
 * have, so that the document closes each alternative against the others (a generated client's
 * union then refuses a mix of two shapes) as the service refuses it.
 */
function oneShapeOf(...shapes: Joi.ObjectSchema[]): Joi.AlternativesSchema {
  const membersOf = (shape: Joi.ObjectSchema) => Object.keys((shape.describe() as { keys?: Record<string, unknown> }).keys ?? {});
  const all = [...new Set(shapes.flatMap(membersOf))];
  return Joi.alternatives()
    .try(
      ...shapes.map((shape) => {
        const own = membersOf(shape);
        return shape.keys(Object.fromEntries(all.filter((member) => !own.includes(member)).map((member) => [member, Joi.forbidden()])));
      }),
    )
    .match('one');
}

const condition = oneShapeOf(
  Joi.object({ rowExists: Joi.boolean().required().description('true: the row has a live cell; false: it has none.') }).label('rowExists condition'),
  Joi.object({
    family: columnFamily.required(),
    exists: Joi.boolean().required().description('true: the family has a live cell in the row; false: none.'),
  }).label('family condition'),
  Joi.object({
    family: columnFamily.required(),
    column: bodyBytes('Column name').required(),
    exists: Joi.boolean().required().description('true: the column has a live version; false: none.'),
    encoding: encodingField('this column is'),
  }).label('column condition'),
  Joi.object({
    family: columnFamily.required(),
    column: bodyBytes('Column name').required(),
    equals: bodyBytes('The exact bytes the latest live version must hold').required(),
    encoding: encodingField('this column and value are'),
  }).label('value condition'),
)
  .messages({
    'alternatives.match': '{{#label}} must be exactly one of: rowExists; family with exists; family, column and exists; family, column and equals',
    'alternatives.any': '{{#label}} must be exactly one of: rowExists; family with exists; family, column and exists; family, column and equals',
  })
  .description('One condition on the row\'s live versions: a version its family\'s policy has expired does not count.');

const conditions = Joi.array()
  .items(condition)
  .min(1)
  .description("Conditions that must all hold, at least one, at most the store's `conditionsPerCheck`.");

const branch = (when: string) =>
  Joi.array().items(mutation).description(`Mutations applied atomically and in order ${when}, as in \`:mutate\`. May be empty or absent, but not together with the other list.`);

/** A branch list or the other is not empty. */
function eitherBranch(value: { mutations?: readonly unknown[]; otherwise?: readonly unknown[] }, helpers: CustomHelpers) {
  return (value.mutations?.length ?? 0) + (value.otherwise?.length ?? 0) > 0
    ? value
    : helpers.message({ custom: '{{#label}} needs a mutation in mutations or otherwise' });
}

export const checkAndMutateBody = Joi.object<CheckAndMutateBody>({
  conditions: conditions.required(),
  mutations: branch('when every condition holds'),
  otherwise: branch('when a condition does not hold'),
})
  .custom(eitherBranch)
  .label('request body')
  .required();

const INT64_DECIMAL = /^-?(?:0|[1-9][0-9]{0,18})$/;
const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;

const incrementAmount = Joi.alternatives()
  .try(
    Joi.number().integer(),
    Joi.string()
      .pattern(INT64_DECIMAL)
      .custom((value: string, helpers) => {
        const amount = BigInt(value);
        return amount >= INT64_MIN && amount <= INT64_MAX ? value : helpers.message({ custom: '{{#label}} is beyond int64' });
      }),
  )
  .messages({ 'alternatives.match': '{{#label}} must be an integer: a JSON integer within 2^53, or a decimal string within int64' })
  .description('Added to the counter: a JSON integer (within ±2^53 - 1), or a decimal string for any int64. Negative to subtract.');

const rule = oneShapeOf(
  Joi.object({
    family: columnFamily.required(),
    column: bodyBytes('Column name').required(),
    increment: incrementAmount.required(),
    encoding: encodingField('this column is'),
  }).label('increment rule'),
  Joi.object({
    family: columnFamily.required(),
    column: bodyBytes('Column name').required(),
    append: bodyBytes('Bytes appended to the latest live value (to nothing when there is none)').required(),
    encoding: encodingField('this column and value are'),
  }).label('append rule'),
)
  .messages({
    'alternatives.match': '{{#label}} must be exactly one of: family, column and increment; family, column and append',
    'alternatives.any': '{{#label}} must be exactly one of: family, column and increment; family, column and append',
  });

export const readModifyWriteBody = Joi.object<ReadModifyWriteBody>({
  rules: Joi.array()
    .items(rule)
    .min(1)
    .required()
    .description("Applied atomically and in order, each to what the earlier ones left, at most the store's `rulesPerRow`."),
})
  .label('request body')
  .required();

const entryBody = Joi.object<EntryBody>({
  key: carriesRowKeys(bodyBytes('Row key', false).required()),
  encoding: Joi.string().valid('base64').description('"base64": this key is base64.'),
  conditions: conditions.description(
    "With conditions the entry is a checkAndMutate: `mutations` apply when they all hold, `otherwise` when one does not, and the result says `matched`. Needs the store capability `checkAndMutate`.",
  ),
  mutations: Joi.array()
    .items(mutation)
    .description(
      "Applied atomically and in order, at least one (with conditions: when they all hold, and may be empty), at most the store's `mutationsPerRow`.",
    ),
  otherwise: branch('when a condition does not hold (only with conditions)'),
})
  .custom((value: EntryBody, helpers) => {
    if (value.conditions !== undefined) return eitherBranch(value, helpers);
    if (value.otherwise !== undefined) return helpers.message({ custom: '{{#label}} has otherwise but no conditions' });
    return (value.mutations?.length ?? 0) === 0 ? helpers.message({ custom: '{{#label}} needs at least one mutation' }) : value;
  })
  .label('entry');

export const batchWriteBody = Joi.object<BatchWriteBody>({
  entries: Joi.array()
    .items(entryBody)
    .min(1)
    .required()
    .description(
      "Row mutations, at most the store's `entriesPerBatch`: each entry atomic on its own, the batch not. An entry that fails does not stop the others.",
    ),
})
  .label('request body')
  .required();

// Responses. Validation never runs on these; they document what the service sends, and the
// tests check real responses against the OpenAPI document made from them.

const limitsSchema = Joi.object(
  Object.fromEntries(Object.entries(LIMIT_DESCRIPTIONS).map(([name, description]) => [name, Joi.number().integer().required().description(description)])),
).description("The bounds of one request to this store: a request beyond one is refused with 400 VALIDATION_FAILED naming it in `limit`.");

const capabilitiesSchema = Joi.object(
  Object.fromEntries(Object.entries(CAPABILITY_DESCRIPTIONS).map(([name, description]) => [name, Joi.boolean().required().description(description)])),
).description('What this store can do: a request needing what it cannot is refused with 501 NOT_SUPPORTED_BY_STORE naming it in `capability`.');

const storeDescription = Joi.object({
  name: Joi.string().required().example('embedded'),
  driver: Joi.string().required().example('embedded'),
  default: Joi.boolean().required().description('Whether this store serves v1.'),
  instances: Joi.array().items(Joi.string()).required().description('The instances the caller may use.'),
  capabilities: capabilitiesSchema.required(),
  limits: limitsSchema.required(),
});

export const storeResponse = storeDescription;
export const storesResponse = Joi.object({ stores: Joi.array().items(storeDescription).required() });

export const tablesResponse = Joi.object({ tables: Joi.array().items(tableName).required().description('Table names, in byte order.') });

export const tableResponse = Joi.object({
  name: tableName.required(),
  families: Joi.array()
    .items(familySpec)
    .required()
    .description('The families with their effective retention policies, ordered by name.'),
});

export const batchDeleteResponse = Joi.object({
  deleted: Joi.array().items(tableName).required().description('The tables deleted, in request order.'),
});

const keyEncoding = Joi.string().valid('base64').description('Present when the key is not valid UTF-8: it is then base64.');

const cellOutput = Joi.object({
  family: columnFamily.required(),
  column: base64WithEncoding(Joi.string().allow('')).required().example('status'),
  value: base64WithEncoding(Joi.string().allow('')).required().example('shipped'),
  int64: Joi.string()
    .pattern(INT64_DECIMAL)
    .description('The 8-byte value as a decimal int64: present on the counters a read names in `int64`, and on every counter readModifyWrite answers.'),
  timestamp: Joi.string()
    .pattern(TIMESTAMP_PATTERN)
    .required()
    .description('RFC 3339, UTC, microseconds. Years after 9999 take the ISO 8601 expanded form, +294247-01-10T04:00:54.775807Z.')
    .example('2026-11-21T04:27:00.123000Z'),
  encoding: Joi.string().valid('base64').description('Present when the column or the value is not valid UTF-8, and on a counter: both are then base64.'),
});

const rowOutput = Joi.object({
  key: base64WithEncoding(Joi.string()).required().example('order#1001'),
  encoding: keyEncoding,
  cells: Joi.array()
    .items(cellOutput)
    .min(1)
    .required()
    .description('Ordered by family, then column (bytes), then timestamp, newest first.'),
});

export const rowResponse = rowOutput;

export const writeRowResponse = Joi.object({
  key: Joi.string().required().example('order#1001'),
  cellsWritten: Joi.number().integer().min(1).required().example(2),
});

export const mutateRowResponse = Joi.object({
  key: Joi.string().required().example('order#1001'),
  mutationsApplied: Joi.number().integer().min(1).required().example(2),
});

export const scanResponse = Joi.object({
  rows: Joi.array().items(rowOutput).required().description('In key byte order (descending with reverse=true).'),
  nextPageToken: Joi.string()
    .max(MAX_PAGE_TOKEN_CHARS)
    .description('Present when the scan has more rows: send it as pageToken, with the same parameters, for the next page.'),
});

export const batchGetResponse = Joi.object({
  rows: Joi.array()
    .items(
      Joi.object({
        key: base64WithEncoding(Joi.string()).required(),
        encoding: keyEncoding,
        found: Joi.boolean().required().description('false: the row has none of the cells asked for (or does not exist); `cells` is empty.'),
        cells: Joi.array().items(cellOutput).required(),
      }),
    )
    .required()
    .description('One per requested key, in request order.'),
});

export const batchWriteResponse = Joi.object({
  results: Joi.array()
    .items(
      Joi.object({
        index: Joi.number().integer().min(0).required().description('The entry this is the result of.'),
        key: base64WithEncoding(Joi.string()).required(),
        encoding: keyEncoding,
        code: Joi.string()
          .valid('OK', ...ERROR_CODES)
          .required()
          .description('OK: the entry was applied. Otherwise the error code of this entry alone; it was not applied.'),
        matched: Joi.boolean().description('An entry with conditions that was applied: whether they all held (`mutations` applied) or not (`otherwise`).'),
        detail: Joi.string().description('Why the entry failed.'),
        limit: Joi.string().description('VALIDATION_FAILED: the limit the entry broke.'),
      }),
    )
    .required()
    .description('One per entry, in entry order.'),
});


export const checkAndMutateResponse = Joi.object({
  key: Joi.string().required().example('order#1001'),
  encoding: keyEncoding,
  matched: Joi.boolean().required().description('true: every condition held and `mutations` were applied; false: `otherwise` was.'),
});

export const readModifyWriteResponse = Joi.object({
  key: Joi.string().required().example('order#1001'),
  encoding: keyEncoding,
  cells: Joi.array()
    .items(cellOutput)
    .min(1)
    .required()
    .description('The new latest version of each column the rules touched, ordered by family, then column; a counter with its `int64`.'),
});

// The change feed.

export interface ChangesQuery extends EncodingQuery {
  readonly cursor?: string;
  readonly since?: string;
  readonly start?: string;
  readonly end?: string;
  readonly prefix?: string;
  readonly columns?: readonly string[];
  readonly wait?: number;
}

/** Longest wait of a long poll, in seconds. */
export const MAX_WAIT_SECONDS = 30;

export const changesQuery = Joi.object<ChangesQuery>({
  cursor: Joi.string()
    .max(MAX_CURSOR_CHARS)
    .description('Resume right after this cursor: an event\'s `id` (SSE; `Last-Event-ID` does the same and wins), or the `cursor` of a JSON answer. Absent, with no `since`: from now.'),
  since: Joi.string()
    .pattern(RFC_3339_TIMESTAMP)
    .rule({ message: { 'string.pattern.base': TIMESTAMP_MESSAGE } })
    .custom((value: string, helpers) => (parseTimestamp(value) === undefined ? helpers.message({ custom: TIMESTAMP_MESSAGE }) : value))
    .description("Start with the changes committed at or after this time (RFC 3339), within the store's `changeRetentionSeconds`."),
  start: carriesRowKeys(urlBytes('Only changes of keys from this one (inclusive)', true)),
  end: carriesRowKeys(urlBytes('Only changes of keys before this one (exclusive)', true)),
  prefix: carriesRowKeys(urlBytes('Only changes of keys starting with these bytes; excludes start and end', true)),
  columns: columnSelectors(true).description('Only the mutations of these columns or families (a row delete always), as `columns` of a read.'),
  wait: queryNumber(Joi.number().integer().min(0).max(MAX_WAIT_SECONDS)).description(
    `JSON (long poll) only: seconds to wait for a first change, 0 to ${MAX_WAIT_SECONDS} (default 0: what comes at once).`,
  ),
  encoding: encodingQuery,
})
  .oxor('cursor', 'since')
  .oxor('prefix', 'start')
  .oxor('prefix', 'end')
  .label('query');

const mutationOutput = Joi.object({
  set: Joi.object({
    family: columnFamily.required(),
    column: base64WithEncoding(Joi.string().allow('')).required(),
    value: base64WithEncoding(Joi.string().allow('')).required(),
    timestamp: Joi.string().pattern(TIMESTAMP_PATTERN).required(),
    encoding: Joi.string().valid('base64'),
  }),
  deleteColumn: Joi.object({ family: columnFamily.required(), column: base64WithEncoding(Joi.string().allow('')).required(), encoding: Joi.string().valid('base64') }),
  deleteFamily: Joi.object({ family: columnFamily.required() }),
  deleteRow: Joi.object({}),
})
  .xor('set', 'deleteColumn', 'deleteFamily', 'deleteRow')
  .label('applied mutation');

export const changeOutput = Joi.object({
  key: base64WithEncoding(Joi.string()).required().example('order#1001'),
  encoding: keyEncoding,
  timestamp: Joi.string().pattern(TIMESTAMP_PATTERN).required().description("The change's commit time in the store (RFC 3339, UTC, microseconds)."),
  mutations: Joi.array()
    .items(mutationOutput)
    .min(1)
    .required()
    .description('The mutations the change applied, in the `:mutate` shape, each `set` with its timestamp; a row delete is `deleteRow`.'),
}).label('change');

export const changesResponse = Joi.object({
  changes: Joi.array().items(changeOutput).required().description('The changes after the cursor, in the order the store gives them (per key, commit order).'),
  cursor: Joi.string().max(MAX_CURSOR_CHARS).required().description('Send it as `cursor` for what comes next.'),
  end: Joi.string()
    .valid('TABLE_DELETED', 'SHUTTING_DOWN', 'CREDENTIAL_EXPIRED', 'SLOW_READER', 'BACKEND_UNAVAILABLE')
    .description('Present when the feed ended while waiting: TABLE_DELETED (nothing will come again) or another reason to resume later.'),
});
