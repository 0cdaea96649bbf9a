import { expect } from 'chai';
import fc from 'fast-check';
import { exactly, noneOf, readFilter } from '../../src/store/bigtable/read-filter.ts';

/** RE2's (?s) flag as JavaScript's s flag: the patterns use no other RE2-only syntax. */
function matcher(pattern: string): RegExp {
  return pattern.startsWith('(?s)') ? new RegExp(pattern.slice(4), 's') : new RegExp(pattern);
}

// Bigtable family names: [_a-zA-Z0-9][-_.a-zA-Z0-9]*; short, from few characters, so that names
// share prefixes and one is often a prefix of another.
const familyName = fc.string({ unit: fc.constantFrom('a', 'b', '.', '-', '_', '9'), minLength: 1, maxLength: 4 });

describe('Bigtable read filters', () => {
  it('matches exactly one family name, regex characters included', () => {
    const pattern = matcher(exactly('a.b'));
    expect(['a.b'].map((name) => pattern.test(name))).to.deep.equal([true]);
    expect(['axb', 'a.bc', 'xa.b', ''].some((name) => pattern.test(name))).to.equal(false);
  });

  it('noneOf matches every family name but the given ones', () => {
    fc.assert(
      fc.property(fc.uniqueArray(familyName, { minLength: 1, maxLength: 6 }), familyName, (names, candidate) => {
        expect(matcher(noneOf(names)).test(candidate)).to.equal(!names.includes(candidate));
      }),
      { numRuns: 2000 },
    );
  });

  it('is a bare version limit when no family has a policy and no column is selected', () => {
    expect(readFilter({ versions: 3 }, new Map([['f', {}]]), 0)).to.deep.equal({ cellsPerColumnLimitFilter: 3 });
  });

  it('is a bare version limit when every policy keeps at least the versions read and none limits age', () => {
    const families = new Map([['f', { maxVersions: 1 }], ['g', { maxVersions: 3 }], ['h', {}]]);
    expect(readFilter({ versions: 1 }, families, 0)).to.deep.equal({ cellsPerColumnLimitFilter: 1 });
    // Reading three versions, f's policy keeps fewer: it gets a branch of its own.
    const three = readFilter({ versions: 3 }, families, 0);
    expect(JSON.stringify(three)).to.include('"cellsPerColumnLimitFilter":1').and.include('"familyNameRegexFilter":"^f$"');
  });

  it('limits a family to the smaller of versions and maxVersions, and starts its range at now - maxAge', () => {
    const filter = readFilter({ versions: 5, columns: [{ family: 'f' }] }, new Map([['f', { maxVersions: 2, maxAgeSeconds: 60 }]]), 1_000_000);
    expect(filter).to.deep.equal({
      chain: {
        filters: [{ familyNameRegexFilter: '^f$' }, { timestampRangeFilter: { startTimestampMicros: (1_000_000 - 60_000) * 1000 } }, { cellsPerColumnLimitFilter: 2 }],
      },
    });
  });
});
