import type Joi from 'joi';
import joiToJson from 'joi-to-json';
import type { AuthMode } from '../config.ts';
import type { ErrorCode } from '../service/errors.ts';
import { REALM } from './middleware/authenticate.ts';
import { PROBLEM_TYPES } from './problems.ts';
import { AUTH_ERRORS, V1_OPERATIONS, operationErrors, type Operation } from './routes/v1.ts';
import * as schemas from './schemas.ts';

type JsonObject = Record<string, unknown>;

export interface OpenApiOptions {
  readonly version: string;
  /**
   * The instances the document names: with authentication on, only those its reader may use
   * (see documentedInstances); none for a reader without a credential.
   */
  readonly instanceIds: readonly string[];
  readonly maxBodyBytes: number;
  /** How callers authenticate; without it (or with no modes) every caller is admin. */
  readonly auth?: { readonly modes: readonly AuthMode[]; readonly protectDocs: boolean };
  /** Whether GET /metrics is served on this port (it is not when METRICS_PORT is set). */
  readonly servesMetrics?: boolean;
}

const PROBLEM_JSON = 'application/problem+json';
/** Codes the documentation may answer when the service sheds load (the v1 operations list theirs). */
const SHED_ERRORS: readonly ErrorCode[] = ['RATE_LIMITED', 'OVERLOADED'];
const ref = (kind: string, name: string) => ({ $ref: `#/components/${kind}/${name}` });
// joi-to-json is CommonJS (module.exports = parse) and its types say otherwise; it takes a schema instance.
const parse = joiToJson as unknown as (schema: Joi.Schema, mode: 'open-api-3.1') => JsonObject;
const toJsonSchema = (schema: Joi.Schema): JsonObject => parse(schema, 'open-api-3.1');
const componentName = (operation: Operation, suffix: string) =>
  `${operation.operationId[0]?.toUpperCase() ?? ''}${operation.operationId.slice(1)}${suffix}`;

/**
 * buildOpenApiDocument describes the running service as OpenAPI 3.1, from the same operation list
 * and joi schemas that route and validate requests. Served at /openapi.json and by the explorer.
 */
