/** Which bound refused a request. */
export type InflightRefusal = 'total' | 'key';

/**
 * InflightLimits counts work in flight, in total and per key (a caller), and refuses more than
 * `total` at once in all, or more than `perKey` at once for one key once `perKeyFrom` are in
 * flight in all. Below that point one key may take what no other is using, so a busy caller is
 * not refused while the service has room (work-conserving); from it on, only keys within their
 * share get the slots left, so that the others are always served. Keys with nothing in flight are
 * forgotten, so memory follows the callers active now.
 */
export class InflightLimits {
  readonly total: number;
  readonly perKey: number;
  /** Work in flight in all from which `perKey` applies; 0: always. */
  readonly perKeyFrom: number;
  readonly #byKey = new Map<string, number>();
  #inflight = 0;

  constructor(bounds: { total: number; perKey: number; perKeyFrom?: number }) {
    this.total = bounds.total;
    this.perKey = bounds.perKey;
    this.perKeyFrom = bounds.perKeyFrom ?? 0;
  }

  /** Work in flight now, in total. */
  get inflight(): number {
    return this.#inflight;
  }

  /** Work in flight now for `key`. */
  inflightFor(key: string): number {
    return this.#byKey.get(key) ?? 0;
  }

  /**
   * Counts one more for `key` and returns undefined, or counts nothing and says which bound
   * refused it (the total first: when all is taken, no caller is at fault). Every acquisition
   * must be released once.
   */
  acquire(key: string): InflightRefusal | undefined {
    if (this.#inflight >= this.total) return 'total';
    const held = this.#byKey.get(key) ?? 0;
    if (held >= this.perKey && this.#inflight >= this.perKeyFrom) return 'key';
    this.#byKey.set(key, held + 1);
    this.#inflight += 1;
    return undefined;
  }

  release(key: string): void {
    const held = this.#byKey.get(key) ?? 0;
    if (held <= 0) return;
    if (held === 1) this.#byKey.delete(key);
    else this.#byKey.set(key, held - 1);
    this.#inflight -= 1;
  }
}
