import { StoreError } from '../errors.ts';
import type { Mutation } from '../store.ts';
import { Decoder } from './codec.ts';
import { MutationType } from './protocol.ts';

/**
 * The embedded store's change feed, as the main thread sees it: positions, and the mutations of a
 * change as stored in the changes table (schema.ts).
 *
 * A position is `e1.<seq>`: every change of the table with a seq up to it has been yielded. Seqs
 * count all tables' changes, in commit order, so a position is meaningful for any table of the
 * store. The prefix names the format, so that a string another store made is refused.
 */
const POSITION = /^e1\.(0|[1-9][0-9]{0,18})$/;
const MAX_SEQ = 2n ** 63n - 1n;

export function formatPosition(seq: bigint): string {
  return `e1.${seq}`;
}

/** The seq of a position this store made, or INVALID_ARGUMENT. */
export function parsePosition(position: string): bigint {
  const match = POSITION.exec(position);
  const seq = match === null ? undefined : BigInt(match[1] as string);
  if (seq === undefined || seq > MAX_SEQ) throw invalidPosition(position);
  return seq;
}

export function invalidPosition(position: string): StoreError {
  // Only the length: the string is the caller's.
  return new StoreError('INVALID_ARGUMENT', `a change feed position of ${position.length} characters that this store did not make`);
}

/** Mutations decoded in one slice; a change with more is decoded over several, yielding between them. */
const MUTATIONS_PER_PIECE = 2048;

/**
 * Decodes the `mutations` column of a change into `out`, yielding after every
 * MUTATIONS_PER_PIECE mutations: `u32 count`, then each mutation as `u8 type` (MutationType)
 * followed by, for set, `family, column, value, i64 timestamp`; deleteColumn, `family, column`;
 * deleteFamily, `family`; deleteRow, nothing. Little-endian; a string or byte string is
 * `u32 length, bytes`.
 */
export function* decodeChangeMutations(bytes: Uint8Array, out: Mutation[]): Generator<void> {
  // The change's values are views into a buffer of its own: an attached one as it came, else a
  // copy, so that a change the caller keeps does not keep the whole message.
  let buffer: ArrayBuffer;
  if (bytes.buffer instanceof ArrayBuffer && bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength) {
    buffer = bytes.buffer;
  } else {
    const copy = new Uint8Array(bytes.byteLength);
    copy.set(bytes);
    buffer = copy.buffer;
  }
  const decoder = new Decoder(buffer);
  for (let count = decoder.u32(), i = 0; i < count; i++) {
    if (i > 0 && i % MUTATIONS_PER_PIECE === 0) yield;
    const type = decoder.u8();
    switch (type) {
      case MutationType.set: {
        const family = decoder.string();
        const column = decoder.bytes();
        const value = decoder.bytes();
        out.push({ type: 'set', family, column, value, timestampMicros: decoder.i64() });
        break;
      }
      case MutationType.deleteColumn: {
        const family = decoder.string();
        out.push({ type: 'deleteColumn', family, column: decoder.bytes() });
        break;
      }
      case MutationType.deleteFamily:
        out.push({ type: 'deleteFamily', family: decoder.string() });
        break;
      case MutationType.deleteRow:
        out.push({ type: 'deleteRow' });
        break;
      default:
        throw new Error(`unknown mutation type ${type} in a stored change`);
    }
  }
}
