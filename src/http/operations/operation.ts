import Joi from 'joi';
import type { Caller, Role } from '../../auth/access.ts';
import type { AnswerHold } from '../../service/answer-budget.ts';
import type { FeedService } from '../../service/change-feeds.ts';
import type { ErrorCode } from '../../service/errors.ts';
import type { RowService } from '../../service/rows.ts';
import type { StoreDirectory } from '../../service/stores.ts';
import type { TableService } from '../../service/tables.ts';
import { validateParts } from '../validation/validate.ts';

/** The validated parts of a request, typed by the operation's schemas. */
export interface OperationInput<Params, Query, Body> {
  readonly params: Params;
  readonly query: Query;
  readonly body: Body;
}

/** The parts of a request before validation: path parameters, parsed query, parsed JSON body. */
export interface RawInput {
  readonly params: Readonly<Record<string, string>>;
  readonly query: Readonly<Record<string, string | string[]>>;
  readonly body: unknown;
}

/** The services operations call: the same for every request. */
export interface Services {
  readonly stores: StoreDirectory;
  readonly tables: TableService;
  readonly rows: RowService;
  /** How many versions a family created through v1 keeps, or 0 for every version (V1_MAX_VERSIONS). */
  readonly v1MaxVersions: number;
  readonly feeds: FeedService;
}

/** What an operation may know of the request besides its input. */
export interface RequestContext {
  readonly services: Services;
  /** Aborted when the caller has gone. */
  readonly signal: AbortSignal;
  /** The authenticated caller (every caller is an admin with authentication off). */
  readonly caller: Caller | undefined;
  /** The request's share of the answer budget, when its operation's answer holds rows (`holdsRows`). */
  readonly answer?: AnswerHold | undefined;
  /** A request header, or '' when absent. */
  readonly header: (name: string) => string;
  /** Who the caller is for the bounds per caller (principal, or client address when anonymous). */
  readonly callerKey: string;
}

/** The names the document's examples use, so that the explorer's pre-filled requests reach what the service serves. */
export interface ExampleNames {
  /** The default store. */
  readonly store: string;
  /** Its first instance. */
  readonly instance: string;
}

/**
 * One endpoint, described once: the router serves it (register.ts) and the OpenAPI document
 * describes it (openapi-operations.ts) from the same description, so the two cannot disagree.
 */
export interface OperationSpec<Params, Query, Body> {
  readonly operationId: string;
  /** The OpenAPI tag, which is also the explorer's group. */
  readonly tag: 'v1' | 'v2';
  readonly method: 'get' | 'post' | 'put' | 'delete';
  /** OpenAPI path template. */
  readonly path: string;
  readonly summary: string;
  readonly description: string;
  /** The least role a caller needs on the instance (admin includes writer includes reader). */
  readonly role: Role;
  /** The path parameters, in order, by their names in the document's components.parameters. */
  readonly pathParameters: readonly string[];
  /** Schema of the path parameters; absent when the guards check them all. */
  readonly params?: Joi.ObjectSchema<Params>;
  /** Schema of the query parameters; absent: the query is not read. */
  readonly query?: Joi.ObjectSchema<Query>;
  /** Schema of the JSON body; absent: the body is not read. Validated, as the path is, with the valid query as context `query`. */
  readonly body?: Joi.ObjectSchema<Body>;
  /** The request body the explorer pre-fills: it must succeed as is, in the natural order of the operations. */
  readonly bodyExample?: (names: ExampleNames) => unknown;
  /** The answer; without `schema`, an empty body (204). `example` is what the body example gets. */
  readonly success: {
    readonly status: number;
    readonly description: string;
    readonly schema?: Joi.ObjectSchema;
    readonly example?: (names: ExampleNames) => unknown;
    /** The answer is also served as `text/event-stream` (for `Accept: text/event-stream`): what its events are. */
    readonly eventStream?: string;
  };
  /**
   * Whether the answer holds rows that count against the service's answer budget
   * (answer-budget.ts): the request then gets a hold on it (`RequestContext.answer`), which the
   * service takes the rows from. Absent: the answer is not counted.
   */
  readonly holdsRows?: true;
  /** Error codes particular to this operation; those every operation of its API may answer are added. */
  readonly errors: readonly ErrorCode[];
  /** Runs the operation on valid input; resolves to the response body (undefined for none). */
  readonly handle: (input: OperationInput<Params, Query, Body>, request: RequestContext) => Promise<unknown>;
}

/** An operation of any input types, as the router and the document builder see it. */
export interface Operation extends Omit<OperationSpec<unknown, unknown, unknown>, 'handle' | 'params' | 'query' | 'body'> {
  readonly params?: Joi.ObjectSchema;
  readonly query?: Joi.ObjectSchema;
  readonly body?: Joi.ObjectSchema;
  /** Validates the raw input (all problems of all parts in one 400) and runs the operation. */
  readonly run: (raw: RawInput, request: RequestContext) => Promise<unknown>;
}

/**
 * defineOperation keeps an operation's input typed where it is written, and gives the router and
 * the document builder one shape for every operation.
 */
export function defineOperation<Params = undefined, Query = undefined, Body = undefined>(spec: OperationSpec<Params, Query, Body>): Operation {
  const { handle, ...description } = spec;
  return {
    ...description,
    run: async (raw, request) => handle(await validateInput(spec, raw), request),
  };
}

async function validateInput<Params, Query, Body>(spec: OperationSpec<Params, Query, Body>, raw: RawInput): Promise<OperationInput<Params, Query, Body>> {
  // Parts without a schema are not looked at. The query comes first: the path and the body are
  // read in its light (its encoding), so only once it is valid.
  const [query] = (await validateParts([{ schema: spec.query ?? NOTHING, value: spec.query === undefined ? {} : raw.query }])) as [Query];
  const context = { query };
  const [params, body] = (await validateParts([
    { schema: spec.params ?? NOTHING, value: spec.params === undefined ? {} : raw.params, context },
    ...(spec.body === undefined ? [] : [{ schema: spec.body, value: raw.body, context }]),
  ])) as [Params, Body];
  return { params, query, body };
}

const NOTHING = Joi.object({});

/** Codes any operation with a JSON body may answer with. */
export const BODY_ERRORS: readonly ErrorCode[] = ['MALFORMED_JSON', 'UNSUPPORTED_MEDIA_TYPE', 'PAYLOAD_TOO_LARGE', 'REQUEST_TIMEOUT'];

/** Codes every operation may answer with when callers must authenticate (AUTH_MODE other than none). */
export const AUTH_ERRORS: readonly ErrorCode[] = ['UNAUTHENTICATED', 'PERMISSION_DENIED'];

/** The codes an operation may answer with: its API's common ones, the body ones if it takes a body, then its own. */
export function operationErrors(operation: Pick<Operation, 'body' | 'errors'>, common: readonly ErrorCode[]): ErrorCode[] {
  return [...new Set([...common, ...(operation.body ? BODY_ERRORS : []), ...operation.errors])];
}
