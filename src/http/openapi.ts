import type { AuthMode } from '../config.ts';
import type { ErrorCode } from '../service/errors.ts';
import { REALM } from './middleware/authenticate.ts';
import type { Operation } from './operations/operation.ts';
import { AUTH_ERRORS } from './operations/operation.ts';
import { type JsonObject, operationPaths, problemResponses, ref, toJsonSchema } from './operations/openapi-operations.ts';
import { PROBLEM_TYPES, problemSlug } from './problems.ts';
import * as schemas from './schemas.ts';

/** A store as the document names it: in the v2 path parameters' descriptions and examples. */
export interface DocumentedStore {
  readonly name: string;
  readonly instances: readonly string[];
}

export interface OpenApiOptions {
  readonly version: string;
  /** The operations the service serves, v1's and v2's. */
  readonly operations: readonly Operation[];
  /** The codes every operation of a tag may answer with. */
  readonly commonErrors: Readonly<Record<Operation['tag'], readonly ErrorCode[]>>;
  /** The stores served, the default (which serves v1) first. */
  readonly stores: readonly [DocumentedStore, ...DocumentedStore[]];
  readonly maxBodyBytes: number;
  /** How callers authenticate; without it (or with no modes) every caller is admin. */
  readonly auth?: { readonly modes: readonly AuthMode[]; readonly protectDocs: boolean };
  /** Whether GET /metrics is served on this port (it is not when METRICS_PORT is set). */
  readonly servesMetrics?: boolean;
}

/** Codes any path but the probes may answer when the service sheds load (the API operations list theirs). */
const SHED_ERRORS: readonly ErrorCode[] = ['OVERLOADED'];

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
  const modes = options.auth?.modes ?? [];
  const authenticated = modes.length > 0;
  // Either scheme will do: an OpenAPI security list is a choice between its entries.
  const security = [{ bearer: [] }, ...(modes.includes('apikey') ? [{ apiKey: [] }] : [])];
  const guarded = (protect: boolean) => (protect ? { security } : {});
  const [defaultStore] = options.stores;
  const examples = { store: defaultStore.name, instance: defaultStore.instances[0] ?? '' };
  const paths: Record<string, JsonObject> = operationPaths(options.operations, componentSchemas, {
    authenticated,
    security,
    commonErrors: options.commonErrors,
    examples,
  });

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
      summary: 'Readiness: the data stores answer',
      description:
        'Asks every store within 800 ms. `ready`: all answered; `degraded`: some did not (the log names them), and calls to those ' +
        'fail with 503 BACKEND_UNAVAILABLE; 503: none answered.',
      responses: {
        200: { description: 'Ready, or degraded.', content: { 'application/json': { schema: ref('schemas', 'Health') } } },
        ...problemResponses(['BACKEND_UNAVAILABLE', 'SHUTTING_DOWN']),
      },
    },
  };

  const protectDocs = authenticated && (options.auth?.protectDocs ?? false);
  // With oidc, checking a token can find the issuer's keys unavailable (503).
  const docsErrors: ErrorCode[] = protectDocs ? [...AUTH_ERRORS, ...(modes.includes('oidc') ? ['BACKEND_UNAVAILABLE' as const] : [])] : [];
  if (options.servesMetrics === true) {
    paths['/metrics'] = {
      get: {
        operationId: 'metrics',
        tags: ['operations'],
        summary: 'Prometheus metrics',
        description: 'The metrics of this process in the Prometheus text format; the README lists them.',
        responses: { 200: { description: 'The metrics.', content: { 'text/plain': { schema: { type: 'string' } } } } },
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
        ...problemResponses(['ROUTE_NOT_FOUND', ...SHED_ERRORS]),
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
      { name: 'v1', description: 'Tables, rows and cells of the default store: the original API, unchanged.' },
      {
        name: 'v2',
        description:
          'Named stores; tables with several families and retention policies; rows by byte key, with scans, batches and mutations.',
      },
      { name: 'operations', description: 'Probes for orchestrators, and metrics.' },
      { name: 'documentation', description: 'This document and the problem types it names.' },
    ],
    paths,
    components: {
      schemas: componentSchemas,
      parameters: pathParameters(options.stores),
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

/** The path parameters the operations name, described with what this service serves. */
function pathParameters(stores: readonly [DocumentedStore, ...DocumentedStore[]]): JsonObject {
  const [defaultStore] = stores;
  const list = (names: readonly string[]) => names.map((name) => `\`${name}\``).join(', ');
  const path = (name: string, description: string, schema: JsonObject, example: string) => ({ name, in: 'path', required: true, description, schema, example });
  return {
    instanceID: path('instanceID', `A served instance: ${list(defaultStore.instances)}.`, { type: 'string' }, defaultStore.instances[0] ?? ''),
    store: path('store', `A served store (GET /v2/stores): ${list(stores.map((store) => store.name))}.`, { type: 'string' }, defaultStore.name),
    instance: path(
      'instance',
      `An instance of the store: ${stores.map((store) => `${store.name}: ${list(store.instances)}`).join('; ')}.`,
      { type: 'string' },
      defaultStore.instances[0] ?? '',
    ),
    table: path('table', 'The table.', toJsonSchema(schemas.tableName), 'orders'),
    key: path(
      'key',
      'The row key: percent-encoded UTF-8 (a `:` as `%3A`), or base64url of the key\'s bytes with `encoding=base64`.',
      { type: 'string', minLength: 1 },
      'order#1001',
    ),
  };
}

function describeService(options: OpenApiOptions): string {
  // Links rather than a table: the operations stay near the top of the explorer.
  const codes = (Object.keys(PROBLEM_TYPES) as ErrorCode[]).map((code) => `[\`${code}\`](/problems/${problemSlug(code)}) ${PROBLEM_TYPES[code].status}`).join(', ');
  return [
    'REST access to the tables of the configured data stores. **v1** is the original API, served by the default store. ' +
      '**v2** names the store in the path (`GET /v2/stores` lists them, with what each can do and its limits), and adds ' +
      'scans with paging, batches, row mutations and retention policies.',
    '',
    `Bodies are JSON (UTF-8), at most ${options.maxBodyBytes} bytes. Every failure is an RFC 9457 ` +
      '`application/problem+json` document with a stable `code` and the `requestId` (also in the `X-Request-Id` header); ' +
      "each operation lists the codes it can answer, with an example of each. All codes: " +
      codes +
      '.',
    '',
    ...(options.auth?.modes.length
      ? [
          'Callers authenticate with ' +
            [...(options.auth.modes.includes('apikey') ? ['an API key'] : []), ...(options.auth.modes.includes('oidc') ? ['an OIDC token'] : [])].join(
              ' or ',
            ) +
            ' (see the security schemes; "Authorize" in the explorer). Each operation names the role it needs on the instance: ' +
            '`reader` reads, `writer` also writes, `admin` also creates and deletes tables.',
          '',
        ]
      : []),
  ].join('\n');
}
