import { existsSync, readFileSync } from 'node:fs';

/** A process's resident set size now and at its peak (VmHWM), in MiB, from /proc (Linux). */
export function memoryOf(pid: number): { rssMb: number; peakMb: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kib = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? Number.NaN);
  return { rssMb: Math.round(kib('VmRSS') / 1024), peakMb: Math.round(kib('VmHWM') / 1024) };
}

/** Clock ticks per second of /proc/<pid>/stat times (USER_HZ); 100 on every Linux that matters. */
const TICKS_PER_SECOND = 100;

/** User and system CPU time a process has used so far, in milliseconds, at 10 ms resolution. */
export function cpuTimesMs(pid: number): { user: number; system: number } {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // Fields after the command name (which may hold spaces) start with the state, field 3.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return { user: (Number(fields[11]) * 1000) / TICKS_PER_SECOND, system: (Number(fields[12]) * 1000) / TICKS_PER_SECOND };
}

/** CPU time (user + system) a process has used so far, in milliseconds, at 10 ms resolution. */
export function cpuTimeMs(pid: number): number {
  const { user, system } = cpuTimesMs(pid);
  return user + system;
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
      // A process that ended is reported by whoever waits on it; its last figure stands.
      if (existsSync(`/proc/${this.#pid}/status`)) this.#peakMb = Math.max(this.#peakMb, memoryOf(this.#pid).rssMb);
    }, 100);
  }

  /** Stops sampling and returns the peak RSS in MiB. */
  stop(): number {
    clearInterval(this.#timer);
    return existsSync(`/proc/${this.#pid}/status`) ? Math.max(this.#peakMb, memoryOf(this.#pid).rssMb) : this.#peakMb;
  }
}

/**
 * CpuMeter measures the CPU time processes spend during a load, so a run can say where the
 * machine's cores went per request (the load generator, the service, the emulator).
 */
export class CpuMeter {
  readonly #pids: Record<string, number>;
  #start: Record<string, number> = {};

  /** `pids` names each process; the name "self" is this process. */
  constructor(pids: Record<string, number>) {
    this.#pids = pids;
  }

  start(): void {
    this.#start = this.#read();
  }

  /** CPU microseconds per operation of each process since start(). */
  perOperation(operations: number): Record<string, number> {
    const now = this.#read();
    return Object.fromEntries(
      Object.entries(now).map(([name, ms]) => [name, operations === 0 ? 0 : Math.round(((ms - (this.#start[name] ?? 0)) * 1000) / operations)]),
    );
  }

  #read(): Record<string, number> {
    return Object.fromEntries(
      Object.entries(this.#pids).map(([name, pid]) => {
        if (pid !== process.pid) return [name, cpuTimeMs(pid)];
        const usage = process.cpuUsage();
        return [name, (usage.user + usage.system) / 1000];
      }),
    );
  }
}
