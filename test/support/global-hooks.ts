/**
 * Mocha root hooks: one Bigtable emulator for the whole run (see emulator.ts), stopped at the end.
 */
import { startEmulator, stopEmulator } from './emulator.ts';
import { stopSharedSpannerEmulator } from './spanner-emulator.ts';

export async function mochaGlobalSetup(): Promise<void> {
  await startEmulator();
}

export async function mochaGlobalTeardown(): Promise<void> {
  await stopEmulator();
  await stopSharedSpannerEmulator();
}
