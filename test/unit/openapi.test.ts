import { Validator } from '@seriousme/openapi-schema-validator';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { expect } from 'chai';
import Joi from 'joi';
import type { AuthMode } from '../../src/config.ts';
import { API_OPERATIONS, COMMON_ERRORS } from '../../src/http/api.ts';
import { type OpenApiOptions, buildOpenApiDocument as buildDocument } from '../../src/http/openapi/openapi.ts';
import { toJsonSchema } from '../../src/http/operations/json-schema.ts';
import { operationErrors } from '../../src/http/operations/operation.ts';
import { V1_OPERATIONS } from '../../src/http/v1/operations.ts';
import { V2_OPERATIONS } from '../../src/http/v2/operations.ts';
import { mutateRowBody } from '../../src/http/v2/schemas.ts';
import { validate } from '../../src/http/validation/validate.ts';
import { PROBLEM_TYPES } from '../../src/http/problems.ts';
import { ERROR_CODES } from '../../src/service/errors.ts';
import { OpenApiContract } from '../support/openapi-contract.ts';

// ajv-formats is CommonJS with a default export property.
const addFormats = addFormatsModule as unknown as typeof addFormatsModule.default;

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- walking a JSON document
type Json = Record<string, any>;

/** The document of a service whose default store serves `instanceIds`. */
function buildOpenApiDocument(
  options: { instanceIds: string[] } & Omit<OpenApiOptions, 'operations' | 'commonErrors' | 'stores'>,
): Json {
  const { instanceIds, ...rest } = options;
  return buildDocument({ ...rest, operations: API_OPERATIONS, commonErrors: COMMON_ERRORS, stores: [{ name: 'embedded', instances: instanceIds, default: true }] });
}

describe('the OpenAPI document', () => {
  const document: Json = buildOpenApiDocument({ version: '1.2.3', instanceIds: ['inst-a', 'inst-b'], maxBodyBytes: 1024 });

  it('is valid OpenAPI 3.1', async () => {
    const result = await new Validator().validate(document);
    expect(result.errors ?? [], JSON.stringify(result.errors)).to.deep.equal([]);
    expect(result.valid).to.equal(true);
    expect(document['openapi']).to.equal('3.1.0');
  });

  it('describes the four v1 operations with their success status and body', () => {
    const operations = Object.entries(document['paths'] as Json).flatMap(([path, item]) =>
      Object.entries(item as Json).map(([method, operation]) => `${method.toUpperCase()} ${path} ${Object.keys((operation as Json)['responses'] as Json)[0]}`),
    );
    expect(operations).to.include.members([
      'POST /v1/{instanceID}/createTable 201',
      'POST /v1/{instanceID}/insertData 200',
      'GET /v1/{instanceID}/readCellData 200',
      'DELETE /v1/{instanceID}/deleteTable 200',
    ]);
  });

  it('documents, per operation, a problem response for each status its error codes have', () => {
    for (const operation of V1_OPERATIONS) {
      const responses = document['paths'][operation.path][operation.method]['responses'] as Json;
      for (const code of operationErrors(operation, COMMON_ERRORS.v1)) {
        const status = PROBLEM_TYPES[code].status;
        const schema = responses[status]?.content?.['application/problem+json']?.schema;
        expect(schema, `${operation.operationId} ${status}`).to.not.equal(undefined);
        expect(schema.allOf[1].properties.code.enum).to.include(code);
      }
    }
  });

  it("keeps v1's codes to v1: no v1 operation documents a code v2 added", () => {
    for (const operation of V1_OPERATIONS) {
      const responses = document['paths'][operation.path][operation.method]['responses'] as Json;
      const codes = Object.values(responses).flatMap((response) => (response as Json)?.content?.['application/problem+json']?.schema?.allOf?.[1]?.properties?.code?.enum ?? []);
      for (const code of ['STORE_NOT_FOUND', 'INVALID_PAGE_TOKEN', 'NOT_SUPPORTED_BY_STORE']) expect(codes, operation.operationId).to.not.include(code);
    }
  });

  it('documents every v2 operation under the v2 tag, each body with an example that is valid', async () => {
    for (const operation of V2_OPERATIONS) {
      const entry = document['paths'][operation.path]?.[operation.method] as Json | undefined;
      expect(entry?.['tags'], operation.operationId).to.deep.equal(['v2']);
      if (operation.body !== undefined) {
        const example: unknown = entry?.['requestBody']?.content?.['application/json']?.example;
        expect(example, operation.operationId).to.not.equal(undefined);
        await validate(operation.body, example);
      }
    }
  });

  it('gives each documented error a real example of its own code and status', () => {
    for (const item of Object.values(document['paths'] as Json)) {
      for (const operation of Object.values(item as Json)) {
        for (const [status, response] of Object.entries((operation as Json)['responses'] as Json)) {
          const problem = (response as Json)?.content?.['application/problem+json'];
          if (problem === undefined) continue;
          for (const code of problem.schema.allOf[1].properties.code.enum as string[]) {
            expect(problem.examples[code].value, `${(operation as Json)['operationId']} ${code}`).to.include({ code, status: Number(status) });
          }
        }
      }
    }
  });

  it('lists every error code in the Problem schema', () => {
    expect(document['components']['schemas']['Problem']['properties']['code']['enum']).to.deep.equal([...ERROR_CODES]);
  });

  it('names the served instances for the explorer', () => {
    const parameter = document['components']['parameters']['instanceID'] as Json;
    expect(parameter['example']).to.equal('inst-a');
    expect(parameter['description']).to.contain('`inst-b`');
  });

  it('takes its limits from the joi schemas', () => {
    const request = document['components']['schemas']['InsertDataRequest'] as Json;
    expect(request['properties']['data']['maxItems']).to.equal(100_000);
    expect(request['properties']['rowKeyId']['maxLength']).to.equal(4096);
    expect(request['additionalProperties']).to.equal(false);
  });
});

