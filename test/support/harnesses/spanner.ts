import { randomBytes } from 'node:crypto';
import { pino } from 'pino';
import { spannerDriver } from '../../../src/store/spanner/driver.ts';
import { missingBackend, type DriverHarnessFactory } from '../driver-harness.ts';
import { TEST_PROJECT } from '../emulator.ts';
import { SPANNER_EMULATOR, sharedSpannerEmulator, spannerEmulatorAvailable } from '../spanner-emulator.ts';

/**
 * Spanner on the run's emulator (test/support/spanner-emulator.ts), opened through its driver.
 * Each store gets a Spanner instance of its own, so it sees nothing another test made.
 */
export const harness: DriverHarnessFactory = {
  driver: 'spanner',
  async make(context) {
    if (!spannerEmulatorAvailable()) missingBackend(context, 'spanner', `no Spanner emulator at ${SPANNER_EMULATOR}`);
    const emulator = await sharedSpannerEmulator();
    return {
      // The emulator runs one read-write transaction at a time.
      traits: { fastWideWrites: true, propertyRuns: 25 },
      open: (instances) =>
        spannerDriver.open(
          { name: 'spanner', instances, settings: { projectId: TEST_PROJECT, instance: spannerTestInstance(), emulatorHost: emulator.host } },
          { logger: pino({ level: 'silent' }) },
        ),
      close: (store) => store.close(),
    };
  },
};

/** A fresh Spanner instance ID. */
export function spannerTestInstance(): string {
  return `test-${randomBytes(4).toString('hex')}`;
}
