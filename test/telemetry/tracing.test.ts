import { spanRecorder, spanTree } from '../support/tracing.ts';
import { randomBytes } from 'node:crypto';
import { SpanKind, SpanStatusCode } from '@opentelemetry/api';
import type { ReadableSpan } from '@opentelemetry/sdk-trace';
import { expect } from 'chai';
import { tracingRequested } from '../../src/telemetry/tracing.ts';
import { withOverrides } from '../support/store-faults.ts';
import { type TestApp, startTestApp, useTestApp } from '../support/test-app.ts';
import { closedPort } from '../support/fake-backends.ts';
import { harness as bigtableHarness } from '../support/harnesses/bigtable.ts';

/** A caller's W3C trace context: a fresh trace id and the caller's span id. */
function callerContext(): { traceId: string; parentSpanId: string; traceparent: string } {
  const traceId = randomBytes(16).toString('hex');
  const parentSpanId = randomBytes(8).toString('hex');
  return { traceId, parentSpanId, traceparent: `00-${traceId}-${parentSpanId}-01` };
}

function serverSpan(spans: readonly ReadableSpan[]): ReadableSpan {
  const found = spans.find((span) => span.kind === SpanKind.SERVER);
  if (found === undefined) throw new Error('no server span');
  return found;
}

const ADMIN = 'grpc.google.bigtable.admin.v2.BigtableTableAdmin';
const DATA = 'grpc.google.bigtable.v2.Bigtable';
const CELLS = [{ columnFamily: 'cf', columnName: 'status', columnValue: 'shipped' }];

