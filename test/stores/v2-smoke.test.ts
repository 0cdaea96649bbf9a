import { v2Smoke } from '../conformance/v2-smoke.ts';
import { bigtableHarness, embeddedHarness } from '../support/stores.ts';

v2Smoke('embedded', embeddedHarness);
v2Smoke('bigtable', bigtableHarness);
