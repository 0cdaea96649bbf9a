import { v2Smoke } from '../conformance/v2-smoke.ts';
import { harness as bigtableHarness } from '../support/harnesses/bigtable.ts';
import { harness as embeddedHarness } from '../support/harnesses/embedded.ts';

v2Smoke('embedded', embeddedHarness);
v2Smoke('bigtable', bigtableHarness);
