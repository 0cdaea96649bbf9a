import { expect } from 'chai';
import fc from 'fast-check';
import Joi from 'joi';
import type { Operation } from '../../src/http/operations/operation.ts';
import { precheckOf } from '../../src/http/validation/precheck.ts';
import { V1_OPERATIONS } from '../../src/http/v1/operations.ts';
import { V2_OPERATIONS } from '../../src/http/v2/operations.ts';
import { validateParts } from '../../src/http/validation/validate.ts';

const OPERATIONS: readonly Operation[] = [...V1_OPERATIONS, ...V2_OPERATIONS];
const NAMES = { store: 'main', instance: 'local' };

/** The options validate.ts gives joi for the first pass. */
const joiOptions = (context: Record<string, unknown> | undefined): Joi.ValidationOptions => ({
  convert: false,
  abortEarly: true,
  errors: { wrap: { label: false } },
  ...(context === undefined ? {} : { context }),
});

/** Contexts a part is checked in: none (the query), and the valid query of a text or a base64 request. */
const CONTEXTS: ReadonlyArray<Record<string, unknown> | undefined> = [undefined, { query: {} }, { query: { encoding: 'base64' } }];

const PARAMS: Record<string, unknown> = { instanceID: 'local', store: 'main', instance: 'local', table: 'orders', key: 'order#1' };

/** Valid values of a part, for the operations that have it, to start mutations from. */
function seeds(operation: Operation, part: 'params' | 'query' | 'body'): unknown[] {
  if (part === 'params') {
    const keys = Object.keys((operation.params?.describe() as { keys?: Record<string, unknown> } | undefined)?.keys ?? {});
    return [Object.fromEntries(keys.map((key) => [key, PARAMS[key]]))];
  }
  if (part === 'query') {
    if (operation.operationId === 'readCellData') return [{ tableName: 'orders', id: 'order#1' }];
    return [{}, { encoding: 'base64' }, { columns: ['cf', 'cf:status'] }, { columns: ['cf:c3RhdHVz'], encoding: 'base64' }];
  }
  const example = operation.bodyExample?.(NAMES);
  const extra: Record<string, unknown[]> = {
    insertData: [{ tableName: 'orders', rowKeyId: 'b3JkZXI=', data: [{ columnFamily: 'cf', columnName: 'c3RhdHVz', columnValue: '', encoding: 'base64' }] }],
    'rows.write': [{ cells: [{ family: 'cf', column: 'c3RhdHVz', value: 'AA==', encoding: 'base64', timestamp: '2026-11-21T04:27:00.123Z' }] }],
    'rows.mutate': [{ mutations: [{ set: { family: 'cf', column: 'a', value: 'b' } }, { deleteColumn: { family: 'cf', column: 'a' } }, { deleteFamily: { family: 'cf' } }, { deleteRow: {} }] }],
    'rows.batchGet': [{ keys: ['a', 'b', 'a'], columns: ['cf'], versions: 2 }],
  };
  return [...(example === undefined ? [] : [example]), ...(extra[operation.operationId] ?? [])];
}

const POOL: readonly unknown[] = [
  '', 'a', 'cf', 'cf:status', 'cf:', ':x', 'orders', '-orders', '.x', 'a b', 'x'.repeat(50), 'x'.repeat(51), 'x'.repeat(65),
  'k'.repeat(4096), 'k'.repeat(4097), 'é'.repeat(2048), 'é'.repeat(2049), '\ud800', 'a\udc00b', '\ud83d\ude00',
  'AAAA', 'AA==', 'AA=', 'A', '_-8', 'c3RhdHVz', 'base64', 'BASE64', 'utf8', '2026-11-21T04:27:00.123Z', '2026-11-21T04:27:00.1234567Z', '1969-12-31T23:59:59Z',
  '2', '1e3', 'true', '01', '1.0', '+1', ' 1', ' true',
  0, -0, 1, 2, 3, 1.5, -1, 101, 2 ** 53, 2 ** 53 - 1, 1e300, true, false, null,
  [], {}, ['cf'], [''], ['a', 'a'], [1], { family: 'cf' }, { family: 'cf', column: 'a', value: 'b' }, { name: 'cf' },
];
const KEYS: readonly string[] = [
  'extra', 'encoding', 'set', 'deleteRow', 'deleteColumn', 'deleteFamily', 'timestamp', 'family', 'column', 'value', 'versions', 'columns',
  'name', 'maxVersions', 'maxAgeSeconds', 'columnFamily', 'columnName', 'columnValue', 'tableName', 'rowKeyId', 'id', 'constructor', 'toString',
];

