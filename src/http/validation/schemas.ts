/**
 * Schemas shared by every API: names of tables and families, strings that must survive as UTF-8,
 * base64, and the documents of the operations endpoints and of problems. The request and response
 * schemas of each API are in v1/schemas.ts and v2/schemas.ts; through openapi.ts they are also the
 * OpenAPI document: one source of truth for both.
 */
import Joi, { type CustomHelpers } from 'joi';
import { ERROR_CODES } from '../../service/errors.ts';

/** The meta entry that marks a member carrying row keys (see carriesRowKeys). */
const ROW_KEYS_META = 'kvcrudRowKeys';

/**
 * Marks a request member (path parameter, query parameter or body field) that carries row keys,
 * the caller's data. Traces record a query parameter of any such name as REDACTED, also on an
 * operation that does not take it: a key sent in the wrong place is still a key
 * (src/telemetry/tracing.ts). Row keys in paths are redacted by the path's shape.
 */
export function carriesRowKeys<T extends Joi.Schema>(schema: T): T {
  // meta() returns the schema's own type, which joi's typings do not say.
  return schema.meta({ [ROW_KEYS_META]: true }) as T;
}

/** A schema's terms (joi's extension API), as far as rowKeyNames reads them. */
interface Terms {
  readonly metas?: ReadonlyArray<Record<string, unknown>>;
  readonly keys?: ReadonlyArray<{ readonly key: string; readonly schema: Joi.Schema }> | null;
  readonly items?: readonly Joi.Schema[];
}

/**
 * The names of the members marked by carriesRowKeys anywhere in `schema`, nested objects and
 * array items included. Read from the schemas' terms: describe() would render every schema whole.
 */
export function rowKeyNames(schema: Joi.Schema): string[] {
  const names = new Set<string>();
  const walk = (terms: Terms) => {
    for (const { key, schema: member } of terms.keys ?? []) {
      const memberTerms = member.$_terms as Terms;
      if (memberTerms.metas?.some((meta) => meta[ROW_KEYS_META] === true) === true) names.add(key);
      walk(memberTerms);
    }
    for (const item of terms.items ?? []) walk(item.$_terms as Terms);
  };
  walk(schema.$_terms as Terms);
  return [...names];
}

/** Bigtable's bounds for names, which every store takes: https://cloud.google.com/bigtable/quotas#limits-data-size */
export const NAME_LIMITS = Object.freeze({
  tableNameChars: 50,
  columnFamilyChars: 64,
});

// Strict RFC 4648 base64 with padding; Buffer.from(..., 'base64') would skip invalid characters.
export const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/** Characters of base64 needed for n bytes. */
export const base64Length = (bytes: number): number => Math.ceil(bytes / 3) * 4;

export const tableName = Joi.string()
  .min(1)
  .max(NAME_LIMITS.tableNameChars)
  .pattern(/^[_a-zA-Z0-9][-_.a-zA-Z0-9]*$/)
  .rule({ message: { 'string.pattern.base': '{{#label}} may hold letters, digits, _ - and dots, and must start with a letter, digit or _' } })
  .description(`Table ID: 1-${NAME_LIMITS.tableNameChars} characters, \`[_a-zA-Z0-9][-_.a-zA-Z0-9]*\`.`)
  .example('orders');

export const columnFamily = Joi.string()
  .min(1)
  .max(NAME_LIMITS.columnFamilyChars)
  .pattern(/^[-_.a-zA-Z0-9]+$/)
  .rule({ message: { 'string.pattern.base': '{{#label}} may hold only letters, digits, _ - and dots' } })
  .description(`Column family: 1-${NAME_LIMITS.columnFamilyChars} characters, \`[-_.a-zA-Z0-9]+\`.`)
  .example('cf');

/** Rejects strings with lone UTF-16 surrogates: they have no UTF-8 form and would be altered. */
export function wellFormed(value: string, helpers: CustomHelpers): string | Joi.ErrorReport {
  return value.isWellFormed() ? value : helpers.message({ custom: '{{#label}} contains a lone UTF-16 surrogate' });
}

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
  instance: Joi.string().required().description('The request path.').example('/v1/local/readCellData'),
  code: Joi.string()
    .valid(...ERROR_CODES)
    .required()
    .description('Stable, machine-readable error code.'),
  requestId: Joi.string().required().description('Also in the X-Request-Id response header; quote it to operators.'),
  errors: Joi.array()
    .items(Joi.object({ path: Joi.string().allow('').required(), message: Joi.string().required() }))
    .description('VALIDATION_FAILED: one entry per problem, by field path such as `data[1].columnValue`; the first 20 problems at most.'),
  errorCount: Joi.number()
    .integer()
    .min(2)
    .description('VALIDATION_FAILED: how many problems there were, when there were more than `errors` lists.'),
  notFound: Joi.array().items(Joi.string()).description('Deleting tables, TABLE_NOT_FOUND: the tables that do not exist.'),
  deleted: Joi.array().items(Joi.string()).description('Deleting tables, failing part-way: the tables that were deleted.'),
  notDeleted: Joi.array().items(Joi.string()).description('Deleting tables, failing part-way: the tables that were not deleted.'),
  limit: Joi.string().description("VALIDATION_FAILED beyond a store's bound: the name of the bound among the store's published `limits`."),
  capability: Joi.string().description("NOT_SUPPORTED_BY_STORE: the capability the request needs, among the store's published `capabilities`."),
});
