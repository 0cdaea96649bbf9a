import { createHash } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import { expect } from 'chai';
import fc from 'fast-check';
import type { HarnessFactory } from '../support/stores.ts';
import { type TestApp, useTestApp } from '../support/test-app.ts';

/** One HTTP request, as bytes: what a hostile or broken client may send. */
interface RawRequest {
  readonly method: string;
  readonly path: string;
  readonly headers?: Record<string, string>;
  readonly body?: string;
}

const MAX_BODY_BYTES = 64 * 1024;
const SEED = { table: 'seed', row: 'r' };

// Valid bodies aimed at the seed table: a mutation that failed to make one invalid would change
// the store (delete the table, write the row), and the snapshot check would catch it.
const VALID_BODIES = {
  createTable: { tableName: 'fresh', columnFamily: 'cf' },
  insertData: { tableName: SEED.table, rowKeyId: SEED.row, data: [{ columnFamily: 'cf', columnName: 'c', columnValue: 'changed' }] },
  deleteTable: { tableList: [SEED.table] },
} as const;
type BodyOperation = keyof typeof VALID_BODIES;
const METHODS: Record<BodyOperation, string> = { createTable: 'POST', insertData: 'POST', deleteTable: 'DELETE' };
const bodyOperation = fc.constantFrom<BodyOperation>('createTable', 'insertData', 'deleteTable');

/** The string-valued fields of each body, as paths into it. */
const STRING_FIELDS: Record<BodyOperation, ReadonlyArray<readonly (string | number)[]>> = {
  createTable: [['tableName'], ['columnFamily']],
  insertData: [['tableName'], ['rowKeyId'], ['data', 0, 'columnFamily'], ['data', 0, 'columnName'], ['data', 0, 'columnValue']],
  deleteTable: [['tableList', 0]],
};
/** Fields that are names (tables, families): NUL or a slash can never be part of them. */
const NAME_FIELDS: Record<BodyOperation, ReadonlyArray<readonly (string | number)[]>> = {
  createTable: [['tableName'], ['columnFamily']],
  insertData: [['tableName'], ['data', 0, 'columnFamily']],
  deleteTable: [['tableList', 0]],
};

function withField(body: unknown, path: readonly (string | number)[], value: unknown): unknown {
  const copy = structuredClone(body) as Record<string | number, unknown>;
  let node = copy;
  for (const key of path.slice(0, -1)) node = node[key] as Record<string | number, unknown>;
  node[path.at(-1) as string | number] = value;
  return copy;
}

function jsonRequest(operation: BodyOperation, instance: string, body: string, contentType = 'application/json'): RawRequest {
  return { method: METHODS[operation], path: `/v1/${instance}/${operation}`, headers: { 'content-type': contentType }, body };
}