describe('the OpenAPI document and authentication', () => {
  const options = { version: '1.2.3', instanceIds: ['inst-a'], maxBodyBytes: 1024 };

  it('is valid OpenAPI 3.1 with every auth mode and protected docs', async () => {
    const modeSets: AuthMode[][] = [['apikey'], ['oidc'], ['apikey', 'oidc']];
    for (const modes of modeSets) {
      const document: Json = buildOpenApiDocument({ ...options, auth: { modes, protectDocs: true } });
      const result = await new Validator().validate(document);
      expect(result.errors ?? [], `${modes.join(',')}: ${JSON.stringify(result.errors)}`).to.deep.equal([]);
      expect(Object.keys(document['components']['securitySchemes'])).to.deep.equal(modes.includes('apikey') ? ['bearer', 'apiKey'] : ['bearer']);
      for (const path of ['/openapi.json', '/docs']) {
        expect(Object.keys(document['paths'][path]['get']['responses']), path).to.include.members(['200', '401', '403']);
      }
    }
  });

  it('documents no security, 401 or 403 when every caller is admin', () => {
    const document: Json = buildOpenApiDocument({ ...options, auth: { modes: [], protectDocs: false } });
    expect(document['components']).to.not.have.property('securitySchemes');
    for (const item of Object.values(document['paths'] as Json)) {
      for (const operation of Object.values(item as Json)) {
        expect(operation).to.not.have.property('security');
        expect(operation['responses']).to.not.have.any.keys('401', '403');
      }
    }
  });
});

