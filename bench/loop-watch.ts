/**
 * Loaded into the service by bench/event-loop.ts (`node --import ./bench/loop-watch.ts`): watches
 * its main thread with StallMonitor and, on each SIGUSR2, writes what it saw since the last one as
 * a `loop-stalls {json}` line to stderr and starts again. Its longest CPU stretch is the figure
 * a shared machine does not blur: the main thread's own CPU time between two ticks of a 1 ms timer,
 * which the time it waits for a core does not add to.
 */
import { writeSync } from 'node:fs';
import { isMainThread } from 'node:worker_threads';
import { StallMonitor } from '../test/support/loop-stalls.ts';

if (isMainThread) {
  let monitor = new StallMonitor();
  monitor.start();
  process.on('SIGUSR2', () => {
    const stalls = monitor.stop();
    writeSync(2, `loop-stalls ${JSON.stringify(stalls)}\n`);
    monitor = new StallMonitor();
    monitor.start();
  });
}
