import { expect } from 'chai';
import fc from 'fast-check';
import { MAX_TIMESTAMP_MICROS, WriteClock, formatTimestamp, parseTimestamp } from '../../src/service/timestamps.ts';

describe('formatTimestamp', () => {
  it('renders microseconds as RFC 3339 UTC with six fractional digits', () => {
    expect(formatTimestamp(0n)).to.equal('1970-01-01T00:00:00.000000Z');
    expect(formatTimestamp(1_795_235_986_123_456n)).to.equal('2026-11-21T04:39:46.123456Z');
    expect(formatTimestamp(1_000_001n)).to.equal('1970-01-01T00:00:01.000001Z');
  });

  it('agrees with Date wherever Date reaches', () => {
    const rangeMs = 8_640_000_000_000_000;
    for (let i = 0; i < 2000; i += 1) {
      const ms = Math.floor((Math.random() * 2 - 1) * rangeMs);
      const micros = BigInt(ms) * 1000n + BigInt(Math.floor(Math.random() * 1000));
      const iso = new Date(ms).toISOString();
      const expected = `${iso.slice(0, -1)}${(micros - BigInt(ms) * 1000n).toString().padStart(3, '0')}Z`;
      expect(formatTimestamp(micros), String(micros)).to.equal(expected);
    }
  });

  it('switches to the expanded year form after 9999', () => {
    expect(formatTimestamp(253_402_300_799_999_999n)).to.equal('9999-12-31T23:59:59.999999Z');
    expect(formatTimestamp(253_402_300_800_000_000n)).to.equal('+010000-01-01T00:00:00.000000Z');
  });

  it('renders the largest int64, as reverse timestamps approach it', () => {
    expect(formatTimestamp(9_223_372_036_854_775_807n)).to.equal('+294247-01-10T04:00:54.775807Z');
  });
});

describe('WriteClock', () => {
  it('gives the wall clock in microseconds, at millisecond granularity', () => {
    const clock = new WriteClock(() => 1_700_000_000_123.9);
    expect(clock.next()).to.equal(1_700_000_000_123_000n);
  });

  it('never goes back when the wall clock does', () => {
    let now = 2_000;
    const clock = new WriteClock(() => now);
    expect(clock.next()).to.equal(2_000_000n);
    now = 1_000;
    expect(clock.next()).to.equal(2_000_000n);
    now = 3_000;
    expect(clock.next()).to.equal(3_000_000n);
  });
});

describe('parseTimestamp', () => {
  it('reads what formatTimestamp writes', () => {
    fc.assert(
      fc.property(fc.bigInt({ min: 0n, max: MAX_TIMESTAMP_MICROS }), (micros) => {
        expect(parseTimestamp(formatTimestamp(micros))).to.equal(micros);
      }),
      { numRuns: 2000 },
    );
  });

  it('takes offsets, fewer fractional digits, and none', () => {
    expect(parseTimestamp('2026-11-21T05:27:00+01:00')).to.equal(parseTimestamp('2026-11-21T04:27:00.000000Z'));
    expect(parseTimestamp('2026-11-21T04:27:00.5Z')).to.equal(1_795_235_220_500_000n);
    expect(parseTimestamp('1970-01-01T00:00:00Z')).to.equal(0n);
  });

  it('refuses what is not an RFC 3339 timestamp of a real date within range', () => {
    for (const text of [
      '',
      '2026-11-21',
      '2026-11-21T04:27:00',
      '2026-11-21T04:27:00.1234567Z',
      '2026-02-29T00:00:00Z',
      '2026-13-01T00:00:00Z',
      '2026-11-21T24:00:00Z',
      '2026-11-21T23:59:60Z',
      '1969-12-31T23:59:59.999999Z',
      '+294247-01-10T04:00:54.775808Z',
      ' 2026-11-21T04:27:00Z',
    ]) {
      expect(parseTimestamp(text), text).to.equal(undefined);
    }
    expect(parseTimestamp('2024-02-29T00:00:00Z')).to.not.equal(undefined);
  });
});

describe('WriteClock at a store granularity', () => {
  it('rounds down to the granularity', () => {
    expect(new WriteClock(() => 1_700_000_000_123.9, 1).next()).to.equal(1_700_000_000_123_900n);
    expect(new WriteClock(() => 1_700_000_000_123.9, 1_000_000).next()).to.equal(1_700_000_000_000_000n);
  });
});
