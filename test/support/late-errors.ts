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
