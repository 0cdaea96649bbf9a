export interface TokenBucketsOptions {
  /** Tokens added to each bucket per second. */
  readonly ratePerSecond: number;
  /** Most tokens a bucket holds: the burst a caller may send at once. */
  readonly capacity: number;
  /** The clock, in milliseconds. */
  readonly now?: (() => number) | undefined;
}

interface Bucket {
  tokens: number;
  /** When `tokens` was last brought up to date. */
  updatedMs: number;
}

/**
 * TokenBuckets keeps one token bucket per key, in memory. A full bucket is the same as no bucket,
 * so buckets that have refilled are dropped from time to time: memory follows the number of
 * callers active in the last few seconds, not every caller ever seen.
 */
export class TokenBuckets {
  readonly #rate: number;
  readonly #capacity: number;
  readonly #now: () => number;
  readonly #buckets = new Map<string, Bucket>();
  /** Time a bucket takes to refill from empty; also the interval between sweeps. */
  readonly #refillMs: number;
  #sweptMs: number;

  constructor(options: TokenBucketsOptions) {
    this.#rate = options.ratePerSecond;
    this.#capacity = options.capacity;
    this.#now = options.now ?? Date.now;
    this.#refillMs = Math.ceil((options.capacity / options.ratePerSecond) * 1000);
    this.#sweptMs = this.#now();
  }

  /** How many keys have a bucket that is not full (at the last sweep). */
  get size(): number {
    return this.#buckets.size;
  }

  /**
   * take removes one token from the key's bucket and returns 0, or, when the bucket has less
   * than one token, leaves it and returns the milliseconds until it will have one.
   */
  take(key: string): number {
    const now = this.#now();
    if (now - this.#sweptMs >= this.#refillMs) this.#sweep(now);
    const bucket = this.#buckets.get(key) ?? { tokens: this.#capacity, updatedMs: now };
    bucket.tokens = Math.min(this.#capacity, bucket.tokens + ((now - bucket.updatedMs) / 1000) * this.#rate);
    bucket.updatedMs = now;
    this.#buckets.set(key, bucket);
    if (bucket.tokens >= 1) {
      bucket.tokens -= 1;
      return 0;
    }
    return Math.ceil(((1 - bucket.tokens) / this.#rate) * 1000);
  }

  #sweep(now: number): void {
    this.#sweptMs = now;
    for (const [key, bucket] of this.#buckets) {
      if (now - bucket.updatedMs >= this.#refillMs) this.#buckets.delete(key);
    }
  }
}
