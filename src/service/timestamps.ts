/**
 * formatTimestamp renders microseconds since the epoch as RFC 3339 in UTC with six fractional
 * digits, e.g. 2026-11-21T04:27:00.123456Z. Bigtable timestamps are int64 microseconds, whose
 * whole non-negative range falls in years 1970-2262, so the year always has four digits.
 */
export function formatTimestamp(micros: bigint): string {
  const clamped = micros < 0n ? 0n : micros;
  const millis = clamped / 1000n;
  const fraction = (clamped % 1_000_000n).toString().padStart(6, '0');
  return `${new Date(Number(millis)).toISOString().slice(0, 19)}.${fraction}Z`;
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
