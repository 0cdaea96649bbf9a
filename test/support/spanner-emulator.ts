import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { closedPort } from './fake-backends.ts';

/** Where the Cloud SDK installs the Spanner emulator's gRPC server (see DEVELOPERS.md); SPANNER_EMULATOR overrides it. */
export const SPANNER_EMULATOR = process.env['SPANNER_EMULATOR'] ?? '/usr/lib/google-cloud-sdk/bin/cloud_spanner_emulator/emulator_main';

let shared: Promise<SpannerEmulator> | undefined;
let warned = false;

export interface SpannerEmulator {
  /** host:port */
  readonly host: string;
  readonly port: number;
  readonly process: ChildProcess;
  /** Stops it: SIGKILL for a crash, SIGTERM otherwise. */
  stop(signal?: NodeJS.Signals): Promise<void>;
}

/** Whether the emulator is installed. */
export function spannerEmulatorAvailable(): boolean {
  return existsSync(SPANNER_EMULATOR);
}

/**
 * requireSpanner skips the calling suite or test (loudly, once per run) when the emulator is not
 * installed, and fails it under CI=true, where every store must be tested.
 */
export function requireSpanner(context: Mocha.Context): void {
  if (spannerEmulatorAvailable()) return;
  if (process.env['CI'] === 'true') throw new Error(`CI=true but the Spanner emulator is not at ${SPANNER_EMULATOR}`);
  if (!warned) {
    warned = true;
    process.stderr.write(`\n  !!! No Spanner emulator at ${SPANNER_EMULATOR}: SPANNER TESTS ARE SKIPPED. Install google-cloud-cli-spanner-emulator or set SPANNER_EMULATOR.\n\n`);
  }
  context.skip();
}

/**
 * sharedSpannerEmulator is one emulator for the whole test run, started on first use and stopped
 * when the run ends. Suites share it through fresh Spanner instances, so none sees another's data.
 */
export function sharedSpannerEmulator(): Promise<SpannerEmulator> {
  shared ??= spawnSpannerEmulator().then((emulator) => {
    process.once('exit', () => emulator.process.kill('SIGKILL'));
    return emulator;
  });
  return shared;
}

/** Stops the shared emulator, if one was started. */
export async function stopSharedSpannerEmulator(): Promise<void> {
  if (shared === undefined) return;
  const emulator = await shared.catch(() => undefined);
  shared = undefined;
  await emulator?.stop();
}

/** Starts an emulator_main on `port` (by default a free one) and waits until it serves. */
export async function spawnSpannerEmulator(port?: number): Promise<SpannerEmulator> {
  for (let attempt = 0; ; attempt++) {
    const chosen = port ?? (await closedPort());
    try {
      return await start(chosen);
    } catch (error) {
      if (port !== undefined || attempt >= 4) throw error;
    }
  }
}

function start(port: number): Promise<SpannerEmulator> {
  const child = spawn(SPANNER_EMULATOR, ['--host_port', `127.0.0.1:${port}`], { stdio: ['ignore', 'pipe', 'pipe'] });
  const output: string[] = [];
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`the Spanner emulator did not start on port ${port} within 15 s:\n${output.join('\n')}`));
    }, 15_000);
    child.once('error', reject);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`the Spanner emulator exited (${code}) before it was ready:\n${output.join('\n')}`));
    });
    createInterface({ input: child.stdout }).on('line', (line) => output.push(line));
    createInterface({ input: child.stderr }).on('line', (line) => {
      output.push(line);
      if (!line.includes('Server address')) return;
      clearTimeout(timer);
      child.removeAllListeners('exit');
      resolve({
        host: `127.0.0.1:${port}`,
        port,
        process: child,
        async stop(signal = 'SIGTERM') {
          if (child.exitCode !== null || child.signalCode !== null) return;
          const exited = new Promise((done) => child.once('exit', done));
          child.kill(signal);
          await exited;
        },
      });
    });
  });
}
