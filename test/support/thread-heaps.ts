/**
 * Loaded into a service process with `--import`: writes the heap limit of each worker thread it
 * starts, in MiB, one line each, to the file THREAD_HEAPS_FILE names.
 */
import { appendFileSync } from 'node:fs';
import type { Worker } from 'node:worker_threads';

const file = process.env['THREAD_HEAPS_FILE'];
if (file !== undefined) {
  process.on('worker', (worker: Worker) => {
    worker.once('online', () => {
      worker.getHeapStatistics().then(
        (statistics) => appendFileSync(file, `${statistics.heap_size_limit / 2 ** 20}\n`),
        () => {},
      );
    });
  });
}
