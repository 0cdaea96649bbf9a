import { pino } from 'pino';
import { bigtableDriver } from '../../../src/store/bigtable/driver.ts';
import type { DriverHarnessFactory } from '../driver-harness.ts';
import { TEST_PROJECT, emulatorHost } from '../emulator.ts';

/**
 * Bigtable on the emulator the test run started (test/support/emulator.ts), opened through its
 * driver. A fresh store serves fresh random instance IDs, so it sees nothing another test made.
 */
export const harness: DriverHarnessFactory = {
  driver: 'bigtable',
  make(context) {
    const host = emulatorHost(context);
    return Promise.resolve({
      // The emulator applies each mutation separately: 100,000 in one row take it over 30 s.
      traits: { fastWideWrites: false, propertyRuns: 25 },
      open: (instances) =>
        bigtableDriver.open(
          { name: 'bigtable', instances, settings: { projectId: TEST_PROJECT, emulatorHost: host } },
          { logger: pino({ level: 'silent' }) },
        ),
      close: (store) => store.close(),
    });
  },
};
