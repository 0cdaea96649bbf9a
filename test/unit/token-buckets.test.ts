import { expect } from 'chai';
import { TokenBuckets } from '../../src/http/admission/token-buckets.ts';

describe('TokenBuckets', () => {
  let now = 0;
  const clock = () => now;
  beforeEach(() => {
    now = 1_000_000;
  });

  it('allows a burst of the capacity, then one request per 1/rate seconds', () => {
    const buckets = new TokenBuckets({ ratePerSecond: 10, capacity: 10, now: clock });
    for (let i = 0; i < 10; i++) expect(buckets.take('a'), `request ${i}`).to.equal(0);
    expect(buckets.take('a')).to.equal(100);
    now += 50;
    expect(buckets.take('a')).to.equal(50);
    now += 50;
    expect(buckets.take('a')).to.equal(0);
    expect(buckets.take('a')).to.equal(100);
  });

  it('keeps a bucket per key', () => {
    const buckets = new TokenBuckets({ ratePerSecond: 1, capacity: 1, now: clock });
    expect(buckets.take('a')).to.equal(0);
    expect(buckets.take('a')).to.equal(1000);
    expect(buckets.take('b')).to.equal(0);
  });

  it('never holds more than the capacity, however long a key was idle', () => {
    const buckets = new TokenBuckets({ ratePerSecond: 2, capacity: 2, now: clock });
    buckets.take('a');
    now += 3_600_000;
    expect([buckets.take('a'), buckets.take('a'), buckets.take('a')]).to.deep.equal([0, 0, 500]);
  });

  it('forgets buckets that have refilled, so memory follows the active callers', () => {
    const buckets = new TokenBuckets({ ratePerSecond: 100, capacity: 100, now: clock });
    for (let i = 0; i < 10_000; i++) buckets.take(`caller-${i}`);
    expect(buckets.size).to.equal(10_000);
    now += 1000;
    buckets.take('another');
    expect(buckets.size).to.equal(1);
  });
});
