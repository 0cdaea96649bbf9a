import { conformanceSuite } from '../conformance/suite.ts';
import { hostileInputCases } from '../conformance/hostile-input.ts';
import { redisHarness } from '../support/stores.ts';

describe('conformance: redis', () => conformanceSuite(redisHarness));
describe('hostile input: redis', () => hostileInputCases(redisHarness, { runs: 100 }));
