import type { IncomingMessage } from 'node:http';
import type { NodeSDK } from '@opentelemetry/sdk-node';
import type { SpanProcessor } from '@opentelemetry/sdk-trace';

/** Requests that are never traced: probes and scrapes, which would only bury the traces that matter. */
const UNTRACED_PATHS: ReadonlySet<string> = new Set(['/healthz', '/readyz', '/metrics']);

/** The query parameter that carries a row key: the caller's data, kept out of span attributes. */
const REDACTED_QUERY_PARAMETERS = ['id'];

let sdk: NodeSDK | undefined;

/**
 * tracingRequested says whether the standard OpenTelemetry variables ask for traces: an OTLP
 * endpoint (OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) or an explicit
 * OTEL_TRACES_EXPORTER other than "none", and OTEL_SDK_DISABLED not "true". When they do not, the
 * SDK is not even loaded: spans opened through @opentelemetry/api are then no-ops.
 */
export function tracingRequested(env: NodeJS.ProcessEnv): boolean {
  const value = (name: string) => env[name]?.trim() ?? '';
  if (value('OTEL_SDK_DISABLED').toLowerCase() === 'true') return false;
  const exporters = value('OTEL_TRACES_EXPORTER')
    .split(',')
    .map((name) => name.trim())
    .filter((name) => name !== '');
  if (exporters.length > 0) return !exporters.every((name) => name === 'none');
  return value('OTEL_EXPORTER_OTLP_ENDPOINT') !== '' || value('OTEL_EXPORTER_OTLP_TRACES_ENDPOINT') !== '';
}

export interface TracingOptions {
  /** Where spans go; by default the exporters the OTEL_* variables name (OTLP over HTTP/protobuf). */
  readonly spanProcessors?: SpanProcessor[];
}

/**
 * startTracing starts the OpenTelemetry Node SDK for traces only, configured by the OTEL_*
 * variables (service name, exporter, endpoint, protocol, sampler, batching). Metrics are
 * Prometheus' (/metrics) and logs go to stdout, so the SDK exports neither.
 *
 * It must run before the service's modules are imported: the instrumentations patch `http`
 * (incoming requests, named by route later on) and `@grpc/grpc-js` (the Bigtable client's calls)
 * when they are first loaded. Both are loaded with require() from CommonJS (by Koa and
 * google-gax), which require-in-the-middle hooks, so no ESM loader hook is registered.
 */
export async function startTracing(options: TracingOptions = {}): Promise<void> {
  if (sdk !== undefined) return;
  const [{ NodeSDK }, { HttpInstrumentation }, { GrpcInstrumentation }] = await Promise.all([
    import('@opentelemetry/sdk-node'),
    import('@opentelemetry/instrumentation-http'),
    import('@opentelemetry/instrumentation-grpc'),
  ]);
  // service.name from OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES when set; "kvcrud" otherwise.
  const named = Boolean(process.env['OTEL_SERVICE_NAME']?.trim()) || /(^|,)\s*service\.name\s*=/.test(process.env['OTEL_RESOURCE_ATTRIBUTES'] ?? '');
  sdk = new NodeSDK({
    ...(named ? {} : { serviceName: 'kvcrud' }),
    ...(options.spanProcessors === undefined ? {} : { spanProcessors: options.spanProcessors }),
    metricReaders: [],
    logRecordProcessors: [],
    instrumentations: [
      new HttpInstrumentation({
        ignoreIncomingRequestHook: (request: IncomingMessage) => UNTRACED_PATHS.has(pathOf(request)),
        redactedQueryParamsServer: REDACTED_QUERY_PARAMETERS,
      }),
      new GrpcInstrumentation(),
    ],
  });
  sdk.start();
}

/**
 * flushTracing exports the spans not yet sent and stops the SDK, waiting at most `timeoutMs`.
 * Called on shutdown, so the last requests' spans are not lost. Does nothing when tracing is off.
 */
export async function flushTracing(timeoutMs = 5000): Promise<void> {
  if (sdk === undefined) return;
  const stopping = sdk.shutdown();
  sdk = undefined;
  await Promise.race([stopping.catch(() => {}), new Promise((resolve) => setTimeout(resolve, timeoutMs).unref())]);
}

function pathOf(request: IncomingMessage): string {
  const url = request.url ?? '';
  const query = url.indexOf('?');
  return query === -1 ? url : url.slice(0, query);
}
