/**
 * V8 sizes its heap from the machine's memory, not from what the process may use: on a large
 * machine it lets garbage pile up to hundreds of MB before a major collection, and in a container
 * Node sees the cgroup limit but V8 still gives the old generation a quarter of it at most and the
 * young generation its small default. kvcrud chooses both sizes itself, from the memory limit it
 * runs under, so `npm start` and a bare `node dist/index.js` need no flags.
 */

import { setFlagsFromString } from 'node:v8';

const MIB = 1024 * 1024;

/** With no memory limit (a laptop, a VM), the service sizes itself as for a 512 MiB container. */
export const UNLIMITED_BUDGET_MIB = 512;

/** The flags that choose the heap's size or growth, whoever sets them (NODE_OPTIONS, the command line). */
const HEAP_FLAGS = /--max-old-space-size|--max-semi-space-size|--max-heap-size|--heap-growing-percent/;

export interface HeapChoice {
  /** The memory the choice is made for, in MiB. */
  readonly budgetMiB: number;
  /** Where that budget came from. */
  readonly source: 'cgroup memory limit' | 'no memory limit';
  readonly maxOldSpaceMiB: number;
  readonly maxSemiSpaceMiB: number;
  /** How far the old generation may grow past its live size before a major collection, in %; 0 leaves it to V8. */
  readonly heapGrowingPercent: number;
}

/**
 * Up to this old space, the service sets how far the old generation grows between major
 * collections. V8 caps that growth by the old space's maximum: at most 1.3 × the live heap at
 * 256 MiB, 1.53 × at 512 MiB, 4 × from 1 GiB on (Node's builds, without pointer compression). On
 * the small heaps, most of what each major collection marks again is the same code and module
 * sources, so rarer collections save CPU. The growth stays bounded: V8 never lets the
 * limit pass halfway from the live heap to the maximum.
 */
const GROWING_OLD_SPACE_MAX_MIB = 512;
const HEAP_GROWING_PERCENT = 60;

/**
 * heapChoice: half the budget for the old generation (the rest is the young generation, code,
 * buffers outside the heap and the SQLite threads), and 16 MiB semi-spaces, which keep short-lived
 * request garbage out of the old generation, from a 512 MiB budget on (8 MiB below it).
 * 256 MiB of old space kept peak RSS within the memory target with the throughput of an unbounded
 * heap; much less made V8 collect all the time and cut throughput sharply, so a smaller budget
 * gets no less than 128 MiB.
 *
 * Up to 512 MiB of old space the old generation may also grow by 60 % of its live size between
 * major collections, more than V8 allows by itself. That halved the major collections (each
 * marking the whole live heap on a second core) and cut CPU per request, for a little more peak
 * RSS; a growth of 100 % cut a little more CPU but took peak RSS past the target (bench/heap.ts).
 * The figures: docs/performance.md, "How far the old generation grows between major collections".
 */
export function heapChoice(constrainedBytes: number, totalBytes: number): HeapChoice {
  const limited = constrainedBytes > 0 && constrainedBytes < totalBytes;
  const budgetMiB = limited ? Math.floor(constrainedBytes / MIB) : UNLIMITED_BUDGET_MIB;
  const maxOldSpaceMiB = Math.max(128, Math.floor(budgetMiB / 2));
  return {
    budgetMiB,
    source: limited ? 'cgroup memory limit' : 'no memory limit',
    maxOldSpaceMiB,
    maxSemiSpaceMiB: budgetMiB >= 512 ? 16 : 8,
    heapGrowingPercent: maxOldSpaceMiB <= GROWING_OLD_SPACE_MAX_MIB ? HEAP_GROWING_PERCENT : 0,
  };
}

/** Whether the heap's size or growth was chosen by whoever started the process. */
export function heapSizeChosenBy(execArgv: readonly string[], nodeOptions: string | undefined): boolean {
  return execArgv.some((argument) => HEAP_FLAGS.test(argument)) || HEAP_FLAGS.test(nodeOptions ?? '');
}

export function heapFlags(choice: HeapChoice): string[] {
  const growing = choice.heapGrowingPercent > 0 ? [`--heap-growing-percent=${choice.heapGrowingPercent}`] : [];
  return [`--max-old-space-size=${choice.maxOldSpaceMiB}`, `--max-semi-space-size=${choice.maxSemiSpaceMiB}`, ...growing];
}

/**
 * Lets each worker thread's heap be sized by its own `resourceLimits`. The flags that size the
 * main thread's heap would size every worker thread's too, overriding those limits
 * (nodejs/node#43991): the embedded store's SQLite threads each took 16 MiB semi-spaces and the
 * main thread's old space. V8 reads the flags when it makes an isolate, so clearing them once the
 * main thread runs leaves its heap as chosen and changes only the threads started later. The
 * growing percentage is read at every collection, so it stays, for the threads too: each thread's
 * limit is still capped halfway to the maximum its own limits give.
 */
export function releaseHeapFlags(): void {
  for (const flag of ['--max-old-space-size=0', '--max-semi-space-size=0', '--max-heap-size=0']) setFlagsFromString(flag);
}

/**
 * The C allocator's settings the process replaces itself with, unless they were set by whoever
 * started it. glibc serves a block of 128 KiB or more with a mapping of its own, until such a block
 * is freed: it then raises that threshold (up to 32 MiB) and serves later large blocks, the
 * Buffers of large values and bodies, from its heap, where freed memory stays in the process.
 * Fixing the threshold gives each large block back when it is freed, which cut the peak RSS of
 * many large scan pages at once by about a third (bench/large-pages.ts; docs/performance.md). Other C
 * libraries ignore the variable.
 */
export function allocatorEnvironment(env: NodeJS.ProcessEnv): Record<string, string> {
  return env['MALLOC_MMAP_THRESHOLD_'] === undefined ? { MALLOC_MMAP_THRESHOLD_: String(128 * 1024) } : {};
}

/** Tells the process that replaced itself what it chose, for its start-up log line. */
export const HEAP_CHOICE_VARIABLE = 'KVCRUD_HEAP_CHOICE';

/** The heap as the start-up line reports it: its limit, and who chose it. */
export function describeHeap(heapLimitBytes: number, chosen: string | undefined): Record<string, unknown> {
  const limitMiB = Math.round(heapLimitBytes / MIB);
  if (chosen === undefined) return { heapLimitMiB: limitMiB, heapChosenBy: 'NODE_OPTIONS or node flags' };
  const choice = JSON.parse(chosen) as HeapChoice;
  return { heapLimitMiB: limitMiB, heapChosenBy: `kvcrud, for ${choice.budgetMiB} MiB (${choice.source})`, ...choice };
}
