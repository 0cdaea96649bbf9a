import type { DriverHarnessFactory } from '../support/driver-harness.ts';
import { concurrencyCases } from './concurrency.ts';
import { createTableCases } from './create-table.ts';
import { deleteTableCases } from './delete-table.ts';
import { insertDataCases } from './insert-data.ts';
import { readCellDataCases } from './read-cell-data.ts';

/**
 * The conformance suite: every case of the v1 contract, through the real HTTP app, against the
 * store a harness opens. Each adapter runs it from test/stores/<adapter>.test.ts and must pass it
 * unchanged; where stores differ, production Bigtable's behaviour is the reference and the
 * adapter is fixed, not the case.
 */
export function conformanceSuite(store: DriverHarnessFactory): void {
  createTableCases(store);
  insertDataCases(store);
  readCellDataCases(store);
  deleteTableCases(store);
  concurrencyCases(store);
}
