/**
 * The binary encoding of the messages between the embedded store and its SQLite threads. Each
 * message is one ArrayBuffer, transferred rather than copied, so that a large row crosses the
 * thread boundary without a copy and without the cost of cloning one object per cell. Decoded
 * bytes are views into the message's buffer.
 */

const INITIAL_BYTES = 256;
const utf8 = new TextEncoder();
const utf8Decoder = new TextDecoder('utf-8', { fatal: true });

/** Encoder appends values to a growing buffer; finish() hands the buffer over. */
export class Encoder {
  #bytes: Uint8Array;
  #view: DataView;
  #length = 0;

  constructor(initialBytes = INITIAL_BYTES) {
    this.#bytes = new Uint8Array(initialBytes);
    this.#view = new DataView(this.#bytes.buffer);
  }

  get length(): number {
    return this.#length;
  }

  u8(value: number): void {
    this.#reserve(1);
    this.#bytes[this.#length++] = value;
  }

  u32(value: number): void {
    this.#reserve(4);
    this.#view.setUint32(this.#length, value, true);
    this.#length += 4;
  }

  /** Overwrites a u32 written earlier at `offset` (counts known only afterwards). */
  u32At(offset: number, value: number): void {
    this.#view.setUint32(offset, value, true);
  }

  /** Overwrites a u8 written earlier at `offset`. */
  setU8At(offset: number, value: number): void {
    this.#bytes[offset] = value;
  }

  /** Drops everything written from `length` on. */
  truncate(length: number): void {
    this.#length = length;
  }

  f64(value: number): void {
    this.#reserve(8);
    this.#view.setFloat64(this.#length, value, true);
    this.#length += 8;
  }

  i64(value: bigint): void {
    this.#reserve(8);
    this.#view.setBigInt64(this.#length, value, true);
    this.#length += 8;
  }

  bytes(value: Uint8Array): void {
    const length = value.byteLength;
    this.#reserve(4 + length);
    this.#view.setUint32(this.#length, length, true);
    this.#length += 4;
    // A loop beats set() for the short keys and columns that make up most cells.
    if (length <= 16) {
      for (let i = 0; i < length; i++) this.#bytes[this.#length + i] = value[i] as number;
    } else {
      this.#bytes.set(value, this.#length);
    }
    this.#length += length;
  }

  /** A string as UTF-8 (names of instances, tables and families are short ASCII). */
  string(value: string): void {
    this.#reserve(4 + value.length * 3);
    const { written } = utf8.encodeInto(value, this.#bytes.subarray(this.#length + 4));
    this.#view.setUint32(this.#length, written, true);
    this.#length += 4 + written;
  }

  /** Returns the encoded bytes as an ArrayBuffer of exactly their length, to be transferred. */
  finish(): ArrayBuffer {
    const buffer = (this.#bytes.buffer as ArrayBuffer).transfer(this.#length);
    this.#bytes = new Uint8Array(0);
    this.#view = new DataView(this.#bytes.buffer);
    this.#length = 0;
    return buffer;
  }

  #reserve(more: number): void {
    const needed = this.#length + more;
    if (needed <= this.#bytes.byteLength) return;
    let size = Math.max(this.#bytes.byteLength * 2, INITIAL_BYTES);
    while (size < needed) size *= 2;
    const grown = new Uint8Array(size);
    grown.set(this.#bytes.subarray(0, this.#length));
    this.#bytes = grown;
    this.#view = new DataView(grown.buffer);
  }
}

/** Decoder reads what an Encoder wrote, in the same order. */
export class Decoder {
  readonly #buffer: ArrayBuffer;
  readonly #view: DataView<ArrayBuffer>;
  readonly #end: number;
  #offset: number;
  #last: bigint | undefined;
  #lastLow = 0;
  #lastHigh = 0;

  constructor(buffer: ArrayBuffer, offset = 0, end = buffer.byteLength, view: DataView<ArrayBuffer> = new DataView(buffer)) {
    this.#buffer = buffer;
    this.#view = view;
    this.#offset = offset;
    this.#end = end;
  }

  get done(): boolean {
    return this.#offset >= this.#end;
  }

  /** A decoder of the next `length` bytes, which this one skips. */
  sub(length: number): Decoder {
    const sub = new Decoder(this.#buffer, this.#offset, this.#offset + length, this.#view);
    this.#offset += length;
    return sub;
  }

  u8(): number {
    return this.#view.getUint8(this.#offset++);
  }

  u32(): number {
    const value = this.#view.getUint32(this.#offset, true);
    this.#offset += 4;
    return value;
  }

  f64(): number {
    const value = this.#view.getFloat64(this.#offset, true);
    this.#offset += 8;
    return value;
  }

  i64(): bigint {
    const value = this.#view.getBigInt64(this.#offset, true);
    this.#offset += 8;
    return value;
  }

  /**
   * An i64 like i64(), but the same BigInt as last time when the value repeats: cells written
   * together share a timestamp, and one BigInt for a run of them is less for the GC.
   */
  i64Repeated(): bigint {
    const low = this.#view.getUint32(this.#offset, true);
    const high = this.#view.getInt32(this.#offset + 4, true);
    if (low !== this.#lastLow || high !== this.#lastHigh || this.#last === undefined) {
      this.#last = this.#view.getBigInt64(this.#offset, true);
      this.#lastLow = low;
      this.#lastHigh = high;
    }
    this.#offset += 8;
    return this.#last;
  }

  /** A view of the bytes, sharing the message's buffer (no copy). */
  bytes(): Buffer {
    const length = this.u32();
    const value = Buffer.from(this.#buffer, this.#offset, length);
    this.#offset += length;
    return value;
  }

  string(): string {
    const length = this.u32();
    const value = utf8Decoder.decode(new Uint8Array(this.#buffer, this.#offset, length));
    this.#offset += length;
    return value;
  }
}
