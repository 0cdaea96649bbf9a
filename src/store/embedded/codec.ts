/**
 * The binary encoding of the messages between the embedded store and its SQLite threads. Each
 * message is one ArrayBuffer, transferred rather than copied, so that a large row crosses the
 * thread boundary without a copy and without the cost of cloning one object per cell. Decoded
 * bytes are views into the message's buffer.
 *
 * A large value a thread read from SQLite is not copied into the message at all: its own buffer
 * is attached to the message and transferred with it (`attach`). Copied, it would leave garbage
 * outside the thread's small heap, which V8 collects only once some 64 MB of it has piled up in
 * each thread.
 */

const INITIAL_BYTES = 256;
/** Values at least this large are attached rather than copied: a transfer costs about what copying a few KiB does. */
export const ATTACH_MIN_BYTES = 64 * 1024;
/**
 * Bytes of a tall value copied into a message at a time by bytesInPieces: a few milliseconds, where
 * one copy of the largest values held the event loop far longer (most of it the message's new pages
 * touched for the first time; figures: docs/performance.md).
 */
export const COPY_PIECE_BYTES = 4 * 1024 * 1024;
/** Stands for a length where the bytes are the message's attachment whose index follows. */
const ATTACHED = 0xffff_ffff;
const utf8 = new TextEncoder();
const utf8Decoder = new TextDecoder('utf-8', { fatal: true });

/** Encoder appends values to a growing buffer; finish() hands the buffer over. */
export class Encoder {
  #bytes: Uint8Array;
  #view: DataView;
  #length = 0;
  #attachments: ArrayBuffer[] = [];
  #attachedBytes = 0;

  constructor(initialBytes = INITIAL_BYTES) {
    this.#bytes = new Uint8Array(initialBytes);
    this.#view = new DataView(this.#bytes.buffer);
  }

  get length(): number {
    return this.#length;
  }

  /** How many buffers are attached so far. */
  get attachments(): number {
    return this.#attachments.length;
  }

  /** The bytes of the message, attached ones included. */
  get size(): number {
    return this.#length + this.#attachedBytes;
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

  /** Drops everything written from `length` on, and the attachments from the `attachments`-th on. */
  truncate(length: number, attachments = this.#attachments.length): void {
    this.#length = length;
    for (const dropped of this.#attachments.splice(attachments)) this.#attachedBytes -= dropped.byteLength;
  }

  /**
   * A view of the bytes written so far, valid until the next write or truncate: for a caller that
   * copies them at once (SQLite copies a bound BLOB) and reuses the encoder.
   */
  written(): Uint8Array {
    return this.#bytes.subarray(0, this.#length);
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

  /**
   * bytes(), a COPY_PIECE_BYTES piece at a time for a value of more than one piece, yielding
   * between pieces: for an encoder that is run a piece per slice (ThreadClient.requestLarge), and
   * that nothing else appends to meanwhile.
   */
  *bytesInPieces(value: Uint8Array): Generator<void> {
    const length = value.byteLength;
    if (length <= COPY_PIECE_BYTES) {
      this.bytes(value);
      return;
    }
    this.#reserve(4 + length);
    this.#view.setUint32(this.#length, length, true);
    this.#length += 4;
    for (let start = 0; start < length; start += COPY_PIECE_BYTES) {
      if (start > 0) yield;
      const piece = value.subarray(start, start + COPY_PIECE_BYTES);
      this.#bytes.set(piece, this.#length);
      this.#length += piece.byteLength;
    }
  }

  /**
   * bytes(), but a large value whose buffer holds nothing else is attached to the message rather
   * than copied into it. The message's sender then transfers the buffer: the caller gives the
   * value up and must not touch it again.
   */
  attach(value: Uint8Array): void {
    const buffer = value.buffer;
    if (value.byteLength < ATTACH_MIN_BYTES || !(buffer instanceof ArrayBuffer) || value.byteOffset !== 0 || buffer.byteLength !== value.byteLength) {
      this.bytes(value);
      return;
    }
    this.u32(ATTACHED);
    this.u32(this.#attachments.length);
    this.#attachments.push(buffer);
    this.#attachedBytes += buffer.byteLength;
  }

  /** A string as UTF-8 (names of instances, tables and families are short ASCII). */
  string(value: string): void {
    this.#reserve(4 + value.length * 3);
    const { written } = utf8.encodeInto(value, this.#bytes.subarray(this.#length + 4));
    this.#view.setUint32(this.#length, written, true);
    this.#length += 4 + written;
  }

  /** The buffers attached since the last call, to be transferred with the message finish() gives. */
  takeAttachments(): ArrayBuffer[] {
    const attachments = this.#attachments;
    this.#attachments = [];
    this.#attachedBytes = 0;
    return attachments;
  }

  /** Returns the encoded bytes as an ArrayBuffer of exactly their length, to be transferred. */
  finish(): ArrayBuffer {
    return this.#finish(this.#length);
  }

  /**
   * finish(), but the buffer may go on past the encoded bytes, in zeros, by up to an eighth of
   * its size: cutting that off would copy the whole message, tens of milliseconds for a tall value. For
   * messages whose reader stops at a zero where the next item would start.
   */
  finishPadded(): ArrayBuffer {
    const size = this.#bytes.byteLength;
    return this.#finish(size - this.#length <= size / 8 ? size : this.#length);
  }

  #finish(length: number): ArrayBuffer {
    const buffer = (this.#bytes.buffer as ArrayBuffer).transfer(length);
    this.#bytes = new Uint8Array(0);
    this.#view = new DataView(this.#bytes.buffer);
    this.#length = 0;
    return buffer;
  }

  #reserve(more: number): void {
    const needed = this.#length + more;
    if (needed <= this.#bytes.byteLength) return;
    // Doubling, for many small appends; but one append larger than that (a tall value) gets the
    // room it needs and a sixteenth more for what may follow it. Doubling up to it would allocate
    // up to twice the value, copying on each step.
    const size = Math.max(this.#bytes.byteLength * 2, INITIAL_BYTES, needed + Math.ceil(needed / 16));
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
  readonly #attachments: readonly ArrayBuffer[];
  readonly #end: number;
  #offset: number;
  #last: bigint | undefined;
  #lastLow = 0;
  #lastHigh = 0;

  /** `attachments`: the buffers transferred with the message, in order. */
  constructor(
    buffer: ArrayBuffer,
    attachments: readonly ArrayBuffer[] = [],
    offset = 0,
    end = buffer.byteLength,
    view: DataView<ArrayBuffer> = new DataView(buffer),
  ) {
    this.#buffer = buffer;
    this.#attachments = attachments;
    this.#view = view;
    this.#offset = offset;
    this.#end = end;
  }

  get done(): boolean {
    return this.#offset >= this.#end;
  }

  /** Bytes left to read. */
  get remaining(): number {
    return this.#end - this.#offset;
  }

  /** A decoder of the next `length` bytes, which this one skips. */
  sub(length: number): Decoder {
    const sub = new Decoder(this.#buffer, this.#attachments, this.#offset, this.#offset + length, this.#view);
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

  /** A view of the bytes, sharing the message's buffer or the attached one (no copy). */
  bytes(): Buffer {
    const length = this.u32();
    if (length === ATTACHED) {
      const attached = this.#attachments[this.u32()];
      if (attached === undefined) throw new RangeError('a value names an attachment the message does not have');
      return Buffer.from(attached);
    }
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