describe('tracing', () => {
  before(() => spanRecorder.start());
  after(() => spanRecorder.stop());

  describe('of each endpoint', () => {
    const app = useTestApp({ store: bigtableHarness });
    const v1 = () => `/v1/${app().instance}`;

    /** Sends a request in a fresh trace of the caller's and returns the spans the service made in it. */
    async function traced(method: string, path: string, json?: unknown): Promise<{ status: number; spans: ReadableSpan[] }> {
      const caller = callerContext();
      const response = await app().api.request(method, path, { headers: { traceparent: caller.traceparent }, ...(json === undefined ? {} : { json }) });
      return { status: response.status, spans: await spanRecorder.trace(caller.traceId) };
    }

    it('createTable: a server span named by route, the store call under it, the gRPC call under that', async () => {
      const { status, spans } = await traced('POST', `${v1()}/createTable`, { tableName: 'orders', columnFamily: 'cf' });
      expect(status).to.equal(201);
      expect(spanTree(spans)).to.equal(
        ['POST /v1/:instanceID/createTable', '  DataStore.createTable', `    ${ADMIN}/CreateTable`].join('\n'),
      );
    });

    it('insertData: the row write and its MutateRow call', async () => {
      const { status, spans } = await traced('POST', `${v1()}/insertData`, { tableName: 'orders', rowKeyId: 'r1', data: CELLS });
      expect(status).to.equal(200);
      // createTable left the column families in the adapter's cache: no GetTable call.
      expect(spanTree(spans)).to.equal(['POST /v1/:instanceID/insertData', '  DataStore.mutateRow', `    ${DATA}/MutateRow`].join('\n'));
    });

    it('readCellData: the row read and its ReadRows call', async () => {
      const { status, spans } = await traced('GET', `${v1()}/readCellData?tableName=orders&id=r1`);
      expect(status).to.equal(200);
      expect(spanTree(spans)).to.equal(['GET /v1/:instanceID/readCellData', '  DataStore.readRows', `    ${DATA}/ReadRows`].join('\n'));
    });

    it('deleteTable: the table check, then the deletion, each with its gRPC call', async () => {
      const { status, spans } = await traced('DELETE', `${v1()}/deleteTable`, { tableList: ['orders'] });
      expect(status).to.equal(200);
      expect(spanTree(spans)).to.equal(
        [
          'DELETE /v1/:instanceID/deleteTable',
          '  DataStore.listTables',
          `    ${ADMIN}/ListTables`,
          '  DataStore.deleteTable',
          `    ${ADMIN}/DeleteTable`,
        ].join('\n'),
      );
    });

    it('the documentation endpoints: a server span alone', async () => {
      expect(spanTree((await traced('GET', '/openapi.json')).spans)).to.equal('GET /openapi.json');
      expect(spanTree((await traced('GET', '/problems/table-not-found')).spans)).to.equal('GET /problems/:slug');
    });

    it('names a request no route matched by its method alone, without http.route', async () => {
      const { status, spans } = await traced('GET', `/v1/${app().instance}/no-such-endpoint`);
      expect(status).to.equal(404);
      expect(spanTree(spans)).to.equal('GET');
      expect(serverSpan(spans).attributes).to.not.have.property('http.route');
    });

    it('does not trace probes and scrapes, nor the store calls they make', async () => {
      for (const path of ['/healthz', '/readyz', '/metrics']) {
        const caller = callerContext();
        expect((await app().api.get(path, { headers: { traceparent: caller.traceparent } })).status, path).to.equal(200);
        await new Promise((resolve) => setTimeout(resolve, 100));
        expect(spanRecorder.spansOf(caller.traceId), path).to.deep.equal([]);
      }
    });
  });

  describe('context and attributes', () => {
    const app = useTestApp({ store: bigtableHarness });

    it("continues the caller's trace from traceparent, and logs its trace id", async () => {
      const caller = callerContext();
      const response = await app().api.get('/openapi.json', { headers: { traceparent: caller.traceparent } });
      const span = serverSpan(await spanRecorder.trace(caller.traceId));
      expect(span.spanContext().traceId).to.equal(caller.traceId);
      expect(span.parentSpanContext?.spanId).to.equal(caller.parentSpanId);
      const line = app().logs.find((logged) => logged['requestId'] === response.headers.get('x-request-id'));
      expect(line).to.include({ traceId: caller.traceId, spanId: span.spanContext().spanId });
    });

    it('starts a new trace without traceparent; the log line names it', async () => {
      const response = await app().api.get('/openapi.json');
      const line = app().logs.find((logged) => logged['requestId'] === response.headers.get('x-request-id'));
      const traceId = String(line?.['traceId']);
      expect(traceId).to.match(/^[0-9a-f]{32}$/);
      const span = serverSpan(await spanRecorder.trace(traceId));
      expect(span.parentSpanContext).to.equal(undefined);
      expect(span.spanContext().spanId).to.equal(line?.['spanId']);
    });

    it('puts the route, the status and the caller on the server span, and no row key', async () => {
      const caller = callerContext();
      const path = `/v1/${app().instance}/readCellData?tableName=t&id=secret-row-key`;
      await app().api.get(path, { headers: { traceparent: caller.traceparent } });
      const spans = await spanRecorder.trace(caller.traceId);
      expect(serverSpan(spans).attributes).to.include({
        'http.route': '/v1/:instanceID/readCellData',
        'http.request.method': 'GET',
        'http.response.status_code': 404,
        'url.query': 'tableName=t&id=REDACTED',
        // AUTH_MODE none: every caller is "anonymous" (test/auth checks named callers in the log).
        'enduser.id': 'anonymous',
      });
      expect(JSON.stringify(spans.map((span) => span.attributes))).to.not.contain('secret-row-key');
    });

    it('keeps the row keys and key bounds of v2 paths and queries off the server span', async () => {
      const caller = callerContext();
      const rows = `/v2/stores/main/instances/${app().instance}/tables/t/rows`;
      const paths = [
        `${rows}/secret-key-1?columns=cf`,
        `${rows}/secret-key-2:mutate`,
        `${rows}?start=secret-start&end=secret-end&prefix=secret-prefix&pageToken=secret-token&limit=5`,
        `${rows}:batchGet?keys=secret-keys`,
        // Names that carry keys elsewhere in the API, sent where they do not belong.
        `${rows}?key=secret-key-3&rowKeyId=secret-key-4&limit=5`,
      ];
      for (const path of paths) await app().api.request('GET', path, { headers: { traceparent: caller.traceparent } });
      const servers = (await spanRecorder.trace(caller.traceId)).filter((span) => span.kind === SpanKind.SERVER);
      expect(servers.map((span) => [span.attributes['url.path'], span.attributes['url.query']])).to.deep.equal([
        [`${rows}/REDACTED`, 'columns=cf'],
        [`${rows}/REDACTED:mutate`, undefined],
        [rows, 'start=REDACTED&end=REDACTED&prefix=REDACTED&pageToken=REDACTED&limit=5'],
        [`${rows}:batchGet`, 'keys=REDACTED'],
        [rows, 'key=REDACTED&rowKeyId=REDACTED&limit=5'],
      ]);
      expect(JSON.stringify(servers.map((span) => span.attributes))).to.not.contain('secret');
    });

    it('records a failed store call on its span and the problem code on the server span', async () => {
      const caller = callerContext();
      const response = await app().api.get(`/v1/${app().instance}/readCellData?tableName=missing&id=r`, {
        headers: { traceparent: caller.traceparent },
      });
      expect(response.body.code).to.equal('TABLE_NOT_FOUND');
      const spans = await spanRecorder.trace(caller.traceId);
      const server = serverSpan(spans);
      // A 4xx is the caller's error, not the server's (OpenTelemetry's HTTP conventions).
      expect(server.status.code).to.equal(SpanStatusCode.UNSET);
      expect(server.attributes).to.include({ 'kvcrud.problem.code': 'TABLE_NOT_FOUND', 'http.response.status_code': 404 });
      const store = spans.find((span) => span.name === 'DataStore.readRows');
      expect(store?.status).to.deep.equal({ code: SpanStatusCode.ERROR, message: 'NOT_FOUND' });
      expect(store?.attributes).to.include({ 'error.type': 'NOT_FOUND', 'db.collection.name': 'missing' });
      expect(store?.events.map((event) => event.name)).to.deep.equal(['exception']);
      // The store's gRPC call that found the table missing (GetTable, for its schema) failed under it.
      const calls = spans.filter((span) => span.parentSpanContext?.spanId === store?.spanContext().spanId);
      expect(calls.map((call) => call.status.code)).to.include(SpanStatusCode.ERROR);
    });
  });

  describe('of server-side failures', () => {
    let unreachable: TestApp;
    before(async () => {
      unreachable = await startTestApp({ emulatorHost: `127.0.0.1:${await closedPort()}`, storeTimeoutMs: 400 });
    });
    after(async () => {
      await unreachable.close();
    });
    const buggy = useTestApp({
      wrapStore: (store) => withOverrides(store, { readRows: () => Promise.reject(new TypeError('adapter bug: x is undefined')) }),
    });

    it('marks the server span of a 503 as an error and records why, under it every attempt the store made', async () => {
      const caller = callerContext();
      const response = await unreachable.api.get(`/v1/${unreachable.instance}/readCellData?tableName=t&id=r`, {
        headers: { traceparent: caller.traceparent },
      });
      expect(response.status).to.equal(503);
      const spans = await spanRecorder.trace(caller.traceId);
      const server = serverSpan(spans);
      expect(server.status.code).to.equal(SpanStatusCode.ERROR);
      expect(server.attributes).to.include({ 'kvcrud.problem.code': 'BACKEND_UNAVAILABLE' });
      const exception = server.events.find((event) => event.name === 'exception');
      // OpenTelemetry takes an error's `code` as its type: the StoreError code.
      expect(exception?.attributes?.['exception.type']).to.equal('UNAVAILABLE');
      expect(String(exception?.attributes?.['exception.message'])).to.match(/^bigtable \w+: 14 UNAVAILABLE/);
      const store = spans.find((span) => span.name === 'DataStore.readRows');
      expect(store?.attributes['error.type']).to.equal('UNAVAILABLE');
      // The adapter retries until the deadline: one gRPC span per attempt, all under the store call.
      const attempts = spans.filter((span) => span.name.startsWith('grpc.google.bigtable.'));
      expect(attempts.length).to.be.at.least(2);
      for (const attempt of attempts) expect(attempt.parentSpanContext?.spanId).to.equal(store?.spanContext().spanId);
    });

    it('records the exception of a 500 on the server span', async () => {
      const caller = callerContext();
      const response = await buggy().api.get(`/v1/${buggy().instance}/readCellData?tableName=t&id=r`, {
        headers: { traceparent: caller.traceparent },
      });
      expect(response.status).to.equal(500);
      const spans = await spanRecorder.trace(caller.traceId);
      const server = serverSpan(spans);
      expect(server.status.code).to.equal(SpanStatusCode.ERROR);
      expect(server.events[0]?.attributes).to.include({ 'exception.type': 'TypeError', 'exception.message': 'adapter bug: x is undefined' });
      expect(spans.find((span) => span.name === 'DataStore.readRows')?.attributes['error.type']).to.equal('INTERNAL');
    });
  });
});

