/**
 * The JSON Schema (OpenAPI 3.1) form of the joi schemas, as the OpenAPI document gives it. It is
 * joi-to-json's, with three things said so that generated clients and validators read them:
 * `.xor()` members as a union of closed alternatives, forbidden members as `false`, and base64
 * bytes as `contentEncoding`.
 */
import type Joi from 'joi';
import joiToJson from 'joi-to-json';

export type JsonObject = Record<string, unknown>;

/** A dependency between the keys of an object, as joi describes it. */
interface Dependency {
  readonly peers: readonly string[];
}

interface ParserOptions {
  readonly logicalOpParser: Readonly<Record<string, (schema: JsonObject, dependency: Dependency) => void>>;
}

// joi-to-json is CommonJS (module.exports = parse) and its types say otherwise; it takes a schema instance.
const parse = joiToJson as unknown as (schema: Joi.Schema, mode: 'open-api-3.1', definitions: JsonObject, options: ParserOptions) => JsonObject;

/** The meta entry of a byte string that is base64 when its object's `encoding` is "base64". */
const BASE64_WITH_ENCODING = 'x-kvcrud-base64-with-encoding';

/**
 * Marks a byte string member of an object that is base64 when that object's `encoding` member is
 * "base64": the document then says `contentEncoding: base64` of it in that case.
 */
export function base64WithEncoding<T extends Joi.Schema>(schema: T): T {
  // meta() returns the schema's own type, which joi's typings do not say.
  return schema.meta({ [BASE64_WITH_ENCODING]: true }) as T;
}

/** The JSON Schema of a joi schema, as the document gives it. */
export function toJsonSchema(schema: Joi.Schema): JsonObject {
  const json = parse(schema, 'open-api-3.1', {}, { logicalOpParser: { xor: exactlyOne } });
  sayForbidden(json);
  sayContentEncoding(json);
  return json;
}

/**
 * `.xor(a, b, …)`: exactly one of the peers. joi-to-json says it with `if / then: false / else`,
 * which client generators read as one object with every peer optional, so `{}` and `{a, b}` type-
 * check. Said instead as `oneOf` alternatives, each requiring its peer and forbidding the others
 * (`false`, which generators type as `never`): a real union. On an object whose members are known
 * (one dependency), each alternative has the shared members and that peer, closed as the object
 * is; otherwise (joi-to-json then passes an empty schema) only the peers are said.
 */
function exactlyOne(schema: JsonObject, dependency: Dependency): void {
  const { peers } = dependency;
  const properties = schema['properties'] as Record<string, unknown> | undefined;
  const required = (schema['required'] as string[] | undefined) ?? [];
  const others = (peer: string) => Object.fromEntries(peers.filter((other) => other !== peer).map((other) => [other, false]));
  if (properties === undefined) {
    schema['oneOf'] = peers.map((peer) => ({ required: [peer], properties: others(peer) }));
    return;
  }
  const shared = Object.fromEntries(Object.entries(properties).filter(([key]) => !peers.includes(key)));
  const closure: JsonObject = {};
  for (const keyword of ['additionalProperties', 'patternProperties'] as const) {
    if (schema[keyword] !== undefined) closure[keyword] = schema[keyword];
    delete schema[keyword];
  }
  schema['oneOf'] = peers.map((peer) => ({
    type: 'object',
    title: peer,
    properties: { ...shared, ...(properties[peer] === undefined ? {} : { [peer]: properties[peer] }), ...others(peer) },
    required: [...required.filter((key) => !peers.includes(key)), peer],
    ...closure,
  }));
  delete schema['properties'];
  delete schema['required'];
}

/**
 * A member joi forbids (`Joi.forbidden()`): joi-to-json says `not: {}`, which client generators
 * type as `unknown`, so that the member may be given. Said instead as `false`, which they type as
 * `never`: an object with it is not of that alternative.
 */
function sayForbidden(json: unknown): void {
  if (Array.isArray(json)) {
    for (const item of json) sayForbidden(item);
    return;
  }
  if (typeof json !== 'object' || json === null) return;
  const node = json as JsonObject;
  const properties = (node['properties'] ?? {}) as Record<string, unknown>;
  for (const [name, member] of Object.entries(properties)) if (isForbidden(member)) properties[name] = false;
  for (const value of Object.values(node)) sayForbidden(value);
}

/** Whether `member` is joi-to-json's schema of a forbidden member: `{not: {}}` and nothing else. */
function isForbidden(member: unknown): boolean {
  if (typeof member !== 'object' || member === null || Object.keys(member).length !== 1) return false;
  const not = (member as JsonObject)['not'];
  return typeof not === 'object' && not !== null && Object.keys(not).length === 0;
}

/** Turns the marks of base64WithEncoding into `contentEncoding: base64` when `encoding` is "base64", everywhere in `json`. */
function sayContentEncoding(json: unknown): void {
  if (Array.isArray(json)) {
    for (const item of json) sayContentEncoding(item);
    return;
  }
  if (typeof json !== 'object' || json === null) return;
  const node = json as JsonObject;
  const properties = node['properties'] as Record<string, JsonObject | boolean> | undefined;
  // Marks are read before the members are walked, which removes them.
  const marked = Object.entries(properties ?? {}).filter(([, member]) => typeof member === 'object' && member[BASE64_WITH_ENCODING] === true);
  delete node[BASE64_WITH_ENCODING];
  for (const value of Object.values(node)) sayContentEncoding(value);
  if (marked.length === 0 || properties?.['encoding'] === undefined) return;
  const base64: JsonObject = {
    if: { properties: { encoding: { const: 'base64' } }, required: ['encoding'] },
    then: { properties: Object.fromEntries(marked.map(([name]) => [name, { contentEncoding: 'base64' }])) },
  };
  if (node['if'] === undefined) Object.assign(node, base64);
  else node['allOf'] = [...((node['allOf'] as unknown[] | undefined) ?? []), base64];
}