describe('the response contract check used by every API test', () => {
  const contract = new OpenApiContract(buildOpenApiDocument({ version: '0', instanceIds: ['inst-a'], maxBodyBytes: 1024 }));
  const jsonHeaders = new Headers({ 'content-type': 'application/json; charset=utf-8', 'x-request-id': 'r1' });
  const problemHeaders = new Headers({ 'content-type': 'application/problem+json', 'x-request-id': 'r1' });
  const problem = (code: string, status: number) => ({ type: '/p', title: 't', status, detail: 'd', instance: '/i', code, requestId: 'r1' });

  it('accepts a documented response', () => {
    contract.check('POST', '/v1/inst-a/createTable', 201, jsonHeaders, { instanceID: 'inst-a', tableName: 't', columnFamily: 'cf' });
  });

  it('rejects a body that does not match the schema', () => {
    expect(() => contract.check('POST', '/v1/inst-a/createTable', 201, jsonHeaders, { instanceID: 'inst-a', tableName: 't' })).to.throw(/does not match/);
    expect(() =>
      contract.check('POST', '/v1/inst-a/createTable', 201, jsonHeaders, { instanceID: 'i', tableName: 't', columnFamily: 'cf', extra: 1 }),
    ).to.throw(/does not match/);
  });

  it('rejects a status the operation does not document', () => {
    expect(() => contract.check('POST', '/v1/inst-a/createTable', 200, jsonHeaders, {})).to.throw(/status not documented/);
  });

  it('rejects an error code the status does not document for the operation', () => {
    expect(() => contract.check('POST', '/v1/inst-a/createTable', 404, problemHeaders, problem('ROW_NOT_FOUND', 404))).to.throw(/does not match/);
    contract.check('GET', '/v1/inst-a/readCellData', 404, problemHeaders, problem('ROW_NOT_FOUND', 404));
  });

  it('rejects a 401 without the WWW-Authenticate challenge', () => {
    const secured = new OpenApiContract(buildOpenApiDocument({ version: '0', instanceIds: ['inst-a'], maxBodyBytes: 1024, auth: { modes: ['apikey'], protectDocs: false } }));
    const unauthenticated = problem('UNAUTHENTICATED', 401);
    expect(() => secured.check('GET', '/v1/inst-a/readCellData', 401, problemHeaders, unauthenticated)).to.throw(/WWW-Authenticate/);
    const challenged = new Headers({ ...Object.fromEntries(problemHeaders), 'www-authenticate': 'Bearer realm="kvcrud"' });
    secured.check('GET', '/v1/inst-a/readCellData', 401, challenged, unauthenticated);
  });

  it('rejects a problem whose requestId differs from the X-Request-Id header', () => {
    expect(() => contract.check('GET', '/nope', 404, problemHeaders, { ...problem('ROUTE_NOT_FOUND', 404), requestId: 'other' })).to.throw(/requestId/);
  });
});

