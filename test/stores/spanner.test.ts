import { conformanceSuite } from '../conformance/suite.ts';
import { hostileInputCases } from '../conformance/hostile-input.ts';
import { v2Smoke } from '../conformance/v2-smoke.ts';
import { harness as spannerHarness } from '../support/harnesses/spanner.ts';

describe('conformance: spanner', () => conformanceSuite(spannerHarness));
// The emulator commits one transaction at a time: fewer runs than the embedded store's 100.
describe('hostile input: spanner', () => hostileInputCases(spannerHarness, { runs: 30 }));
v2Smoke('spanner', spannerHarness);
