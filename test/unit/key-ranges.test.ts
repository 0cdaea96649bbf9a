import { expect } from 'chai';
import fc from 'fast-check';
import { commonPrefixLength, inRange, prefixRange, shortestSeparator } from '../../src/service/key-ranges.ts';

const bytes = (...values: number[]) => Buffer.from(values);
const key = fc.uint8Array({ maxLength: 12 }).map((array) => Buffer.from(array));

describe('prefixRange', () => {
  it('runs from the prefix to the next prefix of the same length', () => {
    expect(prefixRange(Buffer.from('order#'))).to.deep.equal({ start: Buffer.from('order#'), end: Buffer.from('order$') });
  });

  it('carries over trailing 0xff bytes', () => {
    expect(prefixRange(bytes(1, 0xff, 0xff))).to.deep.equal({ start: bytes(1, 0xff, 0xff), end: bytes(2) });
  });

  it('is unbounded above for an all-0xff prefix, and everything for an empty one', () => {
    expect(prefixRange(bytes(0xff, 0xff))).to.deep.equal({ start: bytes(0xff, 0xff) });
    expect(prefixRange(Buffer.alloc(0))).to.deep.equal({});
  });

  it('holds exactly the keys that start with the prefix', () => {
    fc.assert(
      fc.property(key, key, (prefix, candidate) => {
        expect(inRange(candidate, prefixRange(prefix))).to.equal(candidate.subarray(0, prefix.length).equals(prefix));
      }),
      { numRuns: 2000 },
    );
  });
});

describe('shortestSeparator', () => {
  it('is the upper key cut one byte after the common prefix', () => {
    expect(shortestSeparator(Buffer.from('apple'), Buffer.from('apricot')).toString()).to.equal('apr');
    expect(shortestSeparator(Buffer.from('ab'), Buffer.from('abc')).toString()).to.equal('abc');
    expect(shortestSeparator(Buffer.alloc(0), Buffer.from('z')).toString()).to.equal('z');
  });

  it('lies above the lower key and at most the upper, and no shorter string does', () => {
    fc.assert(
      fc.property(key, key, (a, b) => {
        fc.pre(!a.equals(b));
        const [lower, upper] = Buffer.compare(a, b) < 0 ? [a, b] : [b, a];
        const separator = shortestSeparator(lower, upper);
        expect(Buffer.compare(separator, lower)).to.equal(1);
        expect(Buffer.compare(separator, upper)).to.be.at.most(0);
        expect(separator.length).to.equal(commonPrefixLength(lower, upper) + 1);
        // Every shorter string is a prefix of upper that is also a prefix of lower, or not above lower.
        const shorter = upper.subarray(0, separator.length - 1);
        expect(Buffer.compare(shorter, lower)).to.be.at.most(0);
      }),
      { numRuns: 2000 },
    );
  });
});