describe('the OpenAPI document as validators and client generators read it', () => {
  const document: Json = buildOpenApiDocument({ version: '1.2.3', instanceIds: ['inst-a'], maxBodyBytes: 1024 });
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  addFormats(ajv);
  ajv.addSchema(document, 'document');
  /** Validates `value` against the schema at `pointer` (a JSON pointer into the document), or throws naming `where`. */
  const check = (pointer: string, value: unknown, where: string) => {
    const validator = ajv.getSchema(`document#${pointer}`);
    if (validator === undefined) throw new Error(`${where}: no schema at ${pointer}`);
    if (!validator(value)) throw new Error(`${where}: the example does not match its schema: ${ajv.errorsText(validator.errors)}\n${JSON.stringify(value)}`);
  };
  const escape = (token: string) => token.replaceAll('~', '~0').replaceAll('/', '~1');
  const operations = () =>
    Object.entries(document['paths'] as Json).flatMap(([path, item]) =>
      Object.entries(item as Json).map(([method, operation]) => ({ path, method, operation: operation as Json, pointer: `/paths/${escape(path)}/${method}` })),
    );

  it('has examples that match their schemas: request bodies, responses, problems and parameters', () => {
    let examples = 0;
    for (const { pointer, operation } of operations()) {
      const contents: Array<[string, Json]> = [
        ...Object.entries((operation['requestBody']?.content ?? {}) as Json).map(([type, content]): [string, Json] => [`${pointer}/requestBody/content/${escape(type)}`, content]),
        ...Object.entries(operation['responses'] as Json).flatMap(([status, response]) =>
          Object.entries(((response as Json)['content'] ?? {}) as Json).map(([type, content]): [string, Json] => [`${pointer}/responses/${status}/content/${escape(type)}`, content]),
        ),
      ];
      for (const [at, content] of contents) {
        if (content['example'] !== undefined) {
          check(`${at}/schema`, content['example'], at);
          examples += 1;
        }
        for (const [name, example] of Object.entries((content['examples'] ?? {}) as Json)) {
          check(`${at}/schema`, (example as Json)['value'], `${at} ${name}`);
          examples += 1;
        }
      }
    }
    for (const [name, parameter] of Object.entries(document['components']['parameters'] as Json)) {
      if ((parameter as Json)['example'] !== undefined) check(`/components/parameters/${name}/schema`, (parameter as Json)['example'], name);
    }
    for (const { pointer, operation } of operations()) {
      for (const [index, parameter] of ((operation['parameters'] ?? []) as Json[]).entries()) {
        if (parameter['example'] !== undefined) check(`${pointer}/parameters/${index}/schema`, parameter['example'], `${pointer} ${parameter['name']}`);
      }
    }
    expect(examples).to.be.greaterThan(100);
  });

  it('has schema examples that match the schemas they are in', () => {
    const walk = (node: unknown, pointer: string) => {
      if (typeof node !== 'object' || node === null) return;
      if (!Array.isArray(node) && Array.isArray((node as Json)['examples']) && ((node as Json)['type'] !== undefined || (node as Json)['pattern'] !== undefined)) {
        for (const example of (node as Json)['examples'] as unknown[]) check(pointer, example, pointer);
      }
      for (const [key, value] of Object.entries(node)) if (key !== 'examples') walk(value, `${pointer}/${escape(key)}`);
    };
    walk(document['components']['schemas'], '/components/schemas');
  });

  it('gives mutations as a union: exactly one of set, deleteColumn, deleteFamily and deleteRow', () => {
    const mutations = (mutation: unknown) => ({ mutations: [mutation] });
    const at = '/components/schemas/RowsMutateRequest';
    const cell = { family: 'cf', column: 'status', value: 'shipped' };
    for (const mutation of [{ set: cell }, { deleteColumn: { family: 'cf', column: 'status' } }, { deleteFamily: { family: 'cf' } }, { deleteRow: {} }]) {
      check(at, mutations(mutation), JSON.stringify(mutation));
    }
    for (const mutation of [{}, { set: cell, deleteRow: {} }, { deleteRow: {}, other: 1 }]) {
      expect(() => check(at, mutations(mutation), JSON.stringify(mutation)), JSON.stringify(mutation)).to.throw(/does not match/);
    }
    const items = document['components']['schemas']['RowsMutateRequest']['properties']['mutations']['items'] as Json;
    expect(items).to.not.have.any.keys('if', 'then', 'else', 'properties');
    for (const alternative of items['oneOf'] as Json[]) {
      expect(alternative['required']).to.have.length(1);
      expect(alternative['additionalProperties']).to.equal(false);
      const others = Object.entries(alternative['properties'] as Json).filter(([name]) => name !== alternative['required'][0]);
      expect(others.map(([, schema]) => schema)).to.deep.equal([false, false, false]);
    }
  });

  it('gives conditions and rules as unions of closed alternatives, each forbidding the members of the others', () => {
    const schemas = document['components']['schemas'] as Json;
    const unions: Array<[string, Json, unknown[], unknown[]]> = [
      [
        'conditions',
        schemas['RowsCheckAndMutateRequest']['properties']['conditions']['items'],
        [
          { rowExists: true },
          { family: 'cf', exists: false },
          { family: 'cf', column: 'status', exists: true },
          { family: 'cf', column: 'c3RhdHVz', exists: true, encoding: 'base64' },
          { family: 'cf', column: 'status', equals: 'new' },
          { family: 'cf', column: 'c3RhdHVz', equals: 'bmV3', encoding: 'base64' },
        ],
        [
          {},
          { family: 'cf', column: 'status', equals: 'new', exists: true },
          { rowExists: true, family: 'cf' },
          { family: 'cf', exists: true, encoding: 'base64' },
          { rowExists: false, family: 'cf', exists: false },
          { family: 'cf', column: 'status', exists: true, other: 1 },
        ],
      ],
      [
        'batch entry conditions',
        schemas['RowsBatchWriteRequest']['properties']['entries']['items']['properties']['conditions']['items'],
        [{ rowExists: false }, { family: 'cf', column: 'status', equals: 'new' }],
        [{ rowExists: false, family: 'cf' }, { family: 'cf', column: 'status', equals: 'new', exists: true }],
      ],
      [
        'rules',
        schemas['RowsReadModifyWriteRequest']['properties']['rules']['items'],
        [
          { family: 'cf', column: 'n', increment: 1 },
          { family: 'cf', column: 'n', increment: '-9223372036854775808' },
          { family: 'cf', column: 'log', append: '.' },
          { family: 'cf', column: 'bG9n', append: 'Lg==', encoding: 'base64' },
        ],
        [{ family: 'cf', column: 'n' }, { family: 'cf', column: 'n', increment: 1, append: '.' }, { family: 'cf', column: 'n', increment: 1, other: 1 }],
      ],
    ];
    for (const [what, union, valid, invalid] of unions) {
      const validate = ajv.compile(union);
      for (const value of valid) expect(validate(value), `${what} ${JSON.stringify(value)}`).to.equal(true);
      for (const value of invalid) expect(validate(value), `${what} ${JSON.stringify(value)}`).to.equal(false);
      const alternatives = union['oneOf'] as Json[];
      const members = new Set(alternatives.flatMap((alternative) => Object.keys(alternative['properties'] as Json)));
      for (const alternative of alternatives) {
        expect(alternative['additionalProperties'], what).to.equal(false);
        // Every member of the union is in each alternative: its own with a schema, the others' as `false`.
        expect(Object.keys(alternative['properties'] as Json), what).to.have.members([...members]);
        const forbidden = Object.entries(alternative['properties'] as Json).filter(([, schema]) => schema === false).map(([name]) => name);
        expect(forbidden.filter((name) => (alternative['required'] as string[]).includes(name)), what).to.deep.equal([]);
        expect(forbidden, what).to.not.be.empty;
      }
    }
  });

  it('says the bounds the service enforces: key lengths, selector and timestamp patterns, base64', () => {
    const schemas = document['components']['schemas'] as Json;
    expect(schemas['RowsBatchGetRequest']['properties']['keys']['items']['minLength']).to.equal(1);
    expect(schemas['RowsBatchGetRequest']['properties']['columns']['items']).to.include({ minLength: 1 }).and.to.have.property('pattern');
    const entry = schemas['RowsBatchWriteRequest']['properties']['entries']['items'] as Json;
    expect(entry['properties']['key']['minLength']).to.equal(1);
    expect(entry['then']['properties']['key']).to.deep.equal({ contentEncoding: 'base64' });
    const set = schemas['RowsWriteRequest']['properties']['cells']['items'] as Json;
    const timestamp = new RegExp(set['properties']['timestamp']['pattern'] as string, 'u');
    for (const text of ['2026-11-21T04:27:00.123Z', '2026-11-21T04:27:00Z', '+294247-01-10T04:00:54.775807Z', '2026-11-21T04:27:00+02:00']) expect(text).to.match(timestamp);
    for (const text of ['2026-11-21', '2026-11-21 04:27:00Z', '2026-11-21T04:27:00.1234567Z']) expect(text).to.not.match(timestamp);
    expect(set['if']).to.deep.equal({ properties: { encoding: { const: 'base64' } }, required: ['encoding'] });
    expect(set['then']['properties']).to.deep.equal({ column: { contentEncoding: 'base64' }, value: { contentEncoding: 'base64' } });
    const selector = new RegExp(document['paths']['/v2/stores/{store}/instances/{instance}/tables/{table}/rows']['get']['parameters'].find((p: Json) => p['name'] === 'columns')['schema']['items']['pattern'] as string, 'u');
    for (const text of ['cf', 'cf:status', 'cf:', 'c.f-_1:a:b']) expect(text).to.match(selector);
    for (const text of ['', ':status', 'c f', 'x'.repeat(65)]) expect(text).to.not.match(selector);
  });

  it('documents 405 and 431 on every operation, and X-Request-Id on every response', () => {
    for (const { pointer, operation } of operations()) {
      const responses = operation['responses'] as Json;
      expect(responses, pointer).to.include.keys('405', '431');
      expect(responses['405'].content['application/problem+json'].schema.allOf[1].properties.code.enum, pointer).to.deep.equal(['METHOD_NOT_ALLOWED']);
      expect(responses['405'].headers, pointer).to.have.property('Allow');
      for (const [status, response] of Object.entries(responses)) {
        expect((response as Json)['headers']?.['X-Request-Id'], `${pointer} ${status}`).to.deep.equal({ $ref: '#/components/headers/X-Request-Id' });
      }
    }
  });

  it('names the service that serves it as its server, by a relative URL', () => {
    expect(document['servers']).to.deep.equal([{ url: '/', description: 'The service that serves this document.' }]);
  });
});

