import { randomBytes } from 'node:crypto';
import { type IncomingMessage, type Server, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import { ApiClient } from '../support/api-client.ts';
import { emulatorHost } from '../support/emulator.ts';
import { type ServiceProcess, runService, serviceEnv } from '../support/service-process.ts';
import { spanTree } from '../support/span-tree.ts';
import { randomInstanceId } from '../support/test-app.ts';

interface OtlpRequest {
  readonly path: string;
  readonly contentType: string;
  readonly body: Buffer;
}

/** A stand-in OpenTelemetry collector: an HTTP server that keeps what is POSTed to it. */
async function otlpReceiver(): Promise<{ endpoint: string; received: OtlpRequest[]; close: () => Promise<void> }> {
  const received: OtlpRequest[] = [];
  const server: Server = createServer((request: IncomingMessage, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      received.push({ path: request.url ?? '', contentType: request.headers['content-type'] ?? '', body: Buffer.concat(chunks) });
      // An empty ExportTraceServiceResponse: everything accepted.
      response.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    endpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    received,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

/**
 * Whether the exported protobuf holds the trace and every named span. In OTLP's protobuf, a trace
 * id is its 16 raw bytes and a span name its UTF-8 bytes, so both can be found without decoding.
 */
function exported(received: readonly OtlpRequest[], traceId: string, names: readonly string[]): boolean {
  const body = Buffer.concat(received.map((request) => request.body));
  return body.includes(Buffer.from(traceId, 'hex')) && names.every((name) => body.includes(Buffer.from(name)));
}

interface OtlpJsonSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  startTimeUnixNano: string;
}

/** The spans of one trace in OTLP/JSON export requests, in the order they started. */
function jsonSpansOf(received: readonly OtlpRequest[], traceId: string): OtlpJsonSpan[] {
  return received
    .flatMap((request) => (JSON.parse(request.body.toString('utf8')) as { resourceSpans: Array<{ scopeSpans: Array<{ spans: OtlpJsonSpan[] }> }> }).resourceSpans)
    .flatMap((resource) => resource.scopeSpans.flatMap((scope) => scope.spans))
    .filter((span) => span.traceId === traceId)
    .sort((a, b) => (BigInt(a.startTimeUnixNano) < BigInt(b.startTimeUnixNano) ? -1 : 1));
}

async function waitFor(condition: () => boolean, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`${what} within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

function traceparent(): { traceId: string; header: string } {
  const traceId = randomBytes(16).toString('hex');
  return { traceId, header: `00-${traceId}-${randomBytes(8).toString('hex')}-01` };
}

/** The JSON lines the service wrote for one request id. */
function logLinesOf(service: ServiceProcess, requestId: string): Array<Record<string, unknown>> {
  return service.output
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as Record<string, unknown>)
    .filter((line) => line['requestId'] === requestId);
}

const READ_TREE = ['GET /v1/:instanceID/readCellData', 'DataStore.readRows', 'grpc.google.bigtable.v2.Bigtable/ReadRows'];

describe('the service process', () => {
  describe('with OTEL_EXPORTER_OTLP_ENDPOINT', () => {
    let receiver: Awaited<ReturnType<typeof otlpReceiver>>;
    beforeEach(async () => {
      receiver = await otlpReceiver();
    });
    afterEach(async () => {
      await receiver.close();
    });

    it('exports the span tree of a request, the gRPC calls under the store call, over OTLP/HTTP', async function () {
      const instance = randomInstanceId();
      const service = await runService(
        serviceEnv(instance, emulatorHost(this), {
          OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint,
          // JSON, so that the test can read the parent of each span.
          OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
          OTEL_BSP_SCHEDULE_DELAY: '100',
        }),
      );
      try {
        const api = await ApiClient.connect(service.baseUrl);
        const trace = traceparent();
        const headers = { traceparent: trace.header, 'x-request-id': 'exported-1' };
        await api.post(`/v1/${instance}/createTable`, { tableName: 't', columnFamily: 'cf' });
        expect((await api.get(`/v1/${instance}/readCellData?tableName=t&id=r`, { headers })).status).to.equal(404);

        await waitFor(() => jsonSpansOf(receiver.received, trace.traceId).length === 3, 10_000, 'no export of the three spans');
        expect(spanTree(jsonSpansOf(receiver.received, trace.traceId))).to.equal(
          ['GET /v1/:instanceID/readCellData', '  DataStore.readRows', '    grpc.google.bigtable.v2.Bigtable/ReadRows'].join('\n'),
        );
        for (const request of receiver.received) {
          expect(request).to.deep.include({ path: '/v1/traces', contentType: 'application/json' });
        }
        // service.name defaults to kvcrud.
        expect(receiver.received[0]?.body.toString()).to.contain('{"key":"service.name","value":{"stringValue":"kvcrud"}}');
        expect(logLinesOf(service, 'exported-1')[0]).to.include({ traceId: trace.traceId });
      } finally {
        expect(await service.stop()).to.equal(0);
      }
    });

    it('on SIGTERM, exports (protobuf, the default) the spans it had not sent yet before exiting', async function () {
      const instance = randomInstanceId();
      const service = await runService(
        serviceEnv(instance, emulatorHost(this), {
          OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint,
          // Batches would otherwise wait ten minutes: only the shutdown sends them.
          OTEL_BSP_SCHEDULE_DELAY: '600000',
          OTEL_SERVICE_NAME: 'kvcrud-flush-check',
        }),
      );
      const trace = traceparent();
      await fetch(`${service.baseUrl}/v1/${instance}/readCellData?tableName=t&id=r`, { headers: { traceparent: trace.header } });
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(receiver.received).to.deep.equal([]);
      expect(await service.stop('SIGTERM')).to.equal(0);
      expect(receiver.received.map((request) => [request.path, request.contentType])).to.deep.equal([['/v1/traces', 'application/x-protobuf']]);
      expect(exported(receiver.received, trace.traceId, [...READ_TREE, 'kvcrud-flush-check'])).to.equal(true);
    });

    it('sends nothing with OTEL_SDK_DISABLED=true, and still logs the caller trace id', async function () {
      const instance = randomInstanceId();
      const service = await runService(
        serviceEnv(instance, emulatorHost(this), {
          OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint,
          OTEL_BSP_SCHEDULE_DELAY: '50',
          OTEL_SDK_DISABLED: 'true',
        }),
      );
      try {
        const trace = traceparent();
        await fetch(`${service.baseUrl}/v1/${instance}/readCellData?tableName=t&id=r`, {
          headers: { traceparent: trace.header, 'x-request-id': 'untraced-1' },
        });
        await new Promise((resolve) => setTimeout(resolve, 500));
        expect(receiver.received).to.deep.equal([]);
        const [line] = logLinesOf(service, 'untraced-1');
        expect(line).to.include({ traceId: trace.traceId });
        expect(line).to.not.have.property('spanId');
      } finally {
        await service.stop();
      }
    });
  });

  describe('with METRICS_PORT', () => {
    it('serves /metrics on that port only, counting the API requests', async function () {
      const instance = randomInstanceId();
      const service = await runService(serviceEnv(instance, emulatorHost(this), { METRICS_PORT: '0' }));
      try {
        await waitFor(() => service.output.some((line) => line.includes('"metricsPort"')), 5000, 'no metrics listening line');
        const metricsLine = service.output.find((line) => line.includes('"metricsPort"')) ?? '{}';
        const metricsUrl = `http://127.0.0.1:${(JSON.parse(metricsLine) as { metricsPort: number }).metricsPort}`;

        const api = await ApiClient.connect(service.baseUrl);
        expect(api.contract.document['paths']).to.not.have.property('/metrics');
        const onApiPort = await api.get('/metrics');
        expect([onApiPort.status, onApiPort.body.code]).to.deep.equal([404, 'ROUTE_NOT_FOUND']);

        const metrics = await fetch(`${metricsUrl}/metrics`);
        expect(metrics.status).to.equal(200);
        expect(await metrics.text()).to.contain('kvcrud_http_request_duration_seconds_count{method="GET",route="/openapi.json",status_code="200"} 1');
        const elsewhere = await fetch(`${metricsUrl}/v1/${instance}/readCellData?tableName=t&id=r`);
        expect(elsewhere.status).to.equal(404);
        expect(elsewhere.headers.get('content-type')).to.equal('application/problem+json');
      } finally {
        await service.stop();
      }
    });
  });

  describe('LOG_LEVEL', () => {
    it('at its default (info), logs API requests but not successful probes', async function () {
      const instance = randomInstanceId();
      const service = await runService(serviceEnv(instance, emulatorHost(this)));
      try {
        await fetch(`${service.baseUrl}/healthz`, { headers: { 'x-request-id': 'probe-info' } });
        await fetch(`${service.baseUrl}/openapi.json`, { headers: { 'x-request-id': 'api-info' } });
        await waitFor(() => logLinesOf(service, 'api-info').length === 1, 2000, 'no line for the API request');
        expect(logLinesOf(service, 'probe-info')).to.deep.equal([]);
      } finally {
        await service.stop();
      }
    });

    it('at debug, logs successful probes too', async function () {
      const instance = randomInstanceId();
      const service = await runService(serviceEnv(instance, emulatorHost(this), { LOG_LEVEL: 'debug' }));
      try {
        await fetch(`${service.baseUrl}/healthz`, { headers: { 'x-request-id': 'probe-debug' } });
        await waitFor(() => logLinesOf(service, 'probe-debug').length === 1, 2000, 'no line for the probe');
        expect(logLinesOf(service, 'probe-debug')[0]).to.include({ level: 'debug', route: '/healthz', status: 200 });
      } finally {
        await service.stop();
      }
    });
  });
});