export function buildOpenApiDocument(options: OpenApiOptions): JsonObject {
  const componentSchemas: JsonObject = {
    Problem: toJsonSchema(schemas.problem),
    Health: toJsonSchema(schemas.healthResponse),
    ProblemType: toJsonSchema(schemas.problemType),
  };
  const paths: Record<string, JsonObject> = {};
  const modes = options.auth?.modes ?? [];
  const authenticated = modes.length > 0;
  // Either scheme will do: an OpenAPI security list is a choice between its entries.
  const security = [{ bearer: [] }, ...(modes.includes('apikey') ? [{ apiKey: [] }] : [])];
  const guarded = (protect: boolean) => (protect ? { security } : {});

  for (const operation of V1_OPERATIONS) {
    const successName = componentName(operation, 'Response');
    componentSchemas[successName] = toJsonSchema(operation.success.schema);
    const entry: JsonObject = {
      operationId: operation.operationId,
      tags: ['v1'],
      summary: operation.summary,
      description: authenticated
        ? `${operation.description}\n\nNeeds the \`${operation.role}\` role (or a higher one) on the instance.`
        : operation.description,
      ...guarded(authenticated),
      parameters: [ref('parameters', 'instanceID'), ...queryParameters(operation)],
      responses: {
        [operation.success.status]: {
          description: operation.success.description,
          headers: { 'X-Request-Id': ref('headers', 'X-Request-Id') },
          content: { 'application/json': { schema: ref('schemas', successName) } },
        },
        ...problemResponses([...operationErrors(operation), ...(authenticated ? AUTH_ERRORS : [])]),
      },
    };
    if (operation.body) {
      const requestName = componentName(operation, 'Request');
      componentSchemas[requestName] = toJsonSchema(operation.body);
      entry['requestBody'] = { required: true, content: { 'application/json': { schema: ref('schemas', requestName) } } };
    }
    paths[operation.path] = { ...paths[operation.path], [operation.method]: entry };
  }

  paths['/healthz'] = {
    get: {
      operationId: 'healthz',
      tags: ['operations'],
      summary: 'Liveness: the process serves HTTP',
      description: 'Makes no call to the data store.',
      responses: { 200: { description: 'Alive.', content: { 'application/json': { schema: ref('schemas', 'Health') } } } },
    },
  };
  paths['/readyz'] = {
    get: {
      operationId: 'readyz',
      tags: ['operations'],
      summary: 'Readiness: the data store answers',
      responses: {
        200: { description: 'Ready.', content: { 'application/json': { schema: ref('schemas', 'Health') } } },
        ...problemResponses(['BACKEND_UNAVAILABLE', 'SHUTTING_DOWN']),
      },
    },
  };

  const protectDocs = authenticated && (options.auth?.protectDocs ?? false);
  // With oidc, checking a token can find the issuer's keys unavailable (503).
  const docsErrors: ErrorCode[] = protectDocs ? [...AUTH_ERRORS, ...(modes.includes('oidc') ? ['BACKEND_UNAVAILABLE' as const] : [])] : [];
  if (options.servesMetrics === true) {
    // With authentication on, the metrics on the API's port need a credential (any grant).
    const metricsErrors: ErrorCode[] = authenticated ? [...AUTH_ERRORS, ...(modes.includes('oidc') ? ['BACKEND_UNAVAILABLE' as const, 'OVERLOADED' as const] : [])] : [];
    paths['/metrics'] = {
      get: {
        operationId: 'metrics',
        tags: ['operations'],
        summary: 'Prometheus metrics',
        description: authenticated
          ? 'The metrics of this process in the Prometheus text format; the README lists them. On the API port they need a credential with a grant; METRICS_PORT serves them on a listener of its own, without one.'
          : 'The metrics of this process in the Prometheus text format; the README lists them.',
        ...guarded(authenticated),
        responses: {
          200: { description: 'The metrics.', content: { 'text/plain': { schema: { type: 'string' } } } },
          ...problemResponses(metricsErrors),
        },
      },
    };
  }
  paths['/openapi.json'] = {
    get: {
      operationId: 'openapi',
      tags: ['documentation'],
      summary: 'This document',
      ...guarded(protectDocs),
      responses: {
        200: { description: 'OpenAPI 3.1.', content: { 'application/json': { schema: { type: 'object' } } } },
        ...problemResponses([...docsErrors, ...SHED_ERRORS]),
      },
    },
  };
  paths['/docs'] = {
    get: {
      operationId: 'explorer',
      tags: ['documentation'],
      summary: 'The interactive API explorer',
      ...guarded(protectDocs),
      responses: {
        200: { description: 'The explorer page (Swagger UI).', content: { 'text/html': { schema: { type: 'string' } } } },
        ...problemResponses([...docsErrors, ...SHED_ERRORS]),
      },
    },
  };
  paths['/problems/{type}'] = {
    get: {
      operationId: 'problemType',
      tags: ['documentation'],
      summary: 'What a problem type means',
      description: 'The `type` of every problem document resolves here.',
      parameters: [{ name: 'type', in: 'path', required: true, schema: { type: 'string' }, example: 'table-not-found' }],
      responses: {
        200: { description: 'The problem type.', content: { 'application/json': { schema: ref('schemas', 'ProblemType') } } },
        ...problemResponses(['ROUTE_NOT_FOUND']),
      },
    },
  };

  return {
    openapi: '3.1.0',
    info: {
      title: 'kvcrud',
      version: options.version,
      summary: 'HTTP/JSON gateway to wide-column data stores.',
      description: describeService(options),
      license: { name: 'Apache-2.0', identifier: 'Apache-2.0' },
    },
    tags: [
      { name: 'v1', description: 'Tables, rows and cells.' },
      { name: 'operations', description: 'Probes for orchestrators, and metrics.' },
      { name: 'documentation', description: 'This document and the problem types it names.' },
    ],
    paths,
    components: {
      schemas: componentSchemas,
      parameters: {
        instanceID: {
          name: 'instanceID',
          in: 'path',
          required: true,
          description: instanceDescription(options.instanceIds, authenticated),
          schema: { type: 'string' },
          ...(options.instanceIds[0] === undefined ? {} : { example: options.instanceIds[0] }),
        },
      },
      headers: {
        'X-Request-Id': {
          description: "The request's id: the caller's X-Request-Id when given (printable ASCII, up to 128), else a new UUID.",
          schema: { type: 'string' },
        },
        'Retry-After': { description: 'Seconds to wait before retrying.', schema: { type: 'integer' } },
        'WWW-Authenticate': {
          description: `How to authenticate (RFC 6750): \`Bearer realm="${REALM}"\`, with \`error="invalid_token"\` when the credential sent was not accepted or \`error="invalid_request"\` when it was sent the wrong way.`,
          schema: { type: 'string' },
        },
      },
      ...(authenticated ? { securitySchemes: securitySchemes(modes) } : {}),
    },
  };
}

