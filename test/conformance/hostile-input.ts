import { createHash } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { brotliCompressSync, deflateSync, gzipSync } from 'node:zlib';
import { expect } from 'chai';
import fc from 'fast-check';
import { type KeyEntry, keysFile, newApiKey, tempDirectory } from '../support/access-files.ts';
import { type RawRequest, type RawResponse, sendRaw } from '../support/raw-http.ts';
import type { DriverHarnessFactory } from '../support/driver-harness.ts';
import { type TestApp, useTestApp } from '../support/test-app.ts';

/** The bounds every answer to hostile input must keep. */
export const HOSTILE_BOUNDS = {
  /** A problem document stays small whatever was sent. */
  maxProblemBytes: 64 * 1024,
  /** The answer itself arrives within this time (generous: the machine may be busy). */
  maxAnswerMs: 5000,
  /** /healthz, asked while the hostile request is handled, answers within this time. */
  maxHealthzMs: 200,
} as const;

const MAX_BODY_BYTES = 64 * 1024;
const SEED = { table: 'seed', row: 'r' } as const;

type FieldPath = ReadonlyArray<string | number>;

/**
 * One endpoint as the hostile-input properties see it. Each kind of hostile input is generated
 * for every endpoint it applies to, so a new endpoint (v2's, say) is covered by adding an entry
 * to HOSTILE_ENDPOINTS. Valid inputs aim at the seed (table `seed`, row `r`): a mutation that
 * slipped through would change it, and the snapshot check would catch that.
 */
export interface HostileEndpoint {
  readonly name: string;
  readonly method: string;
  /** The path, without a query, for an instance of a store (as it goes on the wire: percent-encode yourself). */
  readonly path: (instance: string, store: string) => string;
  /** A valid JSON body, for an endpoint that takes one. */
  readonly body?: Readonly<Record<string, unknown>>;
  /** Valid query parameters, for an endpoint that takes them. */
  readonly query?: Readonly<Record<string, string>>;
  /** Where the body has strings (paths into it). */
  readonly stringFields?: readonly FieldPath[];
  /** Where the body has names (tables, families), of which NUL or a slash can never be part. */
  readonly nameFields?: readonly FieldPath[];
  /**
   * A batch answered entry by entry (v2 batchWrite): an entry beyond what the store takes (a
   * family it lacks, a key too long) fails on its own, so a request whose every entry failed, with
   * 200, is refused too.
   */
  readonly answersPerEntry?: boolean;
  /** Where the body has arrays, and an invalid item for each (for many invalid items). */
  readonly arrayFields?: ReadonlyArray<{ readonly path: FieldPath; readonly invalidItems: readonly unknown[] }>;
}

const INVALID_CELLS: readonly unknown[] = [1, 'x', null, [], {}, { columnFamily: '!' }, { columnFamily: 'cf', columnName: 5, columnValue: 'v' }, { extra: true }];

