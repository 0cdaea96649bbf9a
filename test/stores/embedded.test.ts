import { conformanceSuite } from '../conformance/suite.ts';
import { embeddedHarness } from '../support/stores.ts';

describe('conformance: embedded', () => conformanceSuite(embeddedHarness));
