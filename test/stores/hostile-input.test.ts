import { hostileInputCases } from '../conformance/hostile-input.ts';
import { bigtableHarness, embeddedHarness } from '../support/stores.ts';

// The embedded store answers in microseconds, so it gets the many runs; the emulator fewer.
describe('hostile input: embedded', () => hostileInputCases(embeddedHarness, { runs: 100 }));
describe('hostile input: bigtable', () => hostileInputCases(bigtableHarness, { runs: 30 }));
