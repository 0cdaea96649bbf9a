const MICROS_PER_DAY = 86_400_000_000n;

/**
 * formatTimestamp renders microseconds since the epoch as RFC 3339 in UTC with six fractional
 * digits, e.g. 2026-11-21T04:27:00.123456Z. Bigtable timestamps are any int64, and reverse
 * timestamps (INT64_MAX - now) are a common pattern, so years past 9999 occur: those use the
 * ISO 8601 expanded form, +294247-01-10T04:00:54.775807Z. Date cannot hold them; the calendar
 * arithmetic is done in BigInt instead.
 */
export function formatTimestamp(micros: bigint): string {
  let days = micros / MICROS_PER_DAY;
  let rest = micros % MICROS_PER_DAY;
  if (rest < 0n) {
    rest += MICROS_PER_DAY;
    days -= 1n;
  }
  const { year, month, day } = civilFromDays(days);
  const seconds = rest / 1_000_000n;
  const yearText =
    year >= 0n && year <= 9999n ? pad(year, 4) : `${year < 0n ? '-' : '+'}${pad(year < 0n ? -year : year, 6)}`;
  return (
    `${yearText}-${pad(month, 2)}-${pad(day, 2)}` +
    `T${pad(seconds / 3600n, 2)}:${pad((seconds % 3600n) / 60n, 2)}:${pad(seconds % 60n, 2)}.${pad(rest % 1_000_000n, 6)}Z`
  );
}

/**
 * The proleptic Gregorian date of a day number (days since 1970-01-01), by Howard Hinnant's
 * days_from_civil inverse: http://howardhinnant.github.io/date_algorithms.html#civil_from_days
 */
function civilFromDays(dayNumber: bigint): { year: bigint; month: bigint; day: bigint } {
  const z = dayNumber + 719_468n;
  const era = (z >= 0n ? z : z - 146_096n) / 146_097n;
  const dayOfEra = z - era * 146_097n;
  const yearOfEra = (dayOfEra - dayOfEra / 1460n + dayOfEra / 36_524n - dayOfEra / 146_096n) / 365n;
  const dayOfYear = dayOfEra - (365n * yearOfEra + yearOfEra / 4n - yearOfEra / 100n);
  const shiftedMonth = (5n * dayOfYear + 2n) / 153n;
  const day = dayOfYear - (153n * shiftedMonth + 2n) / 5n + 1n;
  const month = shiftedMonth < 10n ? shiftedMonth + 3n : shiftedMonth - 9n;
  return { year: yearOfEra + era * 400n + (month <= 2n ? 1n : 0n), month, day };
}

function pad(value: bigint, width: number): string {
  return value.toString().padStart(width, '0');
}

/**
 * WriteClock assigns write timestamps: the wall clock in microseconds, at millisecond granularity
 * (Bigtable's default), and never earlier than one it assigned before, so a clock stepping back
 * cannot make a newer write hide behind an older one written by this process.
 */
export class WriteClock {
  #last = 0n;
  readonly #now: () => number;

  constructor(now: () => number = Date.now) {
    this.#now = now;
  }

  next(): bigint {
    const now = BigInt(Math.floor(this.#now())) * 1000n;
    if (now > this.#last) this.#last = now;
    return this.#last;
  }
}
