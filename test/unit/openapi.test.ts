import { Validator } from '@seriousme/openapi-schema-validator';
import { expect } from 'chai';
import type { AuthMode } from '../../src/config.ts';
import { API_OPERATIONS, COMMON_ERRORS } from '../../src/http/api.ts';
import { type OpenApiOptions, buildOpenApiDocument as buildDocument } from '../../src/http/openapi/openapi.ts';
import { operationErrors } from '../../src/http/operations/operation.ts';
import { V1_OPERATIONS } from '../../src/http/v1/operations.ts';
import { V2_OPERATIONS } from '../../src/http/v2/operations.ts';
import { validate } from '../../src/http/validation/validate.ts';
import { PROBLEM_TYPES } from '../../src/http/problems.ts';
import { ERROR_CODES } from '../../src/service/errors.ts';
import { OpenApiContract } from '../support/openapi-contract.ts';

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
  const jsonHeaders = new Headers({ 'content-type': 'application/json; charset=utf-8' });
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
