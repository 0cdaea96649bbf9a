/**
 * Starts the service's tracing (src/telemetry/tracing.ts: the same SDK set-up and
 * instrumentations as the process) in the test process, with spans going to memory instead of an
 * exporter. Mocha loads this first (.mocharc.json `require`), before any test imports Koa or the
 * Bigtable client, as the process entry starts tracing before it imports the service.
 */
import { createRequire } from 'node:module';
import { SpanKind } from '@opentelemetry/api';
import type { ReadableSpan, SpanProcessor } from '@opentelemetry/sdk-trace';
import { startTracing } from '../../src/telemetry/tracing.ts';
import { spanTree as drawTree } from './span-tree.ts';

/**
 * SpanRecorder keeps the spans that end while it records (between start() and stop()), so suites
 * that do not look at spans do not pile them up.
 */
class SpanRecorder implements SpanProcessor {
  #recording = false;
  #spans: ReadableSpan[] = [];

  start(): void {
    if (loadedEarly !== undefined) {
      throw new Error(
        `tracing started after ${loadedEarly} was loaded, so it is not instrumented: ` +
          'run mocha with `--require test/support/tracing.ts` first, as .mocharc.json does',
      );
    }
    this.#recording = true;
    this.#spans = [];
  }

  stop(): void {
    this.#recording = false;
    this.#spans = [];
  }

  /** The ended spans of one trace, in the order they started. */
  spansOf(traceId: string): ReadableSpan[] {
    return this.#spans
      .filter((span) => span.spanContext().traceId === traceId)
      .sort((a, b) => a.startTime[0] - b.startTime[0] || a.startTime[1] - b.startTime[1]);
  }

  /**
   * Waits until the server span of the trace has ended and returns the trace's spans. The server
   * span ends once the response is sent, so the test may see the response first.
   */
  async trace(traceId: string): Promise<ReadableSpan[]> {
    const deadline = Date.now() + 3000;
    for (;;) {
      const spans = this.spansOf(traceId);
      if (spans.some((span) => span.kind === SpanKind.SERVER)) return spans;
      if (Date.now() > deadline) throw new Error(`no server span of trace ${traceId} within 3 s`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }

  onStart(): void {}

  onEnd(span: ReadableSpan): void {
    if (this.#recording) this.#spans.push(span);
  }

  async forceFlush(): Promise<void> {}

  async shutdown(): Promise<void> {}
}

export const spanRecorder = new SpanRecorder();

// The instrumentations patch http (through Koa) and @grpc/grpc-js as they load: too late once they have.
const loadedEarly = Object.keys(createRequire(import.meta.url).cache).find((path) => /\/node_modules\/(koa|@grpc\/grpc-js)\//.test(path));
await startTracing({ spanProcessors: [spanRecorder] });

/** The tree of span names (see span-tree.ts) of spans recorded in this process. */
export function spanTree(spans: readonly ReadableSpan[]): string {
  return drawTree(spans.map((span) => ({ name: span.name, spanId: span.spanContext().spanId, parentSpanId: span.parentSpanContext?.spanId })));
}
