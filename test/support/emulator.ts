import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createInterface } from 'node:readline';

/** Where the Cloud SDK installs the Bigtable emulator (see DEVELOPERS.md); CBT_EMULATOR overrides it. */
export const EMULATOR_BINARY = process.env['CBT_EMULATOR'] ?? '/usr/lib/google-cloud-sdk/platform/bigtable-emulator/cbtemulator';

let emulator: ChildProcess | undefined;
let host: string | undefined = process.env['BIGTABLE_EMULATOR_HOST'] || undefined;
let warned = false;

/**
 * startEmulator gives the test run a Bigtable emulator: the one named by BIGTABLE_EMULATOR_HOST,
 * or a fresh one on a free port. Without either, integration suites skip, unless CI=true, where
 * a missing emulator fails the run.
 */
export async function startEmulator(): Promise<void> {
  if (host !== undefined) return;
  if (!existsSync(EMULATOR_BINARY)) {
    if (process.env['CI'] === 'true') {
      throw new Error(`CI=true but the Bigtable emulator is not at ${EMULATOR_BINARY} and BIGTABLE_EMULATOR_HOST is unset`);
    }
    return;
  }
  const started = await spawnEmulator();
  emulator = started.process;
  host = started.host;
  // Mocha's parallel workers start after this, in processes of their own: they find it here.
  process.env['BIGTABLE_EMULATOR_HOST'] = host;
}

/** Stops the emulator startEmulator spawned, if any. */
export async function stopEmulator(): Promise<void> {
  if (emulator === undefined) return;
  const exited = new Promise((resolve) => emulator?.once('exit', resolve));
  emulator.kill('SIGTERM');
  await exited;
  emulator = undefined;
}

/**
 * emulatorHost returns host:port of the emulator, or skips the calling suite or test (loudly,
 * once per run) when there is none.
 */
export function emulatorHost(context: Mocha.Context): string {
  if (host !== undefined) return host;
  if (!warned) {
    warned = true;
    process.stderr.write(
      `\n  !!! No Bigtable emulator (${EMULATOR_BINARY} missing, BIGTABLE_EMULATOR_HOST unset):` +
        ' INTEGRATION TESTS ARE SKIPPED. Install google-cloud-cli-bigtable-emulator or set BIGTABLE_EMULATOR_HOST.\n\n',
    );
  }
  context.skip();
}

/**
 * Starts a cbtemulator and waits for it to listen: on `port`, or by default on a free port of its
 * own choosing (-port 0).
 */
export function spawnEmulator(port = 0): Promise<{ host: string; process: ChildProcess }> {
  return new Promise((resolve, reject) => {
    const child = spawn(EMULATOR_BINARY, ['-host', '127.0.0.1', '-port', String(port)], { stdio: ['ignore', 'pipe', 'inherit'] });
    const timer = setTimeout(() => {
      child.kill();
      reject(new Error('the Bigtable emulator did not start within 15 s'));
    }, 15_000);
    child.once('error', reject);
    createInterface({ input: child.stdout }).on('line', (line) => {
      const match = /running on (\S+:\d+)/.exec(line);
      if (match?.[1] !== undefined) {
        clearTimeout(timer);
        resolve({ host: match[1], process: child });
      }
    });
  });
}

/** The Google Cloud project ID the tests give the Bigtable and Spanner emulators. */
export const TEST_PROJECT = 'kvcrud-test';
