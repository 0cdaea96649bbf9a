import { readFileSync } from 'node:fs';
import { expect } from 'chai';
import { createMetrics } from '../../src/telemetry/metrics.ts';
import type { CallOptions, ReadSelection, TableRef } from '../../src/store/store.ts';
import { type Sample, parseSamples, sampleValue } from '../support/prometheus.ts';
import { withOverrides } from '../support/store-faults.ts';
import { type TestApp, startTestApp, useTestApp } from '../support/test-app.ts';
import { emulatorHost } from '../support/emulator.ts';

const HTTP = 'kvcrud_http_request_duration_seconds';
const STORE = 'kvcrud_store_operation_duration_seconds';
const CELLS = [{ columnFamily: 'cf', columnName: 'status', columnValue: 'shipped' }];

/** GET /metrics through the API client (so the response is checked against the OpenAPI document). */
async function scrape(app: TestApp): Promise<{ text: string; samples: Sample[] }> {
  const response = await app.api.get('/metrics');
  expect(response.status).to.equal(200);
  expect(response.headers.get('content-type')).to.equal('text/plain; version=0.0.4; charset=utf-8');
  return { text: response.body as string, samples: parseSamples(response.body as string) };
}

describe('GET /metrics', () => {
  describe('after real requests', () => {
    const app = useTestApp();
    let scraped: { text: string; samples: Sample[] };

    before(async function () {
      const v1 = `/v1/${app().instance}`;
      const statuses = [
        (await app().api.post(`${v1}/createTable`, { tableName: 'orders', columnFamily: 'cf' })).status,
        (await app().api.post(`${v1}/createTable`, { tableName: 'orders', columnFamily: 'cf' })).status,
        (await app().api.post(`${v1}/insertData`, { tableName: 'orders', rowKeyId: 'row-key-1', data: CELLS })).status,
        (await app().api.get(`${v1}/readCellData?tableName=orders&id=row-key-1`)).status,
        (await app().api.get(`${v1}/readCellData?tableName=orders&id=no-such-row`)).status,
        (await app().api.get(`${v1}/readCellData?tableName=no-such-table&id=row-key-1`)).status,
        (await app().api.get(`${v1}/no-such-endpoint`)).status,
        (await app().api.get('/no/such/path/at-all')).status,
        (await app().api.request('PUT', `${v1}/readCellData`)).status,
        (await app().api.get('/readyz')).status,
      ];
      expect(statuses).to.deep.equal([201, 409, 200, 200, 404, 404, 404, 404, 405, 200]);
      scraped = await scrape(app());
    });

    it('counts requests by method, route template and status code', () => {
      const count = (method: string, route: string, status: string) =>
        sampleValue(scraped.samples, `${HTTP}_count`, { method, route, status_code: status });
      expect(count('POST', '/v1/:instanceID/createTable', '201')).to.equal(1);
      expect(count('POST', '/v1/:instanceID/createTable', '409')).to.equal(1);
      expect(count('POST', '/v1/:instanceID/insertData', '200')).to.equal(1);
      expect(count('GET', '/v1/:instanceID/readCellData', '200')).to.equal(1);
      expect(count('GET', '/v1/:instanceID/readCellData', '404')).to.equal(2);
      expect(count('GET', '/readyz', '200')).to.equal(1);
    });

    it('labels the requests a store served with its name, and no other request', () => {
      const requests = scraped.samples.filter((sample) => sample.name === `${HTTP}_count`);
      const stored = requests.filter((sample) => sample.labels['store'] !== undefined);
      expect(new Set(stored.map((sample) => sample.labels['store']))).to.deep.equal(new Set([app().storeName]));
      // The store's answers, not-found ones included; the instance that does not exist has none.
      expect(stored.map((sample) => `${sample.labels['route']} ${sample.labels['status_code']} ${sample.value}`).sort()).to.deep.equal([
        '/v1/:instanceID/createTable 201 1',
        '/v1/:instanceID/createTable 409 1',
        '/v1/:instanceID/insertData 200 1',
        '/v1/:instanceID/readCellData 200 1',
        '/v1/:instanceID/readCellData 404 2',
      ]);
      const storeless = requests.filter((sample) => ['/readyz', '(unmatched)'].includes(sample.labels['route'] ?? ''));
      expect(storeless).to.have.length.above(0);
      expect(storeless.filter((sample) => 'store' in sample.labels)).to.deep.equal([]);
    });

    it('puts every request no route matched under one route label, "(unmatched)"', () => {
      expect(sampleValue(scraped.samples, `${HTTP}_count`, { method: 'GET', route: '(unmatched)', status_code: '404' })).to.equal(2);
      expect(sampleValue(scraped.samples, `${HTTP}_count`, { method: 'PUT', route: '(unmatched)', status_code: '405' })).to.equal(1);
    });

    it('never puts a path, table name or row key in a label', () => {
      const values = scraped.samples.flatMap((sample) => Object.values(sample.labels));
      for (const needle of [app().instance, 'orders', 'row-key-1', 'no-such', '/no/such']) {
        expect(values.filter((value) => value.includes(needle)), needle).to.deep.equal([]);
      }
      const routes = new Set(scraped.samples.filter((sample) => sample.name === `${HTTP}_count`).map((sample) => sample.labels['route']));
      expect([...routes].sort()).to.deep.equal(
        ['(unmatched)', '/openapi.json', '/readyz', '/v1/:instanceID/createTable', '/v1/:instanceID/insertData', '/v1/:instanceID/readCellData'].sort(),
      );
    });

    it('has a bucket per bound, cumulative, with +Inf equal to the count', () => {
      const labels = { method: 'GET', route: '/v1/:instanceID/readCellData', status_code: '404' };
      const buckets = scraped.samples.filter((sample) => sample.name === `${HTTP}_bucket` && sample.labels['status_code'] === '404' && sample.labels['route'] === labels.route);
      expect(buckets.map((bucket) => bucket.labels['le'])).to.deep.equal(
        ['0.001', '0.0025', '0.005', '0.01', '0.025', '0.05', '0.1', '0.25', '0.5', '1', '2.5', '5', '10', '+Inf'],
      );
      const counts = buckets.map((bucket) => bucket.value);
      expect(counts).to.deep.equal([...counts].sort((a, b) => a - b));
      expect(counts.at(-1)).to.equal(sampleValue(scraped.samples, `${HTTP}_count`, labels));
      expect(sampleValue(scraped.samples, `${HTTP}_sum`, labels)).to.be.above(0);
    });

    it('times each store operation by store name, operation and outcome code', () => {
      const count = (operation: string, code: string) => sampleValue(scraped.samples, `${STORE}_count`, { store: app().storeName, operation, code });
      expect(count('createTable', 'OK')).to.equal(1);
      expect(count('createTable', 'ALREADY_EXISTS')).to.equal(1);
      expect(count('mutateRow', 'OK')).to.equal(1);
      // A missing row is an answer, not a failure of the store.
      expect(count('readRows', 'OK')).to.equal(2);
      expect(count('readRows', 'NOT_FOUND')).to.equal(1);
      expect(count('checkHealth', 'OK')).to.equal(1);
    });

    it('serves the default process metrics: CPU, memory, heap, event-loop lag, GC', () => {
      for (const name of [
        'process_cpu_user_seconds_total',
        'process_resident_memory_bytes',
        'nodejs_heap_size_used_bytes',
        'nodejs_eventloop_lag_seconds',
        'nodejs_eventloop_lag_p99_seconds',
      ]) {
        expect(sampleValue(scraped.samples, name), name).to.be.a('number');
      }
      expect(scraped.text).to.contain('# TYPE nodejs_gc_duration_seconds histogram');
    });

    it("counts the scrapes themselves under the route /metrics", async () => {
      const { samples } = await scrape(app());
      expect(sampleValue(samples, `${HTTP}_count`, { method: 'GET', route: '/metrics', status_code: '200' })).to.equal(1);
    });
  });

  describe('while a request waits for the store', () => {
    let release: () => void = () => {};
    const app = useTestApp({
      wrapStore: (store) =>
        withOverrides(store, {
          readRows: async (ref: TableRef, keys: readonly Buffer[], selection: ReadSelection, options: CallOptions) => {
            await new Promise<void>((resolve) => (release = resolve));
            return store.readRows(ref, keys, selection, options);
          },
        }),
    });

    it('counts it in flight until it is answered, then observes its whole duration', async () => {
      const held = app().api.get(`/v1/${app().instance}/readCellData?tableName=t&id=r`);
      let inFlight: number | undefined;
      for (let attempt = 0; attempt < 50 && inFlight !== 2; attempt += 1) {
        inFlight = sampleValue((await scrape(app())).samples, 'kvcrud_http_requests_in_flight');
      }
      // The held request and the scrape itself.
      expect(inFlight).to.equal(2);
      await new Promise((resolve) => setTimeout(resolve, 300));
      release();
      expect((await held).status).to.equal(404);

      const { samples } = await scrape(app());
      expect(sampleValue(samples, 'kvcrud_http_requests_in_flight')).to.equal(1);
      const labels = { method: 'GET', route: '/v1/:instanceID/readCellData', status_code: '404' };
      expect(sampleValue(samples, `${HTTP}_bucket`, { ...labels, le: '0.25' })).to.equal(0);
      expect(sampleValue(samples, `${HTTP}_sum`, labels)).to.be.at.least(0.3);
      expect(sampleValue(samples, `${STORE}_sum`, { operation: 'readRows', code: 'NOT_FOUND' })).to.be.at.least(0.3);
    });
  });

  describe('of two apps in one process', () => {
    const first = useTestApp();
    let second: TestApp;
    before(async function () {
      second = await startTestApp({ emulatorHost: emulatorHost(this) });
    });
    after(async () => {
      await second?.close();
    });

    it("counts each app's requests in its own registry", async () => {
      await first().api.get('/openapi.json');
      await first().api.get('/openapi.json');
      await second.api.get('/openapi.json');
      const count = async (app: TestApp) =>
        sampleValue((await scrape(app)).samples, `${HTTP}_count`, { route: '/openapi.json', status_code: '200' });
      expect(await count(first())).to.equal(3); // ApiClient.connect fetched it once too
      expect(await count(second)).to.equal(2);
    });
  });
});

describe('docs/observability.md', () => {
  it('lists every kvcrud metric with its type and labels', () => {
    const readme = readFileSync(new URL('../../docs/observability.md', import.meta.url), 'utf8');
    const own = createMetrics().registry.getMetricsAsArray().filter((metric) => metric.name.startsWith('kvcrud_'));
    expect(own).to.have.length.above(0);
    for (const metric of own) {
      const row = readme.split('\n').find((line) => line.startsWith(`| \`${metric.name}\` |`));
      expect(row, metric.name).to.be.a('string');
      expect(row, metric.name).to.contain(`| ${metric.type} |`);
      const { labelNames } = metric as unknown as { labelNames: string[] };
      for (const label of labelNames) expect(row, `${metric.name} ${label}`).to.contain(`\`${label}\``);
    }
  });
});