export const HOSTILE_ENDPOINTS: readonly HostileEndpoint[] = [
  {
    name: 'v1 createTable',
    method: 'POST',
    path: (instance) => `/v1/${instance}/createTable`,
    body: { tableName: 'fresh', columnFamily: 'cf' },
    stringFields: [['tableName'], ['columnFamily']],
    nameFields: [['tableName'], ['columnFamily']],
  },
  {
    name: 'v1 insertData',
    method: 'POST',
    path: (instance) => `/v1/${instance}/insertData`,
    body: { tableName: SEED.table, rowKeyId: SEED.row, data: [{ columnFamily: 'cf', columnName: 'c', columnValue: 'changed' }] },
    stringFields: [['tableName'], ['rowKeyId'], ['data', 0, 'columnFamily'], ['data', 0, 'columnName'], ['data', 0, 'columnValue']],
    nameFields: [['tableName'], ['data', 0, 'columnFamily']],
    arrayFields: [{ path: ['data'], invalidItems: INVALID_CELLS }],
  },
  {
    name: 'v1 deleteTable',
    method: 'DELETE',
    path: (instance) => `/v1/${instance}/deleteTable`,
    body: { tableList: [SEED.table] },
    stringFields: [['tableList', 0]],
    nameFields: [['tableList', 0]],
    arrayFields: [{ path: ['tableList'], invalidItems: [1, null, '', '-', {}, [], 'x'.repeat(60)] }],
  },
  {
    name: 'v1 readCellData',
    method: 'GET',
    path: (instance) => `/v1/${instance}/readCellData`,
    query: { tableName: SEED.table, id: SEED.row },
  },
  {
    name: 'v2 tables.create',
    method: 'POST',
    path: (instance, store) => `/v2/stores/${store}/instances/${instance}/tables`,
    body: { name: 'fresh', families: [{ name: 'cf', maxVersions: 2 }] },
    stringFields: [['name'], ['families', 0, 'name']],
    nameFields: [['name'], ['families', 0, 'name']],
    arrayFields: [{ path: ['families'], invalidItems: [1, 'x', null, [], {}, { name: '!' }, { name: 'cf', maxVersions: 0 }, { extra: true }] }],
  },
  {
    name: 'v2 tables.batchDelete',
    method: 'POST',
    path: (instance, store) => `/v2/stores/${store}/instances/${instance}/tables:batchDelete`,
    body: { tables: [SEED.table] },
    stringFields: [['tables', 0]],
    nameFields: [['tables', 0]],
    arrayFields: [{ path: ['tables'], invalidItems: [1, null, '', '-', {}, [], 'x'.repeat(60)] }],
  },
  {
    name: 'v2 rows.write',
    method: 'PUT',
    path: (instance, store) => `/v2/stores/${store}/instances/${instance}/tables/${SEED.table}/rows/${SEED.row}`,
    body: { cells: [{ family: 'cf', column: 'c', value: 'changed' }] },
    stringFields: [['cells', 0, 'family'], ['cells', 0, 'column'], ['cells', 0, 'value']],
    nameFields: [['cells', 0, 'family']],
    arrayFields: [{ path: ['cells'], invalidItems: [1, 'x', null, [], {}, { family: '!' }, { family: 'cf', column: 5, value: 'v' }, { family: 'cf', column: 'c', value: 'v', timestamp: 'now' }] }],
  },
  {
    name: 'v2 rows.mutate',
    method: 'POST',
    path: (instance, store) => `/v2/stores/${store}/instances/${instance}/tables/${SEED.table}/rows/${SEED.row}:mutate`,
    body: { mutations: [{ set: { family: 'cf', column: 'c', value: 'changed' } }] },
    stringFields: [['mutations', 0, 'set', 'family'], ['mutations', 0, 'set', 'column'], ['mutations', 0, 'set', 'value']],
    nameFields: [['mutations', 0, 'set', 'family']],
    arrayFields: [{ path: ['mutations'], invalidItems: [1, 'x', null, [], {}, { deleteRow: {}, deleteFamily: { family: 'cf' } }, { truncate: {} }, { set: { family: 'cf' } }] }],
  },
  {
    name: 'v2 rows.batchWrite',
    method: 'POST',
    answersPerEntry: true,
    path: (instance, store) => `/v2/stores/${store}/instances/${instance}/tables/${SEED.table}/rows:batchWrite`,
    body: { entries: [{ key: SEED.row, mutations: [{ set: { family: 'cf', column: 'c', value: 'changed' } }] }] },
    stringFields: [['entries', 0, 'key'], ['entries', 0, 'mutations', 0, 'set', 'family'], ['entries', 0, 'mutations', 0, 'set', 'column'], ['entries', 0, 'mutations', 0, 'set', 'value']],
    nameFields: [['entries', 0, 'mutations', 0, 'set', 'family']],
    arrayFields: [{ path: ['entries'], invalidItems: [1, 'x', null, [], {}, { key: '' }, { key: 'r', mutations: [] }, { key: 'r', mutations: [{}] }] }],
  },
  {
    name: 'v2 rows.batchGet',
    method: 'POST',
    path: (instance, store) => `/v2/stores/${store}/instances/${instance}/tables/${SEED.table}/rows:batchGet`,
    body: { keys: [SEED.row], columns: ['cf'] },
    stringFields: [['keys', 0], ['columns', 0]],
    nameFields: [['columns', 0]],
    arrayFields: [{ path: ['keys'], invalidItems: [1, null, '', {}, []] }],
  },
  {
    name: 'v2 rows.get',
    method: 'GET',
    path: (instance, store) => `/v2/stores/${store}/instances/${instance}/tables/${SEED.table}/rows/${SEED.row}`,
    query: { versions: '2' },
  },
  {
    name: 'v2 rows.scan',
    method: 'GET',
    path: (instance, store) => `/v2/stores/${store}/instances/${instance}/tables/${SEED.table}/rows`,
    query: { prefix: SEED.row, pageSize: '10' },
  },
  {
    name: 'v2 rows.delete',
    method: 'DELETE',
    path: (instance, store) => `/v2/stores/${store}/instances/${instance}/tables/${SEED.table}/rows/${SEED.row}`,
    query: {},
  },
  // No body and no query parameters of their own: any they are sent is refused.
  { name: 'v2 stores.list', method: 'GET', path: () => '/v2/stores', query: {} },
  { name: 'v2 stores.get', method: 'GET', path: (_instance, store) => `/v2/stores/${store}`, query: {} },
  { name: 'v2 tables.list', method: 'GET', path: (instance, store) => `/v2/stores/${store}/instances/${instance}/tables`, query: {} },
  { name: 'v2 tables.get', method: 'GET', path: (instance, store) => `/v2/stores/${store}/instances/${instance}/tables/${SEED.table}`, query: {} },
  { name: 'v2 tables.delete', method: 'DELETE', path: (instance, store) => `/v2/stores/${store}/instances/${instance}/tables/${SEED.table}`, query: {} },
];

