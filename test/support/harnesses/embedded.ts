import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { embeddedDriver } from '../../../src/store/embedded/driver.ts';
import type { DataStore } from '../../../src/store/store.ts';
import type { DriverHarnessFactory } from '../driver-harness.ts';

/** The embedded store, opened through its driver, in a new temporary directory removed on close. */
export const harness: DriverHarnessFactory = {
  driver: 'embedded',
  make() {
    const directories = new Map<DataStore, string>();
    return Promise.resolve({
      traits: { fastWideWrites: true, propertyRuns: 100 },
      async open(instances) {
        const dataDir = mkdtempSync(join(tmpdir(), 'kvcrud-driver-'));
        const store = await embeddedDriver.open({ name: 'embedded', instances, settings: { dataDir } }, { logger: pino({ level: 'silent' }) });
        directories.set(store, dataDir);
        return store;
      },
      async close(store) {
        await store.close();
        const dataDir = directories.get(store);
        directories.delete(store);
        if (dataDir !== undefined) rmSync(dataDir, { recursive: true, force: true });
      },
    });
  },
};
