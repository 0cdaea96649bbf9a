import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { expect } from 'chai';

// ajv-formats is CommonJS with a default export property.
const addFormats = addFormatsModule as unknown as typeof addFormatsModule.default;

type Json = Record<string, unknown>;
interface Operation {
  responses: Record<string, { headers?: Record<string, unknown>; content?: Record<string, { schema: Json }> }>;
}

const DOCUMENT_ID = 'kvcrud-openapi';

/**
 * OpenApiContract checks real responses against the service's own OpenAPI document: the status
 * must be documented for the operation, the media type too, the body must match its schema, and
 * the headers documented for it must be there (every response has X-Request-Id).
 * Responses to paths the document does not have must be the documented ROUTE_NOT_FOUND or
 * METHOD_NOT_ALLOWED problems (or OVERLOADED and RATE_LIMITED, which come before routing).
 */
export class OpenApiContract {
  readonly #ajv = new Ajv2020({ strict: false, allErrors: true });
  readonly #paths: Array<{ pattern: RegExp; item: Record<string, Operation> }>;
  readonly #validators = new Map<string, ValidateFunction>();
  #checked = 0;
  readonly document: Json;

  constructor(document: Json) {
    this.document = document;
    addFormats(this.#ajv);
    this.#ajv.addSchema(document, DOCUMENT_ID);
    const paths = document['paths'] as Record<string, Record<string, Operation>>;
    this.#paths = Object.entries(paths).map(([template, item]) => ({
      pattern: new RegExp(`^${template.replace(/\{[^}]+\}/g, '[^/]+')}$`),
      item,
    }));
  }

  /** How many responses have been checked. */
  get checked(): number {
    return this.#checked;
  }

  /** Throws (an assertion error) unless the response is one the document describes. */
  check(method: string, pathname: string, status: number, headers: Headers, body: unknown): void {
    this.#checked += 1;
    const where = `${method} ${pathname} -> ${status}`;
    const mediaType = (headers.get('content-type') ?? '').split(';')[0]?.trim() ?? '';
    expect(headers.get('x-request-id'), `${where}: X-Request-Id`).to.be.a('string');

    if (mediaType === 'application/problem+json') {
      const problem = body as Json;
      expect(problem['status'], `${where}: problem status`).to.equal(status);
      expect(problem['requestId'], `${where}: requestId`).to.equal(headers.get('x-request-id'));
      if (status === 503 || status === 429) expect(headers.get('retry-after'), `${where}: Retry-After`).to.match(/^\d+$/);
      if (status === 401) {
        expect(headers.get('www-authenticate'), `${where}: WWW-Authenticate`).to.match(/^Bearer realm="kvcrud"(, error="invalid_(token|request)")?$/);
      }
    }

    // Templates may overlap (`rows/{key}` and `rows/{key}:mutate`): the one with this method answers.
    const operation = this.#paths.filter(({ pattern }) => pattern.test(pathname)).find(({ item }) => item[method.toLowerCase()] !== undefined)?.item[
      method.toLowerCase()
    ];
    if (operation === undefined) {
      // Not an operation of the document: only the generic routing problems may answer.
      expect(mediaType, `${where}: undocumented path or method`).to.equal('application/problem+json');
      this.#validate('#/components/schemas/Problem', body, where);
      // Load shedding and rate limiting answer before routing, on any path.
      expect((body as Json)['code'], where).to.be.oneOf(['ROUTE_NOT_FOUND', 'METHOD_NOT_ALLOWED', 'OVERLOADED', 'RATE_LIMITED']);
      return;
    }
    const response = operation.responses[String(status)];
    expect(response, `${where}: status not documented`).to.not.equal(undefined);
    for (const name of Object.keys(response?.headers ?? {})) expect(headers.get(name), `${where}: documented header ${name}`).to.not.equal(null);
    if (response !== undefined && response.content === undefined) {
      // A response documented without content (204) has none.
      expect(body, `${where}: body of a response documented as empty`).to.equal('');
      return;
    }
    const content = response?.content?.[mediaType];
    expect(content, `${where}: media type "${mediaType}" not documented`).to.not.equal(undefined);
    this.#validate(content?.schema ?? {}, body, where);
  }

  #validate(schema: Json | string, body: unknown, where: string): void {
    const key = JSON.stringify(schema);
    let validator = this.#validators.get(key);
    if (validator === undefined) {
      validator = this.#ajv.compile(typeof schema === 'string' ? { $ref: `${DOCUMENT_ID}${schema}` } : qualifyRefs(schema));
      this.#validators.set(key, validator);
    }
    if (!validator(body)) {
      throw new Error(`${where}: body does not match the OpenAPI document: ${this.#ajv.errorsText(validator.errors)}\n${JSON.stringify(body)}`);
    }
  }
}

/** Points the document-relative $refs of a schema taken out of the document back into it. */
function qualifyRefs(schema: Json): Json {
  return JSON.parse(JSON.stringify(schema), (key, value: unknown) =>
    key === '$ref' && typeof value === 'string' && value.startsWith('#') ? `${DOCUMENT_ID}${value}` : value,
  ) as Json;
}
