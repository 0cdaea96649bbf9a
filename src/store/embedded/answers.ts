import { type StoreError } from '../errors.ts';
import { Encoder } from './codec.ts';
import { Status, encodeError } from './protocol.ts';

/**
 * A thread's message is flushed once it holds this much, so that the main thread decodes a
 * bounded amount per message (a few milliseconds) however large the result.
 */
export const MESSAGE_BYTES = 1 << 20;
export const MESSAGE_CELLS = 4096;

/**
 * Answers collects a thread's answers to a batch of requests into as few messages as the bounds
 * allow, and posts each message (transferring its buffer) when full and at the end of the batch.
 */
export class Answers {
  readonly #post: (buffer: ArrayBuffer, attachments: ArrayBuffer[]) => void;
  #encoder = new Encoder(4096);
  #cells = 0;
  #lengthAt = 0;
  /** Messages posted so far. */
  #messages = 0;

  /** `post` sends a message and the buffers attached to it, transferring them all. */
  constructor(post: (buffer: ArrayBuffer, attachments: ArrayBuffer[]) => void) {
    this.#post = post;
  }

  get encoder(): Encoder {
    return this.#encoder;
  }

  get full(): boolean {
    return this.#encoder.size >= MESSAGE_BYTES || this.#cells >= MESSAGE_CELLS;
  }

  /** Starts an answer, `u32 id, u8 status, u32 length, payload`; end() sets its length. */
  begin(id: number, status: number): Encoder {
    this.#encoder.u32(id);
    this.#encoder.u8(status);
    this.#lengthAt = this.#encoder.length;
    this.#encoder.u32(0);
    return this.#encoder;
  }

  /** Sets the status of the answer begun last (a read learns whether it is the last part only at the end). */
  setStatus(status: number): void {
    this.#encoder.setU8At(this.#lengthAt - 1, status);
  }

  end(): void {
    this.#encoder.u32At(this.#lengthAt, this.#encoder.length - this.#lengthAt - 4);
  }

  /** A whole answer whose payload `write` encodes. */
  answer(id: number, status: number, write?: (encoder: Encoder) => void): void {
    const encoder = this.begin(id, status);
    write?.(encoder);
    this.end();
  }

  failed(id: number, error: StoreError): void {
    this.answer(id, Status.failed, (encoder) => encodeError(encoder, error));
  }

  /** Where the next answer starts, to rewind to if the request it belongs to fails. */
  mark(): Mark {
    return { message: this.#messages, length: this.#encoder.length, attachments: this.#encoder.attachments };
  }

  /** Drops what a failed request wrote since mark() (parts already posted stay posted). */
  rewind(mark: Mark): void {
    if (mark.message === this.#messages) this.#encoder.truncate(mark.length, mark.attachments);
    else this.#encoder.truncate(0, 0);
  }

  countCell(): void {
    this.#cells++;
  }

  flush(): void {
    if (this.#encoder.length === 0) return;
    const attachments = this.#encoder.takeAttachments();
    this.#post(this.#encoder.finish(), attachments);
    this.#encoder = new Encoder(4096);
    this.#cells = 0;
    this.#messages++;
  }
}

/** Where an answer starts in the message being written (see Answers.mark). */
interface Mark {
  readonly message: number;
  readonly length: number;
  readonly attachments: number;
}

/**
 * RowAnswer writes the rows of one read request, `u32 segments, segment*` per answer; a row that
 * does not fit in one message continues in a segment of the next (`complete` 0), so both threads
 * work on bounded pieces while the read itself stays one transaction.
 */
export class RowAnswer {
  readonly #answers: Answers;
  readonly #id: number;
  #segmentsAt = -1;
  #segments = 0;
  #cellsAt = -1;
  #cells = 0;
  #rowIndex = 0;
  #key: Uint8Array = new Uint8Array(0);
  #family = '';
  #inRow = false;

  constructor(answers: Answers, id: number) {
    this.#answers = answers;
    this.#id = id;
  }

  beginRow(index: number, key: Uint8Array): void {
    this.#rowIndex = index;
    this.#key = key;
    this.#inRow = true;
    this.#openSegment();
  }

  cell(family: string, qualifier: Uint8Array, timestamp: bigint, value: Uint8Array): void {
    if (this.#answers.full) {
      this.#closeSegment(false);
      this.#closeAnswer(Status.part);
      this.#answers.flush();
      this.#openSegment();
    }
    const encoder = this.#answers.encoder;
    if (family === this.#family) {
      encoder.u8(0);
    } else {
      encoder.u8(1);
      encoder.string(family);
      this.#family = family;
    }
    encoder.bytes(qualifier);
    // The value is SQLite's copy, used for nothing else: a large one goes over without another.
    encoder.attach(value);
    encoder.i64(timestamp);
    this.#cells++;
    this.#answers.countCell();
  }

  /** Ends the row, and says whether it had a cell: a row without cells is dropped from the answer. */
  endRow(): boolean {
    const kept = this.#closeSegment(true);
    this.#inRow = false;
    return kept;
  }

  /** Whether the current message is full: a scan stops between rows there. */
  get full(): boolean {
    return this.#answers.full;
  }

  /** Ends the answer; `trailer` adds what the request's kind puts after the rows. */
  finish(trailer?: (encoder: Encoder) => void): void {
    if (this.#inRow) this.endRow();
    this.#ensureAnswer();
    trailer?.(this.#answers.encoder);
    this.#closeAnswer(Status.done);
  }

  #ensureAnswer(): void {
    if (this.#segmentsAt >= 0) return;
    const encoder = this.#answers.begin(this.#id, Status.part);
    this.#segmentsAt = encoder.length;
    encoder.u32(0);
    this.#segments = 0;
  }

  #openSegment(): void {
    this.#ensureAnswer();
    const encoder = this.#answers.encoder;
    this.#segments++;
    encoder.u32(this.#rowIndex);
    encoder.bytes(this.#key);
    this.#cellsAt = encoder.length;
    encoder.u32(0);
    this.#cells = 0;
    this.#family = '';
  }

  /** Returns false when the segment had no cell and was taken back out. */
  #closeSegment(complete: boolean): boolean {
    const encoder = this.#answers.encoder;
    if (this.#cells === 0) {
      // The segment's row index, key and cell count go; a continued row always has a cell.
      this.#segments--;
      encoder.truncate(this.#cellsAt - 4 - 4 - this.#key.byteLength);
      return false;
    }
    encoder.u32At(this.#cellsAt, this.#cells);
    encoder.u8(complete ? 1 : 0);
    return true;
  }

  #closeAnswer(status: number): void {
    this.#answers.encoder.u32At(this.#segmentsAt, this.#segments);
    this.#answers.setStatus(status);
    this.#answers.end();
    this.#segmentsAt = -1;
  }
}
