import { EMBEDDED_LIMITS } from '../../../src/store/embedded/limits.ts';
import type { StoreCapabilities, StoreLimits } from '../../../src/store/store.ts';
import { modelHarness } from './model-store.ts';
import { driverConformanceSuite } from './suite.ts';

const ALL: StoreCapabilities = { multipleVersions: true, maxAge: true, reverseScan: true, checkAndMutate: true, readModifyWrite: true, changeFeed: true };

/** Limits unlike any store's today, so that the suite is seen to follow what a store publishes. */
const SMALL_LIMITS: StoreLimits = {
  keyBytes: 8192,
  columnBytes: 300,
  valueBytes: 64 * 1024,
  mutationsPerRow: 500,
  bytesPerRow: 1024 * 1024,
  entriesPerBatch: 40,
  mutationsPerBatch: 2000,
  bytesPerBatch: 4 * 1024 * 1024,
  rowsPerPage: 25,
  familiesPerTable: 12,
  versionsPerRead: 8,
  timestampGranularityMicros: 1,
  conditionsPerCheck: 4,
  rulesPerRow: 10,
  changeRetentionSeconds: 600,
};

/**
 * The driver conformance suite run against the reference model: it must pass there, with every
 * capability and without each one, or the suite (not a store) is wrong. The model store refuses
 * any request the service would never send, so this also checks that the suite keeps to the
 * published capabilities and limits.
 */
describe('driver conformance suite, against the reference model', () => {
  const variants: Array<[string, StoreCapabilities, StoreLimits]> = [
    ['every capability', ALL, EMBEDDED_LIMITS],
    ['latest version only', { ...ALL, multipleVersions: false }, EMBEDDED_LIMITS],
    ['no maxAge', { ...ALL, maxAge: false }, SMALL_LIMITS],
    ['no reverse scan', { ...ALL, reverseScan: false }, SMALL_LIMITS],
    ['no coordination', { ...ALL, checkAndMutate: false, readModifyWrite: false, changeFeed: false }, SMALL_LIMITS],
    ['no capability', { multipleVersions: false, maxAge: false, reverseScan: false, checkAndMutate: false, readModifyWrite: false, changeFeed: false }, SMALL_LIMITS],
  ];
  for (const [name, capabilities, limits] of variants) {
    describe(name, () => driverConformanceSuite(modelHarness(`model (${name})`, capabilities, limits)));
  }
});
