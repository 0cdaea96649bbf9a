import type { ErrorCode } from '../../service/errors.ts';
import type { TableTarget } from '../../service/tables.ts';
import { type Operation, defineOperation } from '../operations/operation.ts';
import { columnSelector, inBase64, renderKey, renderRow, urlBytes } from './bytes.ts';
import { conditionalFields, conditionalOf, ruleOf } from './mapping.ts';
import type * as schemas from './schemas.ts';
import { checkAndMutateBody, checkAndMutateResponse, encodingOnlyQuery, readModifyWriteBody, readModifyWriteResponse, rowPath } from './schemas.ts';

/**
 * The v2 operations that let callers coordinate: a conditional mutation and counters. Each is one
 * atomic step of the store (store.ts: checkAndMutateRow, readModifyWriteRow).
 */

const ROW = '/v2/stores/{store}/instances/{instance}/tables/{table}/rows/{key}';
const ROW_PARAMETERS = ['store', 'instance', 'table', 'key'];
const ON_ROW: readonly ErrorCode[] = [
  'STORE_NOT_FOUND',
  'INSTANCE_NOT_FOUND',
  'BACKEND_UNAVAILABLE',
  'DEADLINE_EXCEEDED',
  'TABLE_NOT_FOUND',
  'COLUMN_FAMILY_NOT_FOUND',
  'NOT_SUPPORTED_BY_STORE',
];

const target = (params: schemas.TablePath): TableTarget => ({ store: params.store, instance: params.instance, table: params.table });

export const COORDINATION_OPERATIONS: readonly Operation[] = [
  defineOperation<schemas.RowPath, schemas.EncodingQuery, schemas.CheckAndMutateBody>({
    operationId: 'rows.checkAndMutate',
    tag: 'v2',
    role: 'writer',
    method: 'post',
    path: `${ROW}:checkAndMutate`,
    pathParameters: ROW_PARAMETERS,
    params: rowPath,
    query: encodingOnlyQuery,
    body: checkAndMutateBody,
    bodyExample: () => ({
      conditions: [{ family: 'cf', column: 'owner', exists: false }],
      mutations: [{ set: { family: 'cf', column: 'owner', value: 'worker-1' } }],
      otherwise: [],
    }),
    summary: 'Mutate a row if conditions hold',
    description:
      'Checks the conditions (all must hold) on the row\'s live versions and applies `mutations` if they do, `otherwise` if not, in one atomic ' +
      'step of the store: no other write comes between the check and the mutations. A version the family\'s policy has expired does not count. ' +
      'A family the table lacks, in a condition or in either list, is 404 COLUMN_FAMILY_NOT_FOUND and nothing is written. ' +
      'The example creates the row\'s `cf:owner` only if no one has: press Execute twice, and the second answers `matched: false`. ' +
      'Needs the store capability `checkAndMutate`.',
    success: {
      status: 200,
      description: 'The conditions were checked and the branch they chose applied.',
      schema: checkAndMutateResponse,
      example: () => ({ key: 'order#1001', matched: true }),
    },
    errors: ON_ROW,
    handle: async ({ params, query, body }, { services, signal }) => {
      const base64 = inBase64(query);
      const key = urlBytes(params.key, base64);
      const input = await conditionalOf(body, base64);
      const matched = await services.rows.checkAndMutate(target(params), key, input, conditionalFields('key', '', body), { signal });
      return { ...renderKey(key, base64), matched };
    },
  }),
  defineOperation<schemas.RowPath, schemas.EncodingQuery, schemas.ReadModifyWriteBody>({
    operationId: 'rows.readModifyWrite',
    tag: 'v2',
    role: 'writer',
    method: 'post',
    path: `${ROW}:readModifyWrite`,
    pathParameters: ROW_PARAMETERS,
    params: rowPath,
    query: encodingOnlyQuery,
    body: readModifyWriteBody,
    bodyExample: () => ({ rules: [{ family: 'cf', column: 'views', increment: 1 }, { family: 'cf', column: 'trail', append: '|viewed' }] }),
    summary: 'Increment counters and append to values',
    description:
      'Applies the rules to the row atomically and in order, each to the latest live version of its column as the earlier rules left it: ' +
      '`increment` adds to a counter, an 8-byte big-endian two\'s-complement integer (a missing or expired column counts from 0, and the sum ' +
      'wraps on overflow, as in Bigtable); `append` appends bytes. The answer is the new latest version of each column touched, a counter ' +
      'with its decimal `int64`. The new version\'s timestamp is the store\'s clock, or the replaced version\'s when that is later. ' +
      'A counter column holding a value that is not 8 bytes is 400 NOT_A_COUNTER, and nothing is written. Needs the store capability `readModifyWrite`.',
    success: {
      status: 200,
      description: 'The rules were applied.',
      schema: readModifyWriteResponse,
      example: () => ({
        key: 'order#1001',
        cells: [
          { family: 'cf', column: 'trail', value: '|viewed', timestamp: '2026-11-21T04:27:00.123000Z' },
          { family: 'cf', column: 'views', value: 'AAAAAAAAAAE=', int64: '1', timestamp: '2026-11-21T04:27:00.123000Z', encoding: 'base64' },
        ],
      }),
    },
    errors: [...ON_ROW, 'NOT_A_COUNTER'],
    handle: async ({ params, query, body }, { services, signal }) => {
      const base64 = inBase64(query);
      const key = urlBytes(params.key, base64);
      const rules = body.rules.map((rule) => ruleOf(rule, base64));
      const row = await services.rows.readModifyWrite(target(params), key, rules, 'key', { signal });
      const counters = rules.flatMap((rule) => (rule.type === 'increment' ? [{ family: rule.family, column: rule.column }] : []));
      return renderRow(row, base64, counters);
    },
  }),
];

/** The `int64` selectors of a read, in the store's terms. */
export function int64Selectors(texts: readonly string[] | undefined, base64: boolean, inUrl: boolean) {
  return texts?.map((text) => columnSelector(text, base64, inUrl));
}
