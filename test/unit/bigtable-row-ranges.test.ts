import { expect } from 'chai';
import fc from 'fast-check';
import { isEmpty, rangeAfter, rowRange } from '../../src/store/bigtable/row-ranges.ts';
import type { KeyRange } from '../../src/store/store.ts';

const key = fc.uint8Array({ maxLength: 4 }).map((bytes) => Buffer.from(bytes));
const inRange = (range: KeyRange, candidate: Buffer) =>
  (range.start === undefined || Buffer.compare(candidate, range.start) >= 0) && (range.end === undefined || Buffer.compare(candidate, range.end) < 0);

describe('Bigtable row ranges', () => {
  it('maps start to start_key_closed and end to end_key_open, leaving out what is unbounded', () => {
    expect(rowRange({ start: Buffer.from('a'), end: Buffer.from('b') })).to.deep.equal({ startKeyClosed: Buffer.from('a'), endKeyOpen: Buffer.from('b') });
    expect(rowRange({ start: Buffer.alloc(0) })).to.deep.equal({});
    expect(rowRange({})).to.deep.equal({});
  });

  it('knows a range empty when its end is empty or not after its start', () => {
    expect(isEmpty({ end: Buffer.alloc(0) })).to.equal(true);
    expect(isEmpty({ start: Buffer.from('b'), end: Buffer.from('b') })).to.equal(true);
    expect(isEmpty({ start: Buffer.from('c'), end: Buffer.from('b') })).to.equal(true);
    expect(isEmpty({ start: Buffer.from('a'), end: Buffer.from('a\0') })).to.equal(false);
    expect(isEmpty({ start: Buffer.from('a') })).to.equal(false);
  });

  it('leaves, after a row, exactly the keys of the range beyond it in the scan direction', () => {
    fc.assert(
      fc.property(fc.option(key, { nil: undefined }), fc.option(key, { nil: undefined }), key, key, fc.boolean(), (start, end, yielded, candidate, reverse) => {
        const range = { ...(start === undefined ? {} : { start }), ...(end === undefined ? {} : { end }) };
        fc.pre(inRange(range, yielded));
        const beyond = reverse ? Buffer.compare(candidate, yielded) < 0 : Buffer.compare(candidate, yielded) > 0;
        expect(inRange(rangeAfter(range, yielded, reverse), candidate)).to.equal(inRange(range, candidate) && beyond);
      }),
      { numRuns: 2000 },
    );
  });
});
