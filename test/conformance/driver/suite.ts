import type { DriverHarnessFactory } from '../../support/driver-harness.ts';
import { bytesCases } from './bytes.ts';
import { callOptionsCases } from './call-options.ts';
import { capabilityCases } from './capabilities.ts';
import { changeFeedCases } from './changes.ts';
import { checkAndMutateCases } from './check-and-mutate.ts';
import { concurrencyCases } from './concurrency.ts';
import { limitsCases } from './limits.ts';
import { mutateRowCases } from './mutate-row.ts';
import { mutateRowsCases } from './mutate-rows.ts';
import { propertyCases } from './property.ts';
import { readModifyWriteCases } from './read-modify-write.ts';
import { readRowsCases } from './read-rows.ts';
import { retentionCases } from './retention.ts';
import { scanRowsCases } from './scan-rows.ts';
import { tableCases } from './tables.ts';

/**
 * The driver conformance suite: every method of the DataStore contract (src/store/store.ts),
 * case by case as its comments state it, plus a model-based property test, run through the
 * DataStore interface against the store a harness opens. Every driver runs it unchanged from
 * test/stores/driver-conformance.test.ts. A case needing a capability the store does not publish
 * is skipped; no case expects less of one store than of another.
 */
export function driverConformanceSuite(factory: DriverHarnessFactory): void {
  after(async function () {
    this.timeout(60_000);
    await factory.release?.();
  });
  capabilityCases(factory);
  tableCases(factory);
  mutateRowCases(factory);
  mutateRowsCases(factory);
  readRowsCases(factory);
  scanRowsCases(factory);
  retentionCases(factory);
  bytesCases(factory);
  limitsCases(factory);
  checkAndMutateCases(factory);
  readModifyWriteCases(factory);
  changeFeedCases(factory);
  concurrencyCases(factory);
  callOptionsCases(factory);
  propertyCases(factory);
}
