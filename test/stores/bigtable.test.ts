import { conformanceSuite } from '../conformance/suite.ts';
import { bigtableHarness } from '../support/stores.ts';

describe('conformance: bigtable (emulator)', () => conformanceSuite(bigtableHarness));