describe('tracingRequested', () => {
  it('is off without OTEL_* variables: the SDK is then not loaded', () => {
    expect(tracingRequested({})).to.equal(false);
  });

  it('is on with an OTLP endpoint for all signals or for traces', () => {
    expect(tracingRequested({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' })).to.equal(true);
    expect(tracingRequested({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://collector:4318/v1/traces' })).to.equal(true);
  });

  it('is on with an explicit trace exporter (the OTLP default endpoint, console, zipkin)', () => {
    expect(tracingRequested({ OTEL_TRACES_EXPORTER: 'otlp' })).to.equal(true);
    expect(tracingRequested({ OTEL_TRACES_EXPORTER: 'console' })).to.equal(true);
  });

  it('is off with OTEL_TRACES_EXPORTER=none or OTEL_SDK_DISABLED=true, whatever else is set', () => {
    const endpoint = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' };
    expect(tracingRequested({ ...endpoint, OTEL_TRACES_EXPORTER: 'none' })).to.equal(false);
    expect(tracingRequested({ ...endpoint, OTEL_SDK_DISABLED: 'true' })).to.equal(false);
    expect(tracingRequested({ ...endpoint, OTEL_SDK_DISABLED: 'false' })).to.equal(true);
  });

  it('treats empty variables as unset', () => {
    expect(tracingRequested({ OTEL_EXPORTER_OTLP_ENDPOINT: ' ', OTEL_TRACES_EXPORTER: '' })).to.equal(false);
  });
});
