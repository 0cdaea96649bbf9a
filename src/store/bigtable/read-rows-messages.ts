import type { protos } from '@google-cloud/bigtable';
import { type MergedRow, RowMerger } from './row-chunks.ts';
import type { Turns } from '../../lib/turns.ts';
import { readVarint } from './wire.ts';

type ReadRowsResponse = protos.google.bigtable.v2.IReadRowsResponse;

/** The generated client's deserializer of a ReadRowsResponse (the stub method's responseDeserialize). */
export type DeserializeReadRows = (message: Buffer) => ReadRowsResponse;

/** Bytes of a message decoded in one go: well under a millisecond of work. */
const PIECE_BYTES = 32 * 1024;

/** Whether a ReadRows message is large enough to be decoded a piece at a time. */
export function isLarge(message: Buffer): boolean {
  return message.length > PIECE_BYTES;
}

/**
 * ReadRowsDecoder turns the encoded messages of one ReadRows stream into rows, with the client's
 * own deserializer. The emulator sends a whole row, however wide, as one message, whose decoding
 * in one go held the event loop far too long for a wide row (docs/performance.md); so a
 * large message is cut at the boundaries of its top-level fields (the chunks) into pieces of about
 * PIECE_BYTES, decoded one after another with pauses between slices. Cutting between fields keeps
 * every chunk whole, and a repeated field's elements may be split over messages.
 *
 * Throws on a message or stream that breaks the protocol.
 */
export class ReadRowsDecoder {
  readonly #merger = new RowMerger();
  readonly #deserialize: DeserializeReadRows;

  constructor(deserialize: DeserializeReadRows) {
    this.#deserialize = deserialize;
  }

  /** Decodes one message in one go; returns the rows it commits. */
  take(message: Buffer): MergedRow[] {
    const rows: MergedRow[] = [];
    this.#push(this.#deserialize(message), rows);
    return rows;
  }

  /** Decodes one message a piece at a time, pausing between slices; returns the rows it commits. */
  async takeInSlices(message: Buffer, turns: Turns): Promise<MergedRow[]> {
    const rows: MergedRow[] = [];
    for (const piece of fieldPieces(message, PIECE_BYTES)) {
      await turns.pause();
      this.#push(this.#deserialize(piece), rows);
    }
    return rows;
  }

  /** Checks the stream ended between rows. */
  end(): void {
    this.#merger.end();
  }

  #push(response: ReadRowsResponse, rows: MergedRow[]): void {
    for (const chunk of response.chunks ?? []) {
      const row = this.#merger.push(chunk);
      if (row !== undefined) rows.push(row);
    }
  }
}

/** Splits an encoded message into runs of whole top-level fields of at least `size` bytes (the last may be shorter). */
export function* fieldPieces(message: Buffer, size: number): Generator<Buffer> {
  let start = 0;
  let offset = 0;
  while (offset < message.length) {
    const [tag, afterTag] = readVarint(message, offset, 'ReadRows message');
    switch (tag & 7) {
      case 0:
        offset = readVarint(message, afterTag, 'ReadRows message')[1];
        break;
      case 1:
        offset = afterTag + 8;
        break;
      case 2: {
        const [length, afterLength] = readVarint(message, afterTag, 'ReadRows message');
        offset = afterLength + length;
        break;
      }
      case 5:
        offset = afterTag + 4;
        break;
      default:
        throw new Error(`ReadRows sent a field of wire type ${tag & 7}`);
    }
    if (offset > message.length) throw new Error('ReadRows sent a truncated message');
    if (offset - start >= size) {
      yield message.subarray(start, offset);
      start = offset;
    }
  }
  if (start < offset) yield message.subarray(start, offset);
}
