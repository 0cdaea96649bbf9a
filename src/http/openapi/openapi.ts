import { type Caller, type ServedStores, usableStores } from '../../auth/access.ts';
import type { AuthMode } from '../../config.ts';
import type { ErrorCode } from '../../service/errors.ts';
import { REALM } from '../middleware/authenticate.ts';
import type { ExampleNames, Operation } from '../operations/operation.ts';
import { AUTH_ERRORS } from '../operations/operation.ts';
import { REQUEST_ID_HEADER, type JsonObject, operationPaths, problemResponses, ref, toJsonSchema } from '../operations/openapi-operations.ts';
import { PROBLEM_TYPES, problemSlug } from '../problems.ts';
import * as schemas from '../validation/schemas.ts';

/** A store as the document names it: in the v2 path parameters' descriptions and examples. */
export interface DocumentedStore {
  readonly name: string;
  readonly instances: readonly string[];
  /** Whether it is the default store, which serves v1. */
  readonly default: boolean;
}

export interface OpenApiOptions {
  readonly version: string;
  /** The operations the service serves, v1's and v2's. */
  readonly operations: readonly Operation[];
  /** The codes every operation of a tag may answer with. */
  readonly commonErrors: Readonly<Record<Operation['tag'], readonly ErrorCode[]>>;
  /**
   * The stores served, the default (which serves v1) first, or none. With authentication on, only
   * those its reader may use, with those instances (see documentedStores): none for a reader
   * without a credential.
   */
  readonly stores: readonly DocumentedStore[];
  readonly maxBodyBytes: number;
  /** How callers authenticate; without it (or with no modes) every caller is admin. */
  readonly auth?: { readonly modes: readonly AuthMode[]; readonly protectDocs: boolean };
  /** Whether GET /metrics is served on this port (it is not when METRICS_PORT is set). */
  readonly servesMetrics?: boolean;
}

/** Codes the documentation may answer when the service sheds load (the API operations list theirs). */
const SHED_ERRORS: readonly ErrorCode[] = ['RATE_LIMITED', 'OVERLOADED'];

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
  const examples = exampleNames(options.stores);
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
      responses: {
        200: { description: 'Alive.', headers: REQUEST_ID_HEADER, content: { 'application/json': { schema: ref('schemas', 'Health') } } },
        ...problemResponses([], '/healthz'),
      },
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
        200: { description: 'Ready, or degraded.', headers: REQUEST_ID_HEADER, content: { 'application/json': { schema: ref('schemas', 'Health') } } },
        ...problemResponses(['BACKEND_UNAVAILABLE', 'SHUTTING_DOWN'], '/readyz'),
      },
    },
  };

  const protectDocs = authenticated && (options.auth?.protectDocs ?? false);
  // With oidc, checking a token can find the issuer's keys unavailable (503).
  const docsErrors: ErrorCode[] = protectDocs ? [...AUTH_ERRORS, ...(modes.includes('oidc') ? ['BACKEND_UNAVAILABLE' as const] : [])] : [];
  if (options.servesMetrics === true) {
    // With authentication on, the metrics on the API's port need a credential with a grant on every store.
    const metricsErrors: ErrorCode[] = authenticated ? [...AUTH_ERRORS, ...(modes.includes('oidc') ? ['BACKEND_UNAVAILABLE' as const, 'OVERLOADED' as const] : [])] : [];
    paths['/metrics'] = {
      get: {
        operationId: 'metrics',
        tags: ['operations'],
        summary: 'Prometheus metrics',
        description: authenticated
          ? 'The metrics of this process in the Prometheus text format; the README lists them. On the API port they need a credential with a grant on every store, since they name them all; METRICS_PORT serves them on a listener of its own, without one.'
          : 'The metrics of this process in the Prometheus text format; the README lists them.',
        ...guarded(authenticated),
        responses: {
          200: { description: 'The metrics.', headers: REQUEST_ID_HEADER, content: { 'text/plain': { schema: { type: 'string' } } } },
          ...problemResponses(metricsErrors, '/metrics'),
        },
      },
    };
  }
  paths['/openapi.json'] = {
    get: {
      operationId: 'openapi',
      tags: ['documentation'],
      summary: 'This document',
      description: 'This OpenAPI 3.1 document, naming the stores and instances its reader may use.',
      ...guarded(protectDocs),
      responses: {
        200: { description: 'OpenAPI 3.1.', headers: REQUEST_ID_HEADER, content: { 'application/json': { schema: { type: 'object' } } } },
        ...problemResponses([...docsErrors, ...SHED_ERRORS], '/openapi.json'),
      },
    },
  };
  paths['/docs'] = {
    get: {
      operationId: 'explorer',
      tags: ['documentation'],
      summary: 'The interactive API explorer',
      description: 'Swagger UI on this document, served with its assets by the service itself.',
      ...guarded(protectDocs),
      responses: {
        200: { description: 'The explorer page (Swagger UI).', headers: REQUEST_ID_HEADER, content: { 'text/html': { schema: { type: 'string' } } } },
        ...problemResponses([...docsErrors, ...SHED_ERRORS], '/docs'),
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
        200: { description: 'The problem type.', headers: REQUEST_ID_HEADER, content: { 'application/json': { schema: ref('schemas', 'ProblemType') } } },
        ...problemResponses(['ROUTE_NOT_FOUND'], '/problems/table-missing'),
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
    // Relative: resolved against where this document was fetched from, so clients and the explorer
    // call the service that served it, whatever name or port reached it. The service answers at the
    // root of its host (the document is /openapi.json).
    servers: [{ url: '/', description: 'The service that serves this document.' }],
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
      parameters: pathParameters(options.stores, authenticated),
      headers: {
        'X-Request-Id': {
          description: "The request's id: the caller's X-Request-Id when given (printable ASCII, up to 128), else a new UUID.",
          schema: { type: 'string' },
        },
        'Retry-After': { description: 'Seconds to wait before retrying.', schema: { type: 'integer' } },
        Allow: { description: 'The methods the path has, e.g. `GET, HEAD`.', schema: { type: 'string' } },
        // Only 401 answers carry it, and only with authentication on.
        ...(authenticated
          ? {
              'WWW-Authenticate': {
                description: `How to authenticate (RFC 6750): \`Bearer realm="${REALM}"\`, with \`error="invalid_token"\` when the credential sent was not accepted or \`error="invalid_request"\` when it was sent the wrong way.`,
                schema: { type: 'string' },
              },
            }
          : {}),
      },
      ...(authenticated ? { securitySchemes: securitySchemes(modes) } : {}),
    },
  };
}

