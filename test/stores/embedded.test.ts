import { conformanceSuite } from '../conformance/suite.ts';
import { harness as embeddedHarness } from '../support/harnesses/embedded.ts';

describe('conformance: embedded', () => conformanceSuite(embeddedHarness));
