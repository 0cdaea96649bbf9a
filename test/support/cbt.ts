import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { TEST_PROJECT } from './test-app.ts';

const execFileAsync = promisify(execFile);

/** Runs the `cbt` CLI against the emulator and returns its standard output. */
export async function cbt(emulatorHost: string, instance: string, ...args: string[]): Promise<string> {
  const { stdout } = await execFileAsync('cbt', ['-project', TEST_PROJECT, '-instance', instance, ...args], {
    env: { ...process.env, BIGTABLE_EMULATOR_HOST: emulatorHost },
  });
  return stdout;
}

/** Runs the `cbt` CLI and returns its standard output as bytes: it prints qualifiers unescaped. */
export async function cbtBytes(emulatorHost: string, instance: string, ...args: string[]): Promise<Buffer> {
  const { stdout } = await execFileAsync('cbt', ['-project', TEST_PROJECT, '-instance', instance, ...args], {
    env: { ...process.env, BIGTABLE_EMULATOR_HOST: emulatorHost },
    encoding: 'buffer',
  });
  return stdout;
}
