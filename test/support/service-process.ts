import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { TEST_PROJECT } from './test-app.ts';

const ROOT = new URL('../../', import.meta.url).pathname;

export interface ServiceProcess {
  readonly process: ChildProcess;
  readonly baseUrl: string;
  /** Every line the service wrote to stdout and stderr so far. */
  readonly output: string[];
  /** Sends the signal and resolves with the exit code. */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/** An environment with nothing of the caller's but PATH and HOME, so no stray GOOGLE_* leaks in. */
export function cleanEnv(vars: Record<string, string>): NodeJS.ProcessEnv {
  return { PATH: process.env['PATH'] ?? '', HOME: process.env['HOME'] ?? '/tmp', ...vars };
}

/** A clean environment serving one instance from the Bigtable store at `emulatorHost`, on a free port. */
export function serviceEnv(instance: string, emulatorHost: string, vars: Record<string, string> = {}): NodeJS.ProcessEnv {
  return cleanEnv({ PORT: '0', GOOGLE_CLOUD_PROJECT: TEST_PROJECT, INSTANCE_IDS: instance, BIGTABLE_EMULATOR_HOST: emulatorHost, ...vars });
}

/**
 * runService starts the real service as its own process (by default `node src/index.ts`; pass
 * a command to run e.g. `npm start`) and resolves when it logs that it listens.
 */
export async function runService(
  env: NodeJS.ProcessEnv,
  command: readonly string[] = [process.execPath, 'src/index.ts'],
): Promise<ServiceProcess> {
  const [file = '', ...args] = command;
  // Its own process group, so stop() also reaches the children of `npm start`.
  const child = spawn(file, args, { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  const output: string[] = [];
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no "listening" line within 60 s:\n${output.join('\n')}`)), 60_000);
    for (const stream of [child.stdout, child.stderr]) {
      createInterface({ input: stream }).on('line', (line) => {
        output.push(line);
        const match = /"port":(\d+)/.exec(line);
        if (match?.[1] !== undefined && line.includes('listening')) {
          clearTimeout(timer);
          resolve(Number(match[1]));
        }
      });
    }
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`the service exited (${code}) before listening:\n${output.join('\n')}`));
    });
  });
  return {
    process: child,
    baseUrl: `http://127.0.0.1:${port}`,
    output,
    async stop(signal = 'SIGTERM') {
      if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
      const exited = once(child, 'exit');
      process.kill(-(child.pid ?? 0), signal);
      const [code] = (await exited) as [number | null];
      return code;
    },
  };
}

/** Runs the service expecting it to exit by itself; resolves with its exit code and output. */
export async function runServiceToExit(env: NodeJS.ProcessEnv): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, ['src/index.ts'], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const [code] = (await once(child, 'exit')) as [number | null];
  return { code, stdout, stderr };
}
