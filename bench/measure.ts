import { createHistogram, performance, type RecordableHistogram } from 'node:perf_hooks';
import { CELLS, type CaseName, nextIsRead, randomExistingKey } from './workload.ts';

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

/** A ceiling's load: which case, how many callers, for how long, and the keys of new rows. */
export interface ClosedLoopLoad {
  readonly caseName: CaseName;
  readonly connections: number;
  readonly durationMs: number;
  readonly newKey: () => string;
}

/** What a ceiling calls, straight through its store's own client. */
export interface ClosedLoopCalls {
  /** Reads a preloaded row; resolves to the number of cells found. */
  read(key: string): Promise<number>;
  /** Writes a new row of CELLS. */
  write(key: string): Promise<void>;
  /** The client calls, as failures are reported: `readRows`, `mutateRow`. */
  readonly readName: string;
  readonly writeName: string;
}

/** Runs `connections` callers in a closed loop (each waits for its answer) for the duration. */
export async function runClosedLoop(load: ClosedLoopLoad, calls: ClosedLoopCalls): Promise<LoadResult> {
  const recorder = new LoadRecorder();
  const started = performance.now();
  const end = started + load.durationMs;
  async function caller(): Promise<void> {
    while (performance.now() < end) {
      const read = nextIsRead(load.caseName);
      const callStarted = performance.now();
      try {
        if (read) {
          const cells = await calls.read(randomExistingKey());
          if (cells !== CELLS.length) throw new Error(`read ${cells} cells, expected ${CELLS.length}`);
        } else {
          await calls.write(load.newKey());
        }
        recorder.success(performance.now() - callStarted);
      } catch (error) {
        recorder.failure(`${read ? calls.readName : calls.writeName}: ${(error as Error).message}`);
      }
    }
  }
  await Promise.all(Array.from({ length: load.connections }, caller));
  return recorder.result((performance.now() - started) / 1000);
}