describe('the validation messages of a mutation', () => {
  const problems = async (mutation: unknown): Promise<string> => {
    try {
      await validate(mutateRowBody, { mutations: [mutation] });
      return 'valid';
    } catch (error) {
      return JSON.stringify((error as { extensions?: unknown }).extensions);
    }
  };

  it('names the keys a mutation may have when it has none of them', async () => {
    expect(await problems({})).to.contain('must have one of [set, deleteColumn, deleteFamily, deleteRow]').and.not.contain('cell');
  });

  it('names the keys it has when it has more than one', async () => {
    expect(await problems({ set: { family: 'cf', column: 'a', value: 'b' }, deleteRow: {} })).to.contain('must have only one of [set, deleteColumn, deleteFamily, deleteRow], not [set, deleteRow]');
  });
});

describe('the JSON Schema of a forbidden member', () => {
  it('is false, which client generators type as never', () => {
    const schema = toJsonSchema(Joi.object({ a: Joi.number().required(), b: Joi.forbidden() }));
    expect(schema['properties']).to.deep.equal({ a: { type: 'number' }, b: false });
    const validate = new Ajv2020({ strict: false }).compile(schema);
    expect([{ a: 1 }, { a: 1, b: 2 }].map((value) => validate(value))).to.deep.equal([true, false]);
  });
});

