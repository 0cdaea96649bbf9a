import { execFile } from 'node:child_process';

export interface PromtoolResult {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs promtool with the arguments; resolves with its exit code and output, whatever the code. */
export function runPromtool(promtool: string, args: readonly string[], cwd?: string): Promise<PromtoolResult> {
  return new Promise((resolve) => {
    execFile(promtool, args, { cwd, maxBuffer: 16 * 1024 * 1024 }, (error, stdout, stderr) => {
      const code = error === null ? 0 : typeof error.code === 'number' ? error.code : 1;
      resolve({ code, stdout, stderr });
    });
  });
}

let found: Promise<string | Error> | undefined;
let warned = false;

/**
 * promtoolBinary returns the path of promtool (PROMTOOL, or promtool on PATH, from Debian's
 * prometheus package: scripts/install-promtool.sh), or skips the calling suite loudly when there
 * is none; under CI=true that fails instead.
 */
export async function promtoolBinary(context: Mocha.Context): Promise<string> {
  const candidate = process.env['PROMTOOL'] ?? 'promtool';
  found ??= runPromtool(candidate, ['--version']).then((result) =>
    result.code === 0 ? candidate : new Error(`${candidate} --version exited ${result.code}: ${result.stderr.trim()}`),
  );
  const promtool = await found;
  if (typeof promtool === 'string') return promtool;
  if (process.env['CI'] === 'true') throw new Error(`CI=true but promtool is not available: ${promtool.message}`);
  if (!warned) {
    warned = true;
    process.stderr.write(`\n  !!! No promtool (${promtool.message}): ALERTING RULE TESTS ARE SKIPPED. Run scripts/install-promtool.sh to install it.\n\n`);
  }
  context.skip();
}