/**
 * documentedStores is what the OpenAPI document may name to a reader: every served store and
 * instance when every caller may use them all (no authentication), else those the reader's grants
 * cover (none without a credential), so the document never tells anyone more than they may use.
 */
export function documentedStores(served: ServedStores, authenticated: boolean, caller: Caller | undefined): DocumentedStore[] {
  const visible = !authenticated
    ? served.all.map((store) => ({ name: store.name, instances: [...store.instances] }))
    : caller === undefined
      ? []
      : usableStores(caller, served).map((store) => ({ name: store.name, instances: store.instances.map((instance) => instance.name) }));
  return visible.map((store) => ({ ...store, default: store.name === served.default.name }));
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
/** The path parameters the operations name, described with what the reader may use. */
function pathParameters(stores: readonly DocumentedStore[], authenticated: boolean): JsonObject {
  const list = (names: readonly string[]) => names.map((name) => `\`${name}\``).join(', ');
  const visible = stores.find((store) => store.default) ?? stores[0];
  const defaultInstances = stores.find((store) => store.default)?.instances ?? [];
  // With authentication on, the document names only what its reader may use.
  const among = (what: string, names: string) =>
    !authenticated
      ? `A served ${what}: ${names}.`
      : names === ''
        ? `A ${what} this service serves. This document names only those its reader may use, and so none to a reader without a credential: ask the operators which you may use.`
        : `A ${what} this service serves. Of them, you may use: ${names}.`;
  // No example names what the reader may not use.
  const path = (name: string, description: string, schema: JsonObject, example: string | undefined) => ({
    name,
    in: 'path',
    required: true,
    description,
    schema,
    ...(example === undefined ? {} : { example }),
  });
  return {
    instanceID: path('instanceID', among('instance', list(defaultInstances)), { type: 'string' }, defaultInstances[0]),
    store: path('store', `${among('store', list(stores.map((store) => store.name)))} GET /v2/stores lists them.`, { type: 'string' }, visible?.name),
    instance: path(
      'instance',
      among('instance of the store', stores.map((store) => `${store.name}: ${list(store.instances)}`).join('; ')),
      { type: 'string' },
      visible?.instances[0],
    ),
    table: path('table', 'The table.', toJsonSchema(schemas.tableName), 'orders'),
    key: path(
      'key',
      'The row key: percent-encoded UTF-8 (a `:` as `%3A`), or base64url of the key\'s bytes with `encoding=base64`, as the keys `.` and `..` must be: URL parsers remove them from paths.',
      { type: 'string', minLength: 1 },
      'order#1001',
    ),
  };
}

/** The store and instance the examples name: the default store if the reader may use it, else the first. */
function exampleNames(stores: readonly DocumentedStore[]): ExampleNames {
  const store = stores.find((candidate) => candidate.default) ?? stores[0];
  return { store: store?.name ?? 'my-store', instance: store?.instances[0] ?? 'my-instance' };
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
      '`application/problem+json` document with a stable `code` and the `requestId`, which every answer, success or failure, ' +
      'also carries in the `X-Request-Id` header. Each operation lists the codes it can answer, with an example of each. All codes: ' +
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