describe('the JSON Schema of a joi xor', () => {
  const ajv = new Ajv2020({ strict: false });

  it('is a oneOf of closed alternatives, each with the shared members and one peer', () => {
    const schema = toJsonSchema(Joi.object({ id: Joi.string().required(), note: Joi.string(), a: Joi.number(), b: Joi.number() }).xor('a', 'b'));
    expect(schema).to.not.have.any.keys('if', 'then', 'else', 'properties');
    const validate = ajv.compile(schema);
    expect([{ id: 'x', a: 1 }, { id: 'x', b: 1, note: 'n' }].map((value) => validate(value))).to.deep.equal([true, true]);
    expect([{ id: 'x' }, { id: 'x', a: 1, b: 2 }, { a: 1 }, { id: 'x', a: 1, c: 3 }].map((value) => validate(value))).to.deep.equal([false, false, false, false]);
  });

  it('still says exactly one of the peers when the object has other dependencies', () => {
    const schema = toJsonSchema(Joi.object({ a: Joi.number(), b: Joi.number(), c: Joi.number(), d: Joi.number() }).xor('a', 'b').with('c', 'd'));
    const validate = ajv.compile(schema);
    expect([{ a: 1 }, { b: 1, c: 1, d: 1 }].map((value) => validate(value))).to.deep.equal([true, true]);
    expect([{}, { a: 1, b: 1 }, { a: 1, c: 1 }].map((value) => validate(value))).to.deep.equal([false, false, false]);
  });
});