/** A hostile request; `ownCredentials` when it sends its own (otherwise the suite's key is added). */
interface Hostile extends RawRequest {
  readonly ownCredentials?: boolean;
  /** Sent to an endpoint that answers entry by entry (HostileEndpoint.answersPerEntry). */
  readonly perEntry?: boolean;
}

const withBody = HOSTILE_ENDPOINTS.filter((endpoint) => endpoint.body !== undefined);
const withQuery = HOSTILE_ENDPOINTS.filter((endpoint) => endpoint.query !== undefined);
const withArrays = HOSTILE_ENDPOINTS.filter((endpoint) => (endpoint.arrayFields ?? []).length > 0);
const bodyEndpoint = fc.constantFrom(...withBody);
/** Body fields that name tables (v1, and the v2 table operations). */
const TABLE_NAME_FIELDS: ReadonlySet<string> = new Set(['tableName', 'tableList', 'name', 'tables']);
const queryEndpoint = fc.constantFrom(...withQuery);
const JSON_TYPE = ['content-type', 'application/json'] as const;

function withField(body: unknown, path: FieldPath, value: unknown): unknown {
  const copy = structuredClone(body) as Record<string | number, unknown>;
  let node = copy;
  for (const key of path.slice(0, -1)) node = node[key] as Record<string | number, unknown>;
  node[path.at(-1) as string | number] = value;
  return copy;
}

function validBody(endpoint: HostileEndpoint): string {
  return JSON.stringify(endpoint.body);
}

/** The store and instance hostile requests are sent to. */
interface Target {
  readonly instance: string;
  readonly store: string;
}

function jsonRequest(endpoint: HostileEndpoint, target: Target, body: string | Uint8Array, contentType = 'application/json'): Hostile {
  return {
    method: endpoint.method,
    path: endpoint.path(target.instance, target.store),
    ...(endpoint.answersPerEntry === true ? { perEntry: true } : {}),
    headers: [['content-type', contentType]],
    body: typeof body === 'string' ? Buffer.from(body, 'utf8') : body,
  };
}

function queryRequest(endpoint: HostileEndpoint, target: Target, query: string): Hostile {
  return { method: endpoint.method, path: `${endpoint.path(target.instance, target.store)}?${query}` };
}

function validQuery(endpoint: HostileEndpoint): string {
  return Object.entries(endpoint.query ?? {})
    .map(([name, value]) => `${name}=${encodeURIComponent(value)}`)
    .join('&');
}

/** A longest URL that still fits the header limit with room to spare. */
const MAX_QUERY_CHARS = 60_000;

