import { conformanceSuite } from '../conformance/suite.ts';
import { harness as bigtableHarness } from '../support/harnesses/bigtable.ts';

describe('conformance: bigtable (emulator)', () => conformanceSuite(bigtableHarness));
