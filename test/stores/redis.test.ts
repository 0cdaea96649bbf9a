import { conformanceSuite } from '../conformance/suite.ts';
import { hostileInputCases } from '../conformance/hostile-input.ts';
import { harness as redisHarness } from '../support/harnesses/redis.ts';

describe('conformance: redis', () => conformanceSuite(redisHarness));
describe('hostile input: redis', () => hostileInputCases(redisHarness, { runs: 100 }));