type Path = ReadonlyArray<string | number>;

function paths(value: unknown, at: Path = []): Path[] {
  const found: Path[] = [at];
  if (Array.isArray(value)) value.forEach((item, index) => found.push(...paths(item, [...at, index])));
  else if (typeof value === 'object' && value !== null) for (const [key, member] of Object.entries(value)) found.push(...paths(member, [...at, key]));
  return found;
}

interface Edit {
  readonly at: number;
  readonly kind: 'replace' | 'delete' | 'add' | 'copy';
  readonly pick: number;
}

/** `value` (a copy) with one edit made at one of its places. */
function edited(value: unknown, edit: Edit): unknown {
  const copy = structuredClone(value);
  const all = paths(copy);
  const path = all[edit.at % all.length] as Path;
  const fresh = structuredClone(POOL[edit.pick % POOL.length]);
  if (path.length === 0) return edit.kind === 'replace' ? fresh : copy;
  type Container = Record<string | number, unknown> & unknown[];
  const parent = path.slice(0, -1).reduce((node, key) => node[key] as Container, copy as Container);
  const last = path[path.length - 1] as string | number;
  if (edit.kind === 'replace') parent[last] = fresh;
  else if (edit.kind === 'delete') {
    if (Array.isArray(parent)) parent.splice(last as number, 1);
    else delete parent[last];
  } else if (edit.kind === 'add') {
    const target = parent[last];
    if (Array.isArray(target)) target.push(fresh);
    else if (typeof target === 'object' && target !== null) Object.defineProperty(target, KEYS[edit.pick % KEYS.length] as string, { value: fresh, enumerable: true, writable: true, configurable: true });
  } else if (Array.isArray(parent)) parent.push(structuredClone(parent[last]));
  return copy;
}

const edits = fc.array(
  fc.record({ at: fc.nat(), kind: fc.constantFrom<Edit['kind']>('replace', 'delete', 'add', 'copy'), pick: fc.nat() }),
  { minLength: 1, maxLength: 3 },
);

/** Every part of every operation with a schema, and the valid values it starts from. */
const PARTS = OPERATIONS.flatMap((operation) =>
  (['params', 'query', 'body'] as const).flatMap((part) => {
    const schema = operation[part];
    return schema === undefined ? [] : [{ name: `${operation.operationId} ${part}`, schema, seeds: seeds(operation, part) }];
  }),
);

