import { monitorEventLoopDelay, performance } from 'node:perf_hooks';

export interface Stalls {
  /** monitorEventLoopDelay's largest delay (ms). */
  readonly maxDelayMs: number;
  readonly p99DelayMs: number;
  /** The longest time between two ticks of a 1 ms timer (ms, wall clock)... */
  readonly longestGapMs: number;
  /** ...and the CPU time the main thread spent in it: less than the gap when the machine's other processes had the core. */
  readonly longestGapCpuMs: number;
  /** The most CPU time the main thread spent between two ticks (ms): its longest stretch of work without yielding. */
  readonly maxCpuStretchMs: number;
}

/**
 * StallMonitor watches the main thread's event loop while a load runs. On a shared machine a delay
 * may be the process waiting for a core rather than code holding the loop, so beside
 * monitorEventLoopDelay it times the gaps between ticks of a 1 ms timer with the main thread's
 * own CPU time (process.threadCpuUsage), which tells the two apart.
 */
export class StallMonitor {
  readonly #delay = monitorEventLoopDelay({ resolution: 1 });
  #timer: NodeJS.Timeout | undefined;
  #longestGap = 0;
  #longestGapCpu = 0;
  #maxCpu = 0;

  start(): void {
    this.#delay.enable();
    let wall = performance.now();
    let cpu = threadCpuMs();
    this.#timer = setInterval(() => {
      const nowWall = performance.now();
      const nowCpu = threadCpuMs();
      const gap = nowWall - wall;
      const used = nowCpu - cpu;
      if (gap > this.#longestGap) {
        this.#longestGap = gap;
        this.#longestGapCpu = used;
      }
      this.#maxCpu = Math.max(this.#maxCpu, used);
      wall = nowWall;
      cpu = nowCpu;
    }, 1);
    // Watching keeps no process alive.
    this.#timer.unref();
  }

  stop(): Stalls {
    clearInterval(this.#timer);
    this.#delay.disable();
    const ms = (value: number) => Math.round(value * 10) / 10;
    return {
      maxDelayMs: ms(this.#delay.max / 1e6),
      p99DelayMs: ms(this.#delay.percentile(99) / 1e6),
      longestGapMs: ms(this.#longestGap),
      longestGapCpuMs: ms(this.#longestGapCpu),
      maxCpuStretchMs: ms(this.#maxCpu),
    };
  }
}

function threadCpuMs(): number {
  const usage = process.threadCpuUsage();
  return (usage.user + usage.system) / 1000;
}

/** One line for a report. */
export function formatStalls(stalls: Stalls): string {
  return (
    `event loop delay max ${stalls.maxDelayMs} ms (p99 ${stalls.p99DelayMs} ms); longest gap ${stalls.longestGapMs} ms ` +
    `of which main-thread CPU ${stalls.longestGapCpuMs} ms; longest CPU stretch ${stalls.maxCpuStretchMs} ms`
  );
}