function instanceDescription(named: readonly string[], authenticated: boolean): string {
  const list = named.map((id) => `\`${id}\``).join(', ');
  if (!authenticated) return `A served instance: ${list}.`;
  if (named.length === 0) {
    return 'An instance this service serves. This document names only the instances its reader may use, and so none to a reader without a credential: ask the operators which you may use.';
  }
  return `An instance this service serves. Of them, you may use: ${list}.`;
}

/**
 * documentedInstances is what the OpenAPI document may name to a reader: every served instance
 * when every caller may use them all (no authentication), else those the reader's grants cover
 * (none without a credential), so the document never tells anyone more than they may use.
 */
export function documentedInstances(served: readonly string[], authenticated: boolean, mayUse: ((instance: string) => boolean) | undefined): string[] {
  if (!authenticated) return [...served];
  return mayUse === undefined ? [] : served.filter(mayUse);
}

function securitySchemes(modes: readonly AuthMode[]): JsonObject {
  const bearerCredentials = [...(modes.includes('apikey') ? ['an API key'] : []), ...(modes.includes('oidc') ? ['an OIDC token (JWT)'] : [])];
  return {
    bearer: {
      type: 'http',
      scheme: 'bearer',
      ...(modes.includes('apikey') ? {} : { bearerFormat: 'JWT' }),
      description: `\`Authorization: Bearer <credential>\`, with ${bearerCredentials.join(' or ')}.`,
    },
    ...(modes.includes('apikey')
      ? { apiKey: { type: 'apiKey', in: 'header', name: 'X-API-Key', description: 'An API key in the `X-API-Key` header.' } }
      : {}),
  };
}

function queryParameters(operation: Operation): JsonObject[] {
  if (!operation.query) return [];
  const schema = toJsonSchema(operation.query) as { properties?: Record<string, JsonObject>; required?: string[] };
  return Object.entries(schema.properties ?? {}).map(([name, property]) => {
    const { description, examples, ...rest } = property as { description?: string; examples?: unknown[] };
    return {
      name,
      in: 'query',
      required: schema.required?.includes(name) ?? false,
      ...(description === undefined ? {} : { description }),
      ...(examples?.[0] === undefined ? {} : { example: examples[0] }),
      schema: rest,
    };
  });
}

/** One response per status, whose schema admits exactly the codes the operation can answer with. */
function problemResponses(codes: readonly ErrorCode[]): JsonObject {
  const byStatus = new Map<number, ErrorCode[]>();
  for (const code of codes) {
    const status = PROBLEM_TYPES[code].status;
    byStatus.set(status, [...(byStatus.get(status) ?? []), code]);
  }
  const responses: JsonObject = {};
  for (const [status, statusCodes] of [...byStatus].sort(([a], [b]) => a - b)) {
    responses[status] = {
      description: statusCodes.map((code) => `\`${code}\`: ${PROBLEM_TYPES[code].description}`).join('\n\n'),
      headers: {
        'X-Request-Id': ref('headers', 'X-Request-Id'),
        ...(status === 503 || status === 429 ? { 'Retry-After': ref('headers', 'Retry-After') } : {}),
        ...(status === 401 ? { 'WWW-Authenticate': ref('headers', 'WWW-Authenticate') } : {}),
      },
      content: {
        [PROBLEM_JSON]: {
          schema: { allOf: [ref('schemas', 'Problem'), { properties: { code: { enum: statusCodes }, status: { const: status } } }] },
        },
      },
    };
  }
  return responses;
}

function describeService(options: OpenApiOptions): string {
  const codes = (Object.keys(PROBLEM_TYPES) as ErrorCode[])
    .map((code) => `| \`${code}\` | ${PROBLEM_TYPES[code].status} | ${PROBLEM_TYPES[code].description} |`)
    .join('\n');
  return [
    'REST access to the tables of the configured data store instances.',
    '',
    `Bodies are JSON (UTF-8), at most ${options.maxBodyBytes} bytes. Every failure is an RFC 9457 ` +
      '`application/problem+json` document with a stable `code` and the `requestId` (also in the `X-Request-Id` header).',
    '',
    ...(options.auth?.modes.length
      ? [
          'Callers authenticate with ' +
            [...(options.auth.modes.includes('apikey') ? ['an API key'] : []), ...(options.auth.modes.includes('oidc') ? ['an OIDC token'] : [])].join(
              ' or ',
            ) +
            ' (see the security schemes; "Authorize" in the explorer). Each v1 operation names the role it needs on the instance: ' +
            '`reader` reads, `writer` also writes, `admin` also creates and deletes tables.',
          '',
        ]
      : []),
    '| code | status | meaning |',
    '|---|---|---|',
    codes,
  ].join('\n');
}
