const MICROS_PER_DAY = 86_400_000_000n;

/**
 * formatTimestamp renders microseconds since the epoch as RFC 3339 in UTC with six fractional
 * digits, e.g. 2026-11-21T04:27:00.123456Z. Bigtable timestamps are any int64, and reverse
 * timestamps (INT64_MAX - now) are a common pattern, so years past 9999 occur: those use the
 * ISO 8601 expanded form, +294247-01-10T04:00:54.775807Z. Date cannot hold them; the calendar
 * arithmetic is done in BigInt instead.
 */
export function formatTimestamp(micros: bigint): string {
  // The cells of a row written by one request share a timestamp: a row of 100,000 of them is
  // rendered with one calculation, not 100,000 (the BigInt arithmetic is what costs).
  if (micros !== lastFormatted.micros) lastFormatted = { micros, text: format(micros) };
  return lastFormatted.text;
}

let lastFormatted = { micros: -1n, text: '' };

function format(micros: bigint): string {
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

/** The largest timestamp a store keeps: Bigtable's, a signed 64-bit count of microseconds. */
export const MAX_TIMESTAMP_MICROS = 9_223_372_036_854_775_807n;

// Years of four digits, or six with a sign (ISO 8601 expanded, as formatTimestamp writes them);
// up to six fractional digits; Z or a numeric offset.
/** The syntax of the timestamps parseTimestamp reads; not every text of it names a time (month 13). */
export const RFC_3339_TIMESTAMP = /^(\d{4}|[+-]\d{6})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,6}))?(?:([Zz])|([+-])(\d{2}):(\d{2}))$/;

/**
 * parseTimestamp reads an RFC 3339 timestamp, as formatTimestamp writes it or with a numeric
 * offset, into microseconds since the epoch; or returns undefined when the text is not one, names
 * a date that does not exist, has more than microsecond precision, or lies outside
 * 0..MAX_TIMESTAMP_MICROS. Leap seconds (:60) are refused: stores count microseconds without them.
 */
export function parseTimestamp(text: string): bigint | undefined {
  const match = RFC_3339_TIMESTAMP.exec(text);
  if (match === null) return undefined;
  const [, yearText = '', monthText = '', dayText = '', hourText = '', minuteText = '', secondText = ''] = match;
  const [fraction = '', zulu, sign, offsetHourText = '0', offsetMinuteText = '0'] = match.slice(7);
  const year = BigInt(yearText);
  const month = BigInt(monthText);
  const day = BigInt(dayText);
  const [hour, minute, second] = [Number(hourText), Number(minuteText), Number(secondText)];
  const [offsetHour, offsetMinute] = [Number(offsetHourText), Number(offsetMinuteText)];
  if (yearText === '-000000' || month < 1n || month > 12n || day < 1n || day > daysInMonth(year, month)) return undefined;
  if (hour > 23 || minute > 59 || second > 59 || offsetHour > 23 || offsetMinute > 59) return undefined;
  const offsetSeconds = zulu === undefined ? (sign === '-' ? -1 : 1) * (offsetHour * 3600 + offsetMinute * 60) : 0;
  const seconds = daysFromCivil(year, month, day) * 86_400n + BigInt(hour * 3600 + minute * 60 + second - offsetSeconds);
  const micros = seconds * 1_000_000n + BigInt(fraction.padEnd(6, '0'));
  return micros < 0n || micros > MAX_TIMESTAMP_MICROS ? undefined : micros;
}

function isLeapYear(year: bigint): boolean {
  return (year % 4n === 0n && year % 100n !== 0n) || year % 400n === 0n;
}

function daysInMonth(year: bigint, month: bigint): bigint {
  if (month === 2n) return isLeapYear(year) ? 29n : 28n;
  return [4n, 6n, 9n, 11n].includes(month) ? 30n : 31n;
}

/** Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's days_from_civil). */
function daysFromCivil(year: bigint, month: bigint, day: bigint): bigint {
  const y = month <= 2n ? year - 1n : year;
  const era = (y >= 0n ? y : y - 399n) / 400n;
  const yearOfEra = y - era * 400n;
  const dayOfYear = (153n * (month > 2n ? month - 3n : month + 9n) + 2n) / 5n + day - 1n;
  const dayOfEra = yearOfEra * 365n + yearOfEra / 4n - yearOfEra / 100n + dayOfYear;
  return era * 146_097n + dayOfEra - 719_468n;
}

/**
 * WriteClock assigns the write timestamps of one store: the wall clock in microseconds, rounded
 * down to the store's granularity (milliseconds, Bigtable's default, unless given), and never
 * earlier than one it assigned before, so a clock stepping back cannot make a newer write hide
 * behind an older one written by this process.
 */
export class WriteClock {
  #last = 0n;
  readonly #now: () => number;
  readonly #granularity: bigint;

  constructor(now: () => number = Date.now, granularityMicros = 1000) {
    this.#now = now;
    this.#granularity = BigInt(granularityMicros);
  }

  next(): bigint {
    const now = (BigInt(Math.floor(this.#now() * 1000)) / this.#granularity) * this.#granularity;
    if (now > this.#last) this.#last = now;
    return this.#last;
  }
}
