import { hostileInputCases } from '../conformance/hostile-input.ts';
import { harness as bigtableHarness } from '../support/harnesses/bigtable.ts';
import { harness as embeddedHarness } from '../support/harnesses/embedded.ts';

// The embedded store answers in microseconds, so it gets the many runs; the emulator fewer.
describe('hostile input: embedded', () => hostileInputCases(embeddedHarness, { runs: 100 }));
describe('hostile input: bigtable', () => hostileInputCases(bigtableHarness, { runs: 30 }));
