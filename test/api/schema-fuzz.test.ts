/**
 * Requests made from the OpenAPI document itself, as a schema-driven fuzzer makes them: for each
 * operation in turn, path and query parameters and a body generated from their schemas
 * (json-schema-faker, seeded), mostly aimed at a table that exists so that the success paths are
 * reached as well as the refusals. Every answer must have a status the document gives the
 * operation and a body its schema for that status takes (the ApiClient's contract check, ajv),
 * and none may be a 5xx.
 */
import { expect } from 'chai';
import { generateSync, type JsonSchema } from 'json-schema-faker';
import type { ApiClient } from '../support/api-client.ts';
import { useTestApp } from '../support/test-app.ts';

type Json = Record<string, unknown>;

const SEED = 20_261_201;
const REQUESTS = 400;
/** How often the fuzzed operations get a table to work on again (they may delete it). */
const RESTORE_EVERY = 20;
const TABLE = 'orders';
const KEY = 'order#1001';

/** mulberry32: a small seeded generator, so that a failure replays. */
function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

/** `schema` with every document-relative $ref replaced by what it points to. */
function inlined(schema: unknown, document: Json): unknown {
  if (Array.isArray(schema)) return schema.map((item) => inlined(item, document));
  if (typeof schema !== 'object' || schema === null) return schema;
  const reference = (schema as Json)['$ref'];
  if (typeof reference === 'string' && reference.startsWith('#/')) {
    const target = reference
      .slice(2)
      .split('/')
      .reduce<unknown>((node, token) => (node as Json)[token.replaceAll('~1', '/').replaceAll('~0', '~')], document);
    return inlined(target, document);
  }
  return Object.fromEntries(Object.entries(schema).map(([key, value]) => [key, inlined(value, document)]));
}

interface Parameter {
  readonly name: string;
  readonly in: string;
  readonly required?: boolean;
  readonly schema: JsonSchema;
}

interface FuzzedOperation {
  readonly method: string;
  readonly path: string;
  readonly parameters: readonly Parameter[];
  readonly body: JsonSchema | undefined;
}

function operationsOf(document: Json): FuzzedOperation[] {
  return Object.entries(document['paths'] as Record<string, Record<string, Json>>).flatMap(([path, item]) =>
    Object.entries(item).map(([method, operation]) => {
      const body = (operation['requestBody'] as { content?: Record<string, { schema: unknown }> } | undefined)?.content?.['application/json']?.schema;
      return {
        method: method.toUpperCase(),
        path,
        parameters: ((operation['parameters'] ?? []) as unknown[]).map((parameter) => inlined(parameter, document) as Parameter),
        body: body === undefined ? undefined : (inlined(body, document) as JsonSchema),
      };
    }),
  );
}

describe('requests generated from the OpenAPI document', function () {
  this.timeout(60_000);
  const app = useTestApp();

  /** Makes sure the table the requests aim at exists, with a row. */
  async function restore(api: ApiClient, store: string, instance: string): Promise<void> {
    const tables = `/v2/stores/${store}/instances/${instance}/tables`;
    const created = await api.post(tables, { name: TABLE, families: [{ name: 'cf', maxVersions: 3 }, { name: 'meta' }] });
    expect(created.status).to.be.oneOf([201, 409]);
    const row = await api.request('PUT', `${tables}/${TABLE}/rows/${encodeURIComponent(KEY)}`, { json: { cells: [{ family: 'cf', column: 'status', value: 'new' }] } });
    expect(row.status).to.equal(200);
  }

  it(`answers ${REQUESTS} of them only as the document says, and never with a 5xx`, async () => {
    const { api, storeName: store, instance } = app();
    const operations = operationsOf(api.contract.document);
    const random = seededRandom(SEED);
    // Where a path parameter names something, it is mostly one that exists.
    const known: Readonly<Record<string, string>> = { store, instance, instanceID: instance, table: TABLE, key: KEY, type: 'table-not-found' };
    const statuses = new Map<number, number>();
    const failures: string[] = [];

    for (let index = 0; index < REQUESTS; index += 1) {
      if (index % RESTORE_EVERY === 0) await restore(api, store, instance);
      const operation = operations[index % operations.length];
      if (operation === undefined) throw new Error('the document has no operations');
      const generate = (schema: JsonSchema) => generateSync(schema, { seed: SEED + index, maxItems: 4, maxLength: 24, optionalsProbability: 0.5 });
      let path = operation.path;
      const query = new URLSearchParams();
      for (const parameter of operation.parameters) {
        if (parameter.in === 'path') {
          const realName = known[parameter.name];
          const value = realName !== undefined && random() < 0.8 ? realName : String(generate(parameter.schema));
          path = path.replace(`{${parameter.name}}`, encodeURIComponent(value));
        } else if (parameter.in === 'query' && (parameter.required === true || random() < 0.4)) {
          const value = generate(parameter.schema);
          // Arrays are comma-separated (style form, explode false).
          query.set(parameter.name, Array.isArray(value) ? value.map(String).join(',') : String(value));
        }
      }
      const target = query.size === 0 ? path : `${path}?${query.toString()}`;
      const json = operation.body === undefined ? undefined : generate(operation.body);
      const request = `${operation.method} ${target}${json === undefined ? '' : ` ${JSON.stringify(json).slice(0, 300)}`}`;
      try {
        const response = await api.request(operation.method, target, json === undefined ? {} : { json });
        statuses.set(response.status, (statuses.get(response.status) ?? 0) + 1);
        if (response.status >= 500) failures.push(`${request} -> ${response.status} ${JSON.stringify(response.body)}`);
      } catch (error) {
        failures.push(`${request}: ${(error as Error).message.slice(0, 600)}`);
      }
    }

    expect(failures, failures.join('\n\n')).to.deep.equal([]);
    // Both the success paths and the refusals were reached.
    const count = (test: (status: number) => boolean) => [...statuses].filter(([status]) => test(status)).reduce((sum, [, n]) => sum + n, 0);
    expect(count((status) => status < 300), JSON.stringify([...statuses])).to.be.greaterThan(REQUESTS / 10);
    expect(count((status) => status >= 400), JSON.stringify([...statuses])).to.be.greaterThan(REQUESTS / 10);
  });
});
