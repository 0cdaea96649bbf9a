import { expect } from 'chai';
import type { DataStore, StoreCapabilities, StoreLimits } from '../../src/store/store.ts';
import type { ApiResponse } from './api-client.ts';
import type { TestApp } from './test-app.ts';

/** The v2 paths of a test app's store and first instance. */
export function v2Paths(app: TestApp, instance = app.instance) {
  const tables = `/v2/stores/${app.storeName}/instances/${instance}/tables`;
  return {
    tables,
    table: (table: string) => `${tables}/${table}`,
    rows: (table: string) => `${tables}/${table}/rows`,
    row: (table: string, key: string) => `${tables}/${table}/rows/${encodeURIComponent(key)}`,
  };
}

/** Creates a table through v2 and checks that it was. */
export async function createTable(app: TestApp, name: string, families: ReadonlyArray<Record<string, unknown>> = [{ name: 'cf' }]): Promise<void> {
  const response = await app.api.request('POST', v2Paths(app).tables, { json: { name, families } });
  expect(response.status, JSON.stringify(response.body)).to.equal(201);
}

/** Writes rows of one cell each (`cf:c` = the key, unless given) with one batch write per 500. */
export async function writeRows(app: TestApp, table: string, keys: readonly string[], value = (key: string) => key): Promise<void> {
  for (let start = 0; start < keys.length; start += 500) {
    const entries = keys.slice(start, start + 500).map((key) => ({ key, mutations: [{ set: { family: 'cf', column: 'c', value: value(key) } }] }));
    const response = await app.api.post(`${v2Paths(app).rows(table)}:batchWrite`, { entries });
    expect(response.status, JSON.stringify(response.body)).to.equal(200);
    expect(response.body.results.filter((result: { code: string }) => result.code !== 'OK')).to.deep.equal([]);
  }
}

/** Every row key of a scan, page by page with the tokens, and the pages' sizes. */
export async function scanKeys(app: TestApp, table: string, query: string): Promise<{ keys: string[]; pages: number[]; tokens: string[] }> {
  const keys: string[] = [];
  const pages: number[] = [];
  const tokens: string[] = [];
  let token: string | undefined;
  do {
    const response: ApiResponse = await app.api.get(`${v2Paths(app).rows(table)}?${query}${token === undefined ? '' : `&pageToken=${token}`}`);
    expect(response.status, JSON.stringify(response.body)).to.equal(200);
    keys.push(...response.body.rows.map((row: { key: string }) => row.key));
    pages.push(response.body.rows.length);
    token = response.body.nextPageToken;
    if (token !== undefined) tokens.push(token);
    expect(pages.length, 'pages').to.be.below(100_000);
  } while (token !== undefined);
  return { keys, pages, tokens };
}

/**
 * publishing wraps a real store so that it publishes other capabilities or limits than its own,
 * changing nothing else: the service's gate is what is tested, and no store at hand lacks the
 * capability or has so small a limit. The store itself would still do what it is not asked.
 */
export function publishing(store: DataStore, published: { capabilities?: Partial<StoreCapabilities>; limits?: Partial<StoreLimits> }): DataStore {
  const capabilities = { ...store.capabilities, ...published.capabilities };
  const limits = { ...store.limits, ...published.limits };
  return new Proxy(store, {
    get(target, property) {
      if (property === 'capabilities') return capabilities;
      if (property === 'limits') return limits;
      const value: unknown = Reflect.get(target, property, target);
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
}

/** A problem's code and, when it names them, its limit and capability. */
export function problemOf(response: ApiResponse): Record<string, unknown> {
  const { code, limit, capability } = response.body as Record<string, unknown>;
  return { status: response.status, code, ...(limit === undefined ? {} : { limit }), ...(capability === undefined ? {} : { capability }) };
}
