import { expect } from 'chai';
import { gcRuleFor, policyOf } from '../../src/store/bigtable/gc-rules.ts';

describe('Bigtable GC rules', () => {
  it('gives maxVersions as max_num_versions, maxAgeSeconds as max_age, both as their union, neither as no rule', () => {
    expect(gcRuleFor({})).to.equal(undefined);
    expect(gcRuleFor({ maxVersions: 3 })).to.deep.equal({ maxNumVersions: 3 });
    expect(gcRuleFor({ maxAgeSeconds: 90 })).to.deep.equal({ maxAge: { seconds: 90, nanos: 0 } });
    expect(gcRuleFor({ maxVersions: 1, maxAgeSeconds: 1.5 })).to.deep.equal({
      union: { rules: [{ maxNumVersions: 1 }, { maxAge: { seconds: 1, nanos: 500_000_000 } }] },
    });
  });

  it('maps every rule it writes back to the policy it came from', () => {
    for (const policy of [{}, { maxVersions: 7 }, { maxAgeSeconds: 86_400 }, { maxVersions: 2, maxAgeSeconds: 3600 }]) {
      expect(policyOf(gcRuleFor(policy))).to.deep.equal(policy);
    }
  });

  it('reads max_age seconds given as a string or a Long, as the client decodes int64', () => {
    expect(policyOf({ maxAge: { seconds: '3600', nanos: 0 } })).to.deep.equal({ maxAgeSeconds: 3600 });
    expect(policyOf({ maxAge: { seconds: { toString: () => '60' } as never, nanos: 250_000_000 } })).to.deep.equal({ maxAgeSeconds: 60.25 });
  });

  it('folds nested unions into the smallest bounds', () => {
    const rule = { union: { rules: [{ maxNumVersions: 5 }, { union: { rules: [{ maxNumVersions: 3 }, { maxAge: { seconds: 60 } }] } }, { maxAge: { seconds: 120 } }] } };
    expect(policyOf(rule)).to.deep.equal({ maxVersions: 3, maxAgeSeconds: 60 });
  });

  it('keeps the largest bound of an intersection of one kind, and nothing for one that keeps all', () => {
    expect(policyOf({ intersection: { rules: [{ maxNumVersions: 2 }, { maxNumVersions: 4 }] } })).to.deep.equal({ maxVersions: 4 });
    expect(policyOf({ intersection: { rules: [{ maxAge: { seconds: 10 } }, { maxAge: { seconds: 30 } }] } })).to.deep.equal({ maxAgeSeconds: 30 });
    expect(policyOf({ intersection: { rules: [{ maxNumVersions: 2 }, { union: { rules: [] } }] } })).to.deep.equal({});
  });

  it('reads an intersection of a count and an age as their union, never showing what Bigtable may drop', () => {
    expect(policyOf({ intersection: { rules: [{ maxAge: { seconds: 3600 } }, { maxNumVersions: 2 }] } })).to.deep.equal({ maxVersions: 2, maxAgeSeconds: 3600 });
  });
});
