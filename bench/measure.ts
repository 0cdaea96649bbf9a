import { createHistogram, type RecordableHistogram } from 'node:perf_hooks';

/** The figures of one load run, the same for the ceiling and the service. */
export interface LoadResult {
  /** Successful operations (2xx over HTTP, no error over gRPC). */
  readonly ok: number;
  /** Failed operations: non-2xx answers, socket errors, timeouts, gRPC errors. */
  readonly errors: number;
  readonly seconds: number;
  readonly reqPerSec: number;
  readonly latencyMs: { readonly p50: number; readonly p99: number; readonly max: number };
  /** The first failure seen, to tell what went wrong. */
  readonly firstError?: string;
}

/**
 * LoadRecorder counts outcomes and keeps latencies in microseconds in an HDR histogram (Node's
 * own), so the ceiling and the service are summarised by the same code at the same resolution.
 */
export class LoadRecorder {
  readonly #latencies: RecordableHistogram = createHistogram();
  #ok = 0;
  #errors = 0;
  #firstError: string | undefined;

  success(latencyMs: number): void {
    this.#ok++;
    this.#latencies.record(Math.max(1, Math.round(latencyMs * 1000)));
  }

  failure(description: string): void {
    this.#errors++;
    this.#firstError ??= description;
  }

  result(seconds: number): LoadResult {
    const ms = (micros: number) => Math.round(micros) / 1000;
    const empty = this.#ok === 0;
    return {
      ok: this.#ok,
      errors: this.#errors,
      seconds: Math.round(seconds * 100) / 100,
      reqPerSec: Math.round(this.#ok / seconds),
      latencyMs: {
        p50: empty ? 0 : ms(this.#latencies.percentile(50)),
        p99: empty ? 0 : ms(this.#latencies.percentile(99)),
        max: empty ? 0 : ms(this.#latencies.max),
      },
      ...(this.#firstError === undefined ? {} : { firstError: this.#firstError }),
    };
  }
}
