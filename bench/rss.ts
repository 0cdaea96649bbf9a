import { readFileSync } from 'node:fs';

/** A process's resident set size now and at its peak (VmHWM), in MiB, from /proc (Linux). */
export function memoryOf(pid: number): { rssMb: number; peakMb: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kib = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? Number.NaN);
  return { rssMb: Math.round(kib('VmRSS') / 1024), peakMb: Math.round(kib('VmHWM') / 1024) };
}

/**
 * RssSampler watches a process's resident memory while a load runs, every 100 ms, and reports
 * the highest value seen: the peak of that load alone, where VmHWM is the peak since start.
 */
export class RssSampler {
  readonly #pid: number;
  #peakMb = 0;
  #timer: NodeJS.Timeout | undefined;

  constructor(pid: number) {
    this.#pid = pid;
  }

  start(): void {
    this.#peakMb = memoryOf(this.#pid).rssMb;
    this.#timer = setInterval(() => {
      this.#peakMb = Math.max(this.#peakMb, memoryOf(this.#pid).rssMb);
    }, 100);
  }

  /** Stops sampling and returns the peak RSS in MiB. */
  stop(): number {
    clearInterval(this.#timer);
    return Math.max(this.#peakMb, memoryOf(this.#pid).rssMb);
  }
}