/** Each kind of hostile input the issue lists, as an arbitrary of requests that must all be refused. */
function hostileRequests(instance: string): Record<string, fc.Arbitrary<RawRequest>> {
  const notAString = fc.oneof(fc.integer(), fc.double(), fc.boolean(), fc.constant(null), fc.array(fc.anything(), { maxLength: 3 }), fc.object());
  return {
    'truncated JSON': bodyOperation.chain((operation) => {
      const text = JSON.stringify(VALID_BODIES[operation]);
      return fc.integer({ min: 1, max: text.length - 1 }).map((cut) => jsonRequest(operation, instance, text.slice(0, cut)));
    }),
    'malformed JSON': fc
      .tuple(bodyOperation, fc.constantFrom('{', '}', ',', '"', "'", 'x', 'NaN', '//', '\\'), fc.string({ maxLength: 20 }))
      // Anything but whitespace after a complete value makes the text invalid JSON.
      .map(([operation, glitch, tail]) => jsonRequest(operation, instance, `${JSON.stringify(VALID_BODIES[operation])}${glitch}${tail}`)),
    'wrong types': bodyOperation.chain((operation) =>
      fc
        .tuple(fc.constantFrom(...STRING_FIELDS[operation]), notAString)
        .map(([path, value]) => jsonRequest(operation, instance, JSON.stringify(withField(VALID_BODIES[operation], path, value)))),
    ),
    'wrong container types': bodyOperation.chain((operation) =>
      fc
        .tuple(fc.constantFrom(...Object.keys(VALID_BODIES[operation])), fc.oneof(fc.string(), fc.integer(), fc.constant(null), fc.object()))
        .filter(([key, value]) => (key === 'data' || key === 'tableList' ? !Array.isArray(value) : typeof value !== 'string'))
        .map(([key, value]) => jsonRequest(operation, instance, JSON.stringify({ ...VALID_BODIES[operation], [key]: value }))),
    ),
    'top level not an object': fc
      .tuple(bodyOperation, fc.oneof(fc.array(fc.anything(), { maxLength: 3 }), fc.string(), fc.integer(), fc.constant(null)))
      .map(([operation, value]) => jsonRequest(operation, instance, JSON.stringify(value))),
    'huge strings': bodyOperation.chain((operation) =>
      fc
        .tuple(fc.constantFrom(...STRING_FIELDS[operation]), fc.integer({ min: 16 * 1024 + 1, max: 40_000 }))
        // Over every field's limit except a column value's: that one is sent over the body limit instead.
        .map(([path, length]) => {
          const huge = path.at(-1) === 'columnValue' ? 'v'.repeat(MAX_BODY_BYTES + length) : 'n'.repeat(length);
          return jsonRequest(operation, instance, JSON.stringify(withField(VALID_BODIES[operation], path, huge)));
        }),
    ),
    'deeply nested values': fc
      .tuple(bodyOperation, fc.integer({ min: 100, max: 20_000 }), fc.constantFrom('[]', '{"a":}'))
      .map(([operation, depth, shape]) => {
        const [open, close] = shape === '[]' ? ['[', ']'] : ['{"a":', '}'];
        const nested = `${open.repeat(depth)}1${close.repeat(depth)}`;
        const text = JSON.stringify(VALID_BODIES[operation]).replace(/:("[^"]*"|\[[^\]]*\])/, `:${nested}`);
        return jsonRequest(operation, instance, text);
      }),
    '__proto__ and constructor keys': fc
      .tuple(bodyOperation, fc.constantFrom('__proto__', 'constructor', 'prototype', 'hasOwnProperty'), fc.boolean(), fc.anything())
      .map(([operation, key, nested, value]) => {
        const text = JSON.stringify(VALID_BODIES[operation]);
        const member = `${JSON.stringify(key)}:${JSON.stringify(value ?? null) ?? 'null'},`;
        if (nested && operation === 'insertData') return jsonRequest(operation, instance, text.replace('[{', `[{${member}`));
        return jsonRequest(operation, instance, `{${member}${text.slice(1)}`);
      }),
    'NUL in names': bodyOperation.chain((operation) =>
      fc
        .tuple(fc.constantFrom(...NAME_FIELDS[operation]), fc.nat({ max: 4 }))
        .map(([path, at]) => {
          const name = 'name'.slice(0, at) + '\u0000' + 'name'.slice(at);
          return jsonRequest(operation, instance, JSON.stringify(withField(VALID_BODIES[operation], path, name)));
        }),
    ),
    'lone surrogates': bodyOperation.chain((operation) =>
      fc
        .tuple(fc.constantFrom(...STRING_FIELDS[operation]), fc.integer({ min: 0xd800, max: 0xdfff }), fc.string({ maxLength: 5 }))
        .map(([path, code, rest]) =>
          // JSON.stringify writes a lone surrogate as a \udxxx escape: valid JSON text, invalid Unicode.
          jsonRequest(operation, instance, JSON.stringify(withField(VALID_BODIES[operation], path, `${rest}${String.fromCharCode(code)}`))),
        ),
    ),
    'path-shaped table names': fc
      .tuple(
        fc.array(fc.constantFrom('..', '.', 'etc', 'seed', '%2F', '~', ''), { minLength: 1, maxLength: 5 }),
        fc.constantFrom('body', 'query', 'instance'),
        bodyOperation,
      )
      .map(([segments, where, operation]) => {
        const name = `${segments[0] === 'seed' ? '/' : ''}${segments.join('/')}`.replace(/^(?![./%~])/, '../');
        if (where === 'query') {
          return { method: 'GET', path: `/v1/${instance}/readCellData?tableName=${encodeURIComponent(name)}&id=${SEED.row}` };
        }
        if (where === 'instance') {
          return jsonRequest(operation, encodeURIComponent(name), JSON.stringify(VALID_BODIES[operation]));
        }
        return jsonRequest(operation, instance, JSON.stringify(withField(VALID_BODIES[operation], NAME_FIELDS[operation][0] ?? [], name)));
      }),
    'repeated and unknown query parameters': fc
      .tuple(fc.constantFrom('tableName', 'id', 'other'), fc.string({ maxLength: 10 }))
      .map(([parameter, value]) => ({
        method: 'GET',
        path: `/v1/${instance}/readCellData?tableName=${SEED.table}&id=${SEED.row}&${parameter}=${encodeURIComponent(value)}`,
      })),
    'query bytes that are not UTF-8': fc
      .constantFrom('%FF', '%ED%A0%80', '%C0%AF', '%E2%82', '%F4%90%80%80')
      .map((bytes) => ({ method: 'GET', path: `/v1/${instance}/readCellData?tableName=${SEED.table}&id=r${bytes}` })),
    'wrong content types': fc
      .tuple(
        bodyOperation,
        fc.constantFrom(
          'text/plain',
          'application/x-www-form-urlencoded',
          'multipart/form-data; boundary=x',
          'application/xml',
          'application/octet-stream',
          'application/json; charset=latin1',
          'application/json; charset=utf-16',
        ),
      )
      .map(([operation, type]) => jsonRequest(operation, instance, JSON.stringify(VALID_BODIES[operation]), type)),
  };
}

/** What the store holds that a rejected request could change: the table list and the seed row. */
async function snapshot(app: TestApp): Promise<string> {
  const options = { deadline: Date.now() + 5000 };
  const tables = (await app.store.listTables(app.instance, options)).sort();
  const [row] = await app.store.readRows({ instance: app.instance, table: SEED.table }, [Buffer.from(SEED.row)], { versions: 1000 }, options);
  const cells = JSON.stringify(row?.cells.map((cell) => [cell.family, cell.column.toString('hex'), cell.value.toString('hex'), String(cell.timestampMicros)]));
  // A digest of the row, so that a failure prints two short lines rather than megabytes.
  return JSON.stringify({ tables, row: createHash('sha256').update(cells).digest('hex').slice(0, 16) });
}

/**
 * Hostile input over every endpoint with a body or a query (fast-check): every answer is a 4xx
 * problem document the OpenAPI document describes, never a 5xx or a crash, and the store is the
 * same afterwards. `runs` is per kind of input.
 */
export function hostileInputCases(store: HarnessFactory, options: { runs: number }): void {
  describe('hostile input', () => {
    const app = useTestApp({ store, maxBodyBytes: MAX_BODY_BYTES });
    let original: string;

    before(async () => {
      const api = app().api;
      expect((await api.post(`/v1/${app().instance}/createTable`, { tableName: SEED.table, columnFamily: 'cf' })).status).to.equal(201);
      const write = await api.post(`/v1/${app().instance}/insertData`, {
        tableName: SEED.table,
        rowKeyId: SEED.row,
        data: [{ columnFamily: 'cf', columnName: 'c', columnValue: 'original' }],
      });
      expect(write.status).to.equal(200);
      original = await snapshot(app());
    });

    const send = (request: RawRequest) =>
      app().api.request(request.method, request.path, {
        headers: request.headers ?? {},
        ...(request.body === undefined ? {} : { body: Buffer.from(request.body, 'utf8') }),
      });

    for (const kind of Object.keys(hostileRequests('x'))) {
      it(`refuses ${kind} with a 4xx problem and leaves the store unchanged`, async function () {
        this.timeout(120_000);
        const arbitrary = hostileRequests(app().instance)[kind] as fc.Arbitrary<RawRequest>;
        await fc.assert(
          fc.asyncProperty(arbitrary, async (request) => {
            const response = await send(request); // checked against the OpenAPI document
            expect(response.status, `${request.method} ${request.path}`).to.be.within(400, 499);
            expect(response.headers.get('content-type')).to.equal('application/problem+json');
            expect(await snapshot(app())).to.equal(original);
          }),
          { numRuns: options.runs },
        );
      });
    }

    it('refuses a chunked body over the limit with 413, without reading it all', async () => {
      const { hostname, port } = new URL(app().baseUrl);
      const status = await new Promise<number>((resolve, reject) => {
        const request = httpRequest(
          { host: hostname, port, method: 'POST', path: `/v1/${app().instance}/insertData`, headers: { 'content-type': 'application/json' } },
          (response) => {
            response.resume();
            resolve(response.statusCode ?? 0);
          },
        );
        request.on('error', reject);
        // No Content-Length: Node sends Transfer-Encoding: chunked. Far more than the limit, in 8 KiB chunks.
        request.write(`{"tableName":"${SEED.table}","rowKeyId":"${SEED.row}","data":[{"columnFamily":"cf","columnName":"c","columnValue":"`);
        let sent = 0;
        const pump = () => {
          while (sent < 16 * MAX_BODY_BYTES && !request.destroyed) {
            sent += 8192;
            if (!request.write('v'.repeat(8192))) {
              request.once('drain', pump);
              return;
            }
          }
          request.end('"}]}');
        };
        pump();
      });
      expect(status).to.equal(413);
      expect(await snapshot(app())).to.equal(original);
    });
  });
}