describe('precheck', () => {
  it('compiles every part of every operation but the scan query, whose boolean converts text', () => {
    const without = PARTS.filter(({ schema }) => precheckOf(schema) === undefined).map(({ name }) => name);
    expect(without).to.deep.equal(['rows.scan query']);
  });

  it('passes the valid values each part starts from, as joi does', () => {
    for (const { name, schema, seeds: values } of PARTS) {
      const check = precheckOf(schema);
      if (check === undefined) continue;
      for (const value of values) {
        for (const context of CONTEXTS) {
          const joi = schema.validate(value, joiOptions(context));
          // Numbers in a query are text that joi converts: those are left to it.
          const converted = joi.error === undefined && JSON.stringify(joi.value) !== JSON.stringify(value);
          expect(check(value, { context }), `${name} ${JSON.stringify(value)} in ${JSON.stringify(context)}`).to.equal(joi.error === undefined && !converted);
        }
      }
    }
  });

  it('says valid only where joi accepts the value and gives it back as it is', () => {
    let passed = 0;
    let refused = 0;
    for (const { name, schema, seeds: values } of PARTS) {
      const check = precheckOf(schema);
      if (check === undefined || values.length === 0) continue;
      fc.assert(
        fc.property(fc.nat({ max: values.length - 1 }), edits, fc.constantFrom(...CONTEXTS), (seed, list, context) => {
          const value = list.reduce((current, edit) => edited(current, edit), values[seed]);
          if (!check(value, { context })) {
            refused += 1;
            return;
          }
          passed += 1;
          const joi = schema.validate(value, joiOptions(context));
          expect(joi.error?.message, `${name} ${JSON.stringify(value)}`).to.equal(undefined);
          expect(joi.value, name).to.deep.equal(value);
        }),
        { numRuns: 1000 },
      );
    }
    // Both answers were given, many times: the property looked at both sides.
    expect(passed).to.be.above(1000);
    expect(refused).to.be.above(1000);
  });

  it('leaves to joi a number that would be -0, and query text that joi converts', () => {
    const batchGet = V2_OPERATIONS.find((operation) => operation.operationId === 'rows.batchGet')?.body as Joi.ObjectSchema;
    const get = V2_OPERATIONS.find((operation) => operation.operationId === 'rows.get')?.query as Joi.ObjectSchema;
    const versions = Joi.object({ versions: Joi.number().integer().max(3) });
    expect(precheckOf(versions)?.({ versions: -0 }, {})).to.equal(false);
    expect(precheckOf(versions)?.({ versions: 0 }, {})).to.equal(true);
    expect(precheckOf(batchGet)?.({ keys: ['a'], versions: 2 }, {})).to.equal(true);
    expect(precheckOf(get)?.({ versions: '2' }, {})).to.equal(false);
    expect(get.validate({ versions: '2' }, joiOptions(undefined)).value).to.deep.equal({ versions: 2 });
    // Only decimal digits are converted: joi alone would read each of these as 1.
    for (const versions of ['01', '1e0', '1.0', '+1', ' 1']) {
      expect(precheckOf(get)?.({ versions }, {}), versions).to.equal(false);
      expect(get.validate({ versions }, joiOptions(undefined)).error?.message, versions).to.match(/^versions must be decimal digits only/);
    }
  });

  it('leaves a value to joi when a custom rule throws, or warns', () => {
    const throwing = Joi.object({ a: Joi.string().custom(() => {
      throw new Error('no');
    }) });
    const warning = Joi.object({ a: Joi.string().custom((value: string, helpers) => helpers.warn('any.custom') as unknown as string) });
    expect(precheckOf(throwing)?.({ a: 'x' }, {})).to.equal(false);
    expect(precheckOf(warning)?.({ a: 'x' }, {})).to.equal(false);
  });

  it('gets no check for schemas using what it does not know', () => {
    const unknown = [
      Joi.object().unknown(),
      Joi.object({ a: Joi.string().default('x') }),
      Joi.object({ a: Joi.string() }).prefs({ presence: 'required' }),
      Joi.object({ a: Joi.alternatives(Joi.string(), Joi.number()) }),
      Joi.object({ a: Joi.string() }).with('a', 'b'),
      Joi.object({ a: Joi.string().invalid('x') }),
      Joi.array().items(Joi.string().required()),
      Joi.array().items(Joi.string(), Joi.number()),
      Joi.object({ a: Joi.string().valid(Joi.ref('b')), b: Joi.string() }),
      Joi.object({ a: Joi.number().max(Joi.ref('b')), b: Joi.number() }),
    ];
    for (const schema of unknown) expect(precheckOf(schema), JSON.stringify(schema.describe())).to.equal(undefined);
  });

  it('validateParts gives the value itself when every part passes, and joi problems when one does not', async () => {
    const insert = V1_OPERATIONS.find((operation) => operation.operationId === 'insertData')?.body as Joi.ObjectSchema;
    const body = { tableName: 'orders', rowKeyId: 'order#1', data: [{ columnFamily: 'cf', columnName: 'status', columnValue: 'shipped' }] };
    const [value] = await validateParts([{ schema: insert, value: body }]);
    expect(value).to.equal(body);
    const error = await validateParts([{ schema: insert, value: { ...body, data: [...body.data, ...body.data] } }]).catch((caught: unknown) => caught);
    expect((error as { extensions?: { errors?: unknown } }).extensions?.errors).to.deep.equal([{ path: 'data[1]', message: 'data[1] writes the same column as data[0]' }]);
  });
});
