import { expect } from 'chai';
import fc from 'fast-check';
import { ApiError } from '../../src/service/errors.ts';
import { MAX_PAGE_TOKEN_CHARS, type ScanQuery, decodePageToken, encodePageToken } from '../../src/service/page-tokens.ts';

const QUERY: ScanQuery = {
  store: 'embedded',
  instance: 'local',
  table: 'orders',
  range: { start: Buffer.from('order#'), end: Buffer.from('order$') },
  reverse: false,
  versions: 1,
};

function refusal(run: () => unknown): ApiError {
  try {
    run();
  } catch (error) {
    if (error instanceof ApiError) return error;
    throw error;
  }
  throw new Error('expected INVALID_PAGE_TOKEN');
}

describe('page tokens', () => {
  it('give back the position they were made of, for the same query', () => {
    const token = encodePageToken(QUERY, { resume: Buffer.from('order#1002') }) ?? '';
    expect(token).to.match(/^[A-Za-z0-9_-]+$/);
    expect(decodePageToken(QUERY, token)).to.deep.equal({ resume: Buffer.from('order#1002'), remaining: undefined });
    const limited = { ...QUERY, limit: 500 };
    const withLimit = encodePageToken(limited, { resume: Buffer.from('order#2'), remaining: 398 }) ?? '';
    expect(decodePageToken(limited, withLimit)).to.deep.equal({ resume: Buffer.from('order#2'), remaining: 398 });
  });

  it('are refused by another table, store, instance or query (pageSize is not part of it)', () => {
    const token = encodePageToken(QUERY, { resume: Buffer.from('order#1002') }) ?? '';
    const others: ScanQuery[] = [
      { ...QUERY, table: 'orders2' },
      { ...QUERY, store: 'other' },
      { ...QUERY, instance: 'other' },
      { ...QUERY, range: { start: Buffer.from('order#') } },
      { ...QUERY, range: { start: Buffer.from('order#'), end: Buffer.from('order%') } },
      { ...QUERY, reverse: true },
      { ...QUERY, versions: 2 },
      { ...QUERY, limit: 10 },
      { ...QUERY, columns: [{ family: 'cf' }] },
    ];
    for (const other of others) {
      expect(refusal(() => decodePageToken(other, token)).code, JSON.stringify(other)).to.equal('INVALID_PAGE_TOKEN');
    }
  });

  it('tell a family selector from a column selector with an empty name', () => {
    const family = { ...QUERY, columns: [{ family: 'cf' }] };
    const column = { ...QUERY, columns: [{ family: 'cf', column: Buffer.alloc(0) }] };
    const token = encodePageToken(family, { resume: Buffer.from('order#1') }) ?? '';
    expect(refusal(() => decodePageToken(column, token)).code).to.equal('INVALID_PAGE_TOKEN');
  });

  it('are refused when any character is changed, dropped or added', () => {
    const token = encodePageToken(QUERY, { resume: Buffer.from('order#1002') }) ?? '';
    const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
    fc.assert(
      fc.property(fc.nat({ max: token.length - 1 }), fc.constantFrom(...alphabet), fc.constantFrom('replace', 'drop', 'insert'), (at, char, edit) => {
        const edited =
          edit === 'replace' ? token.slice(0, at) + char + token.slice(at + 1) : edit === 'drop' ? token.slice(0, at) + token.slice(at + 1) : token.slice(0, at) + char + token.slice(at);
        fc.pre(edited !== token);
        expect(refusal(() => decodePageToken(QUERY, edited)).code).to.equal('INVALID_PAGE_TOKEN');
      }),
      { numRuns: 500 },
    );
  });

  it('are refused when they are not tokens at all', () => {
    for (const text of ['', 'x', '%%%', 'a'.repeat(MAX_PAGE_TOKEN_CHARS + 1), 'AAAA', 'order#1002', '////']) {
      expect(refusal(() => decodePageToken(QUERY, text)).code, text).to.equal('INVALID_PAGE_TOKEN');
    }
  });

  it('stay under 1 KiB, and store only what a key does not share with the query bounds', () => {
    const longPrefix = Buffer.alloc(3000, 'p');
    const query: ScanQuery = { ...QUERY, range: { start: longPrefix } };
    const resume = Buffer.concat([longPrefix, Buffer.from('tail')]);
    const token = encodePageToken(query, { resume }) ?? '';
    expect(token.length).to.be.below(64);
    expect(decodePageToken(query, token).resume.equals(resume)).to.equal(true);
    // Nothing to share with: a resume key of 3,000 bytes cannot be held.
    expect(encodePageToken({ ...QUERY, range: {} }, { resume })).to.equal(undefined);
    const longest = encodePageToken({ ...QUERY, range: {} }, { resume: Buffer.alloc(700, 0xff) }) ?? '';
    expect(longest.length).to.be.at.most(MAX_PAGE_TOKEN_CHARS);
  });

  it('are refused when they point outside the query range, even with a valid tag', () => {
    // A token of a wider query cannot be replayed into a narrower one: the tag covers the range.
    const wide: ScanQuery = { ...QUERY, range: {} };
    const token = encodePageToken(wide, { resume: Buffer.from('zzz') }) ?? '';
    expect(refusal(() => decodePageToken(QUERY, token)).code).to.equal('INVALID_PAGE_TOKEN');
  });
});
