/**
 * Names the test file behind an error thrown after its tests have ended. Mocha's parallel worker
 * rethrows such an error, the worker exits, and the run reports only "Workerpool Worker terminated
 * Unexpectedly", without the error or the file. Each worker prints both to stderr at once, and
 * appends them to a file that the main process prints again as it exits, after the summary, where
 * a log cut to its tail still shows them.
 */
import { appendFileSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Context } from 'mocha';

const worker = process.env['MOCHA_WORKER_ID'] !== undefined;
const reports = join(tmpdir(), `kvcrud-late-errors-${worker ? process.ppid : process.pid}.log`);
let files: string[] = [];

process.on('uncaughtExceptionMonitor', (error, origin) => {
  const report =
    `\n[late error] pid ${process.pid}, ${origin}, after or during ${files.join(', ') || 'no file yet'}:\n` +
    `${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`;
  process.stderr.write(report);
  if (worker) appendFileSync(reports, report);
});

// After each file, Mocha's worker removes every 'unhandledRejection' listener (its
// nodejs/worker.cjs), so one that the service installs once per process is gone for the files
// after: the Spanner store's, which logs the rejections its client leaves unhandled after a store
// closes ("The client has already been closed."). Between files the worker then has no listener,
// and such a rejection ends it. A service process never loses that listener; keep it here too,
// removing only Mocha's own (its runner's is an unnamed arrow function kept as `unhandled`).
if (worker) {
  const removeAll = process.removeAllListeners.bind(process);
  process.removeAllListeners = ((event?: string | symbol) => {
    if (event !== 'unhandledRejection') return removeAll(event);
    const kept = process.listeners('unhandledRejection').filter((listener) => listener.name !== '' && listener.name !== 'unhandled');
    removeAll(event);
    for (const listener of kept) process.on('unhandledRejection', listener);
    return process;
  });
}

if (!worker) {
  process.on('exit', () => {
    let text: string;
    try {
      text = readFileSync(reports, 'utf8');
    } catch {
      return;
    }
    rmSync(reports, { force: true });
    process.stderr.write(`\nerrors thrown in test workers outside their tests:${text}`);
  });
}

export const mochaHooks = {
  beforeAll(this: Context): void {
    const root = this.test?.parent;
    files = [...new Set((root?.suites ?? []).map((suite) => suite.file).filter((file) => file !== undefined))];
  },
};
