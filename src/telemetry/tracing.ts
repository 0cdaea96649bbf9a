import type { IncomingMessage } from 'node:http';
import type { NodeSDK } from '@opentelemetry/sdk-node';
import type { SpanProcessor } from '@opentelemetry/sdk-trace';

/** Requests that are never traced: probes and scrapes, which would only bury the traces that matter. */
const UNTRACED_PATHS: ReadonlySet<string> = new Set(['/healthz', '/readyz', '/metrics']);

/** What stands in for a redacted value, as the HTTP instrumentation writes it for query parameters. */
const REDACTED = 'REDACTED';

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
  const [{ NodeSDK }, { HttpInstrumentation }, { GrpcInstrumentation }, { ROW_KEY_NAMES }] = await Promise.all([
    import('@opentelemetry/sdk-node'),
    import('@opentelemetry/instrumentation-http'),
    import('@opentelemetry/instrumentation-grpc'),
    // Query parameters that carry row keys, the caller's data, are kept out of span attributes.
    import('../http/validation/row-key-names.ts'),
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
        redactedQueryParamsServer: [...ROW_KEY_NAMES],
        // Replaces the url.path the instrumentation takes from the request.
        startIncomingSpanHook: (request: IncomingMessage) => ({ 'url.path': redactPath(pathOf(request)) }),
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

/**
 * redactPath takes the row key out of a v2 path: the segment after `/rows/`, up to a `:verb`
 * (`rows/{key}:mutate`; a colon in a key is sent as %3A). Span attributes get route templates and
 * this; never a key.
 */
export function redactPath(path: string): string {
  return path.replace(/\/rows\/[^/]*/gi, (segment) => `/rows/${REDACTED}${/:[A-Za-z]+$/.exec(segment)?.[0] ?? ''}`);
}

function pathOf(request: IncomingMessage): string {
  const url = request.url ?? '';
  const query = url.indexOf('?');
  return query === -1 ? url : url.slice(0, query);
}
