/**
 * Names the test file behind an error thrown after its tests have ended. Mocha's parallel worker
 * rethrows such an error, the worker exits, and the run reports only "Workerpool Worker terminated
 * Unexpectedly", without the error or the file. This prints both to stderr first, and appends them
 * to $KVCRUD_LATE_ERRORS when that names a file.
 */
import { appendFileSync } from 'node:fs';
import type { Context } from 'mocha';

let files: string[] = [];

process.on('uncaughtExceptionMonitor', (error, origin) => {
  const report =
    `\n[late error] pid ${process.pid}, ${origin}, after or during ${files.join(', ') || 'no file yet'}:\n` +
    `${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`;
  process.stderr.write(report);
  const path = process.env.KVCRUD_LATE_ERRORS;
  if (path) appendFileSync(path, report);
});

export const mochaHooks = {
  beforeAll(this: Context): void {
    const root = this.test?.parent;
    files = [...new Set((root?.suites ?? []).map((suite) => suite.file).filter((file) => file !== undefined))];
  },
};