/** Byte sequences that are not UTF-8: overlong forms, surrogates, past U+10FFFF, cut short, stray. */
const INVALID_UTF8: ReadonlyArray<readonly number[]> = [
  [0xc0, 0xaf],
  [0xc1, 0xbf],
  [0xe0, 0x80, 0xaf],
  [0xf0, 0x80, 0x80, 0xaf],
  [0xed, 0xa0, 0x80],
  [0xed, 0xbf, 0xbf],
  [0xed, 0xa0, 0xbd, 0xed, 0xb2, 0xa9],
  [0xf4, 0x90, 0x80, 0x80],
  [0xf8, 0x88, 0x80, 0x80, 0x80],
  [0xe2, 0x82],
  [0xf0, 0x9f, 0x98],
  [0xc3],
  [0x80],
  [0xbf],
  [0xfe],
  [0xff],
];

/** Each kind of hostile input, as an arbitrary of requests (over every endpoint it applies to) that must all be refused. */
function hostileRequests(target: Target, key: string): Record<string, fc.Arbitrary<Hostile>> {
  const notAString = fc.oneof(fc.integer(), fc.double(), fc.boolean(), fc.constant(null), fc.array(fc.anything(), { maxLength: 3 }), fc.object());
  const stringField = (endpoint: HostileEndpoint) => fc.constantFrom(...(endpoint.stringFields ?? []));
  return {
    'truncated JSON': bodyEndpoint.chain((endpoint) => {
      const text = validBody(endpoint);
      return fc.integer({ min: 1, max: text.length - 1 }).map((cut) => jsonRequest(endpoint, target, text.slice(0, cut)));
    }),
    'malformed JSON': fc
      .tuple(bodyEndpoint, fc.constantFrom('{', '}', ',', '"', "'", 'x', 'NaN', '//', '\\'), fc.string({ maxLength: 20 }))
      // Anything but whitespace after a complete value makes the text invalid JSON.
      .map(([endpoint, glitch, tail]) => jsonRequest(endpoint, target, `${validBody(endpoint)}${glitch}${tail}`)),
    'wrong types': bodyEndpoint.chain((endpoint) =>
      fc.tuple(stringField(endpoint), notAString).map(([path, value]) => jsonRequest(endpoint, target, JSON.stringify(withField(endpoint.body, path, value)))),
    ),
    'wrong container types': bodyEndpoint.chain((endpoint) =>
      fc
        .tuple(fc.constantFrom(...Object.keys(endpoint.body ?? {})), fc.oneof(fc.string(), fc.integer(), fc.constant(null), fc.object()))
        .filter(([field, value]) => (Array.isArray(endpoint.body?.[field]) ? !Array.isArray(value) : typeof value !== 'string'))
        .map(([field, value]) => jsonRequest(endpoint, target, JSON.stringify({ ...endpoint.body, [field]: value }))),
    ),
    'top level not an object': fc
      .tuple(bodyEndpoint, fc.oneof(fc.array(fc.anything(), { maxLength: 3 }), fc.string(), fc.integer(), fc.constant(null)))
      .map(([endpoint, value]) => jsonRequest(endpoint, target, JSON.stringify(value))),
    'huge strings': bodyEndpoint.chain((endpoint) =>
      fc
        .tuple(stringField(endpoint), fc.integer({ min: 16 * 1024 + 1, max: 40_000 }))
        // Over every field's limit except a value's: that one is sent over the body limit instead.
        .map(([path, length]) => {
          const huge = ['columnValue', 'value'].includes(String(path.at(-1))) ? 'v'.repeat(MAX_BODY_BYTES + length) : 'n'.repeat(length);
          return jsonRequest(endpoint, target, JSON.stringify(withField(endpoint.body, path, huge)));
        }),
    ),
    'deeply nested values': fc
      .tuple(bodyEndpoint, fc.integer({ min: 100, max: 20_000 }), fc.constantFrom('[]', '{"a":}'))
      .map(([endpoint, depth, shape]) => {
        const [open, close] = shape === '[]' ? ['[', ']'] : ['{"a":', '}'];
        const nested = `${open.repeat(depth)}1${close.repeat(depth)}`;
        return jsonRequest(endpoint, target, validBody(endpoint).replace(/:("[^"]*"|\[[^\]]*\])/, `:${nested}`));
      }),
    '__proto__ and constructor keys': fc
      .tuple(bodyEndpoint, fc.constantFrom('__proto__', 'constructor', 'prototype', 'hasOwnProperty'), fc.boolean(), fc.anything())
      .map(([endpoint, name, nested, value]) => {
        const text = validBody(endpoint);
        const member = `${JSON.stringify(name)}:${JSON.stringify(value ?? null) ?? 'null'},`;
        if (nested && text.includes('[{')) return jsonRequest(endpoint, target, text.replace('[{', `[{${member}`));
        return jsonRequest(endpoint, target, `{${member}${text.slice(1)}`);
      }),
    'NUL in names': bodyEndpoint.chain((endpoint) =>
      fc.tuple(fc.constantFrom(...(endpoint.nameFields ?? [])), fc.nat({ max: 4 })).map(([path, at]) => {
        const name = 'name'.slice(0, at) + '\u0000' + 'name'.slice(at);
        return jsonRequest(endpoint, target, JSON.stringify(withField(endpoint.body, path, name)));
      }),
    ),
    'lone surrogates': bodyEndpoint.chain((endpoint) =>
      fc
        .tuple(stringField(endpoint), fc.integer({ min: 0xd800, max: 0xdfff }), fc.string({ maxLength: 5 }))
        .map(([path, code, rest]) =>
          // JSON.stringify writes a lone surrogate as a \udxxx escape: valid JSON text, invalid Unicode.
          jsonRequest(endpoint, target, JSON.stringify(withField(endpoint.body, path, `${rest}${String.fromCharCode(code)}`))),
        ),
    ),
    'bytes that are not UTF-8 in JSON strings': bodyEndpoint.chain((endpoint) =>
      fc
        .tuple(stringField(endpoint), fc.constantFrom(...INVALID_UTF8), fc.nat({ max: 3 }), fc.string({ maxLength: 3 }))
        .map(([path, bytes, at, rest]) => {
          // A marker in the field, replaced by the raw bytes in the encoded body.
          const marker = '\u0001MARK\u0001';
          const text = JSON.stringify(withField(endpoint.body, path, `${rest.slice(0, at)}${marker}${rest.slice(at)}`));
          const [before = '', after = ''] = text.split(JSON.stringify(marker).slice(1, -1));
          return jsonRequest(endpoint, target, Buffer.concat([Buffer.from(before), Buffer.from(bytes), Buffer.from(after)]));
        }),
    ),
    'many invalid array items': fc.constantFrom(...withArrays).chain((endpoint) =>
      fc
        .tuple(fc.constantFrom(...(endpoint.arrayFields ?? [])), fc.integer({ min: 21, max: 40_000 }), fc.nat())
        .chain(([field, count, seed]) => {
          // As many items as fit the body limit, cycling through the invalid ones from `seed`.
          const items: string[] = [];
          let size = validBody(endpoint).length;
          for (let i = 0; i < count; i++) {
            const item = JSON.stringify(field.invalidItems[(seed + i) % field.invalidItems.length]);
            if (size + item.length + 1 >= MAX_BODY_BYTES) break;
            items.push(item);
            size += item.length + 1;
          }
          const text = JSON.stringify(withField(endpoint.body, field.path, '\u0001ITEMS\u0001')).replace('"\\u0001ITEMS\\u0001"', `[${items.join(',')}]`);
          return fc.constant(jsonRequest(endpoint, target, text));
        }),
    ),
    'wrong and truncated content encodings': bodyEndpoint.chain((endpoint) => {
      const plain = Buffer.from(validBody(endpoint));
      const compressed = { gzip: gzipSync(plain), deflate: deflateSync(plain), br: brotliCompressSync(plain) };
      return fc.oneof(
        // Not compressed at all, though the header says so.
        fc.constantFrom('gzip', 'deflate', 'br', 'GZIP').map((coding) => ({ coding, body: plain })),
        // Compressed, and cut short.
        fc.constantFrom<keyof typeof compressed>('gzip', 'deflate', 'br').chain((coding) =>
          fc.integer({ min: 0, max: compressed[coding].length - 1 }).map((cut) => ({ coding, body: compressed[coding].subarray(0, cut) })),
        ),
        // One coding compressed, another named.
        fc.constantFrom(['gzip', 'br'], ['br', 'gzip'], ['br', 'deflate']).map(([named = '', used = '']) => ({ coding: named, body: compressed[used as keyof typeof compressed] })),
        // A coding the service does not read.
        fc.constantFrom('compress', 'zstd', 'gzip, gzip', 'identity, gzip', 'x-unknown', 'gzip;q=1').map((coding) => ({ coding, body: compressed.gzip })),
      ).map(({ coding, body }) => ({ ...jsonRequest(endpoint, target, body), headers: [JSON_TYPE, ['content-encoding', coding]] as const }));
    }),
    'duplicate headers': fc.constantFrom(...HOSTILE_ENDPOINTS).chain((endpoint) => {
      const base = endpoint.body === undefined ? queryRequest(endpoint, target, validQuery(endpoint)) : jsonRequest(endpoint, target, validBody(endpoint));
      const other = newApiKey();
      const credentials: ReadonlyArray<ReadonlyArray<readonly [string, string]>> = [
        [['authorization', `Bearer ${key}`], ['authorization', `Bearer ${other}`]],
        [['authorization', `Bearer ${other}`], ['authorization', `Bearer ${key}`]],
        [['authorization', `Bearer ${key}`], ['authorization', `Bearer ${key}`]],
        [['x-api-key', key], ['x-api-key', other]],
        [['x-api-key', other], ['x-api-key', key]],
        [['x-api-key', key], ['x-api-key', key]],
        [['x-api-key', key], ['authorization', `Bearer ${key}`]],
      ];
      const contentTypes: ReadonlyArray<ReadonlyArray<readonly [string, string]>> =
        endpoint.body === undefined
          ? []
          : [
              [['x-api-key', key], JSON_TYPE, ['content-type', 'text/plain']],
              [['x-api-key', key], ['content-type', 'text/plain'], JSON_TYPE],
              [['x-api-key', key], JSON_TYPE, JSON_TYPE],
            ];
      return fc.constantFrom(...credentials, ...contentTypes).map((headers) => ({
        ...base,
        headers: [...(base.headers ?? []).filter(([name]) => !headers.some(([other]) => other === name)), ...headers],
        ownCredentials: true,
      }));
    }),
    'path-shaped table names': fc
      .tuple(fc.array(fc.constantFrom('..', '.', 'etc', 'seed', '%2F', '~', ''), { minLength: 1, maxLength: 5 }), fc.constantFrom('body', 'query', 'instance'), bodyEndpoint, queryEndpoint)
      .map(([segments, where, endpoint, reader]) => {
        const name = `${segments[0] === 'seed' ? '/' : ''}${segments.join('/')}`.replace(/^(?![./%~])/, '../');
        if (where === 'query') return queryRequest(reader, target, `tableName=${encodeURIComponent(name)}&id=${SEED.row}`);
        if (where === 'instance') return jsonRequest(endpoint, { ...target, instance: encodeURIComponent(name) }, validBody(endpoint));
        const tableField = endpoint.nameFields?.find((field) => TABLE_NAME_FIELDS.has(String(field[0])));
        if (tableField !== undefined) return jsonRequest(endpoint, target, JSON.stringify(withField(endpoint.body, tableField, name)));
        // The table is in the path (v2 row operations): the name goes there. Their body names only
        // families, where "." and ".." are legal names.
        const inPath = { ...endpoint, path: (instance: string, store: string) => endpoint.path(instance, store).replace(`/tables/${SEED.table}/`, `/tables/${encodeURIComponent(name)}/`) };
        return jsonRequest(inPath, target, validBody(endpoint));
      }),
    'repeated and unknown query parameters': fc
      .tuple(queryEndpoint, fc.constantFrom('tableName', 'id', 'other'), fc.string({ maxLength: 10 }))
      .map(([endpoint, parameter, value]) => queryRequest(endpoint, target, `${validQuery(endpoint)}&${parameter}=${encodeURIComponent(value)}`)),
    'one parameter repeated many times': fc
      .tuple(queryEndpoint, fc.constantFrom('tableName', 'id', 'x'), fc.integer({ min: 2, max: 20_000 }), fc.string({ maxLength: 4 }))
      .map(([endpoint, parameter, count, value]) => {
        const part = `&${parameter}=${encodeURIComponent(value)}`;
        const fitting = Math.min(count, Math.floor(MAX_QUERY_CHARS / part.length));
        return queryRequest(endpoint, target, `${validQuery(endpoint)}${part.repeat(fitting)}`);
      }),
    'many query parameters': fc
      .tuple(queryEndpoint, fc.integer({ min: 1, max: 10_000 }), fc.constantFrom('', '=', '=v', '=%FF'))
      .map(([endpoint, count, tail]) => {
        const parts: string[] = [];
        let length = 0;
        for (let i = 0; i < count; i++) {
          const part = `p${i}${tail}`;
          if (length + part.length + 1 > MAX_QUERY_CHARS) break;
          parts.push(part);
          length += part.length + 1;
        }
        return queryRequest(endpoint, target, `${validQuery(endpoint)}&${parts.join('&')}`);
      }),
    'query bytes that are not UTF-8': fc
      .tuple(queryEndpoint, fc.constantFrom('%FF', '%ED%A0%80', '%C0%AF', '%E2%82', '%F4%90%80%80'))
      // The bytes end the first parameter's value.
      .map(([endpoint, bytes]) => queryRequest(endpoint, target, validQuery(endpoint).replace('&', `${bytes}&`) + (validQuery(endpoint).includes('&') ? '' : bytes))),
    'wrong content types': fc
      .tuple(
        bodyEndpoint,
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
      .map(([endpoint, type]) => jsonRequest(endpoint, target, validBody(endpoint), type)),
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

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The slowest of `count` /healthz answers in a row, with nothing else going on: this machine's noise. */
async function healthzBaseline(baseUrl: string, count = 5): Promise<number> {
  let worst = 0;
  for (let i = 0; i < count; i++) {
    const started = performance.now();
    await (await fetch(`${baseUrl}/healthz`)).arrayBuffer();
    worst = Math.max(worst, performance.now() - started);
  }
  return worst;
}

/**
 * Sends `request` while asking /healthz over and over, and returns the answer, how long it took,
 * and the slowest /healthz answer meanwhile. The service, the client and this loop share one
 * event loop, so a request that blocks it delays the /healthz answers by as long.
 */
async function withHealthz(baseUrl: string, send: () => Promise<RawResponse>): Promise<{ response: RawResponse; answerMs: number; healthzMs: number }> {
  let done = false;
  let worst = 0;
  let asked = 0;
  const probe = (async () => {
    while (!done || asked === 0) {
      const started = performance.now();
      asked += 1;
      await (await fetch(`${baseUrl}/healthz`)).arrayBuffer();
      worst = Math.max(worst, performance.now() - started);
      await sleep(5);
    }
  })();
  await sleep(1); // the first /healthz is on its way
  const started = performance.now();
  const response = await send();
  const answerMs = performance.now() - started;
  done = true;
  await probe;
  return { response, answerMs, healthzMs: worst };
}

/**
 * Hostile input over every endpoint of HOSTILE_ENDPOINTS (fast-check), with authentication on:
 * every answer is a 4xx problem document the OpenAPI document describes, under 64 KiB, within
 * 5 s, while /healthz keeps answering within 200 ms; never a 5xx or a crash; and the store is the
 * same afterwards. `runs` is per kind of input.
 *
 * The /healthz bound is checked against this machine's noise: a /healthz slower than 200 ms
 * counts only if it is also 200 ms slower than the slowest of five /healthz answers asked just
 * after with nothing else going on, and only if that happens in three attempts out of three
 * (the request is refused each time, so sending it again changes nothing). A request that blocks
 * the event loop fails all three; a busy machine does not.
 */
export function hostileInputCases(store: DriverHarnessFactory, options: { runs: number }): void {
  describe('hostile input', () => {
    const files = tempDirectory();
    after(() => files.remove());
    const admin: KeyEntry = { name: 'hostile-suite', key: newApiKey(), role: 'admin', instances: ['*'] };
    const app = useTestApp({
      store,
      maxBodyBytes: MAX_BODY_BYTES,
      auth: () => {
        const apiKeysFile = join(files.path, 'keys.json');
        writeFileSync(apiKeysFile, keysFile([admin]));
        return { config: { modes: ['apikey'], apiKeysFile, protectDocs: false } };
      },
    });
    let original: string;

    before(async () => {
      const api = app().api.as({ 'x-api-key': admin.key });
      expect((await api.post(`/v1/${app().instance}/createTable`, { tableName: SEED.table, columnFamily: 'cf' })).status).to.equal(201);
      const write = await api.post(`/v1/${app().instance}/insertData`, {
        tableName: SEED.table,
        rowKeyId: SEED.row,
        data: [{ columnFamily: 'cf', columnName: 'c', columnValue: 'original' }],
      });
      expect(write.status).to.equal(200);
      original = await snapshot(app());
    });

    const send = (request: Hostile) =>
      sendRaw(
        app().baseUrl,
        { ...request, headers: [...(request.ownCredentials === true ? [] : [['x-api-key', admin.key] as const]), ...(request.headers ?? [])] },
        app().api, // checked against the OpenAPI document
      );

    const refusedWithinBounds = async (request: Hostile): Promise<void> => {
      const what = `${request.method} ${request.path.slice(0, 120)}`;
      let slowest = '';
      for (let attempt = 1; attempt <= 3; attempt++) {
        const { response, answerMs, healthzMs } = await withHealthz(app().baseUrl, () => send(request));
        const everyEntryFailed =
          request.perEntry === true &&
          response.status === 200 &&
          (response.body as { results: Array<{ code: string }> }).results.every((result) => result.code !== 'OK');
        if (!everyEntryFailed) {
          expect(response.status, `${what}: ${JSON.stringify(response.body).slice(0, 300)}`).to.be.within(400, 499);
          expect(response.headers.get('content-type'), what).to.equal('application/problem+json');
        }
        expect(response.bytes, what).to.be.below(HOSTILE_BOUNDS.maxProblemBytes);
        expect(answerMs, what).to.be.below(HOSTILE_BOUNDS.maxAnswerMs);
        if (healthzMs <= HOSTILE_BOUNDS.maxHealthzMs) return;
        const baseline = await healthzBaseline(app().baseUrl);
        if (healthzMs <= HOSTILE_BOUNDS.maxHealthzMs + baseline) return;
        slowest = `${healthzMs.toFixed(0)} ms (baseline ${baseline.toFixed(0)} ms) on attempt ${attempt}`;
      }
      expect.fail(`${what}: /healthz answered in ${slowest}, over ${HOSTILE_BOUNDS.maxHealthzMs} ms every time`);
    };

    for (const kind of Object.keys(hostileRequests({ instance: 'x', store: 'x' }, 'k'))) {
      it(`refuses ${kind} with a small 4xx problem, in time, /healthz answering, the store unchanged`, async function () {
        this.timeout(300_000);
        const arbitrary = hostileRequests({ instance: app().instance, store: app().storeName }, admin.key)[kind] as fc.Arbitrary<Hostile>;
        const details = await fc.check(
          fc.asyncProperty(arbitrary, async (request) => {
            await refusedWithinBounds(request);
            expect(await snapshot(app())).to.equal(original);
          }),
          { numRuns: options.runs },
        );
        // Counterexamples can be 60 KB URLs: reported cut short.
        if (details.failed) {
          const example = JSON.stringify(details.counterexample, (_, value: unknown) =>
            value instanceof Uint8Array || (typeof value === 'object' && value !== null && (value as { type?: unknown }).type === 'Buffer')
              ? `<${Buffer.from(value as Uint8Array).length} bytes>`
              : value,
          );
          const cause = details.errorInstance instanceof Error ? details.errorInstance.message : String(details.errorInstance);
          expect.fail(`after ${details.numRuns} runs (seed ${details.seed}): ${cause.slice(0, 1000)}\ncounterexample: ${example.slice(0, 600)}`);
        }
      });
    }

    it('covers every endpoint with every kind of input that applies to it', () => {
      for (const endpoint of HOSTILE_ENDPOINTS) {
        expect(endpoint.body !== undefined || endpoint.query !== undefined, endpoint.name).to.equal(true);
        if (endpoint.body !== undefined) {
          expect(endpoint.stringFields ?? [], endpoint.name).to.not.be.empty;
          expect(endpoint.nameFields ?? [], endpoint.name).to.not.be.empty;
        }
      }
    });

    it('refuses a chunked body over the limit with 413, without reading it all', async () => {
      const { hostname, port } = new URL(app().baseUrl);
      const status = await new Promise<number>((resolve, reject) => {
        const request = httpRequest(
          {
            host: hostname,
            port,
            method: 'POST',
            path: `/v1/${app().instance}/insertData`,
            headers: { 'content-type': 'application/json', 'x-api-key': admin.key },
          },
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
