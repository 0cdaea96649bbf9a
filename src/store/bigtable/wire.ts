import { readVarint as readAnyVarint, varint } from '../../lib/varint.ts';

/** The few pieces of protobuf's wire format the store needs to cut and join encoded messages at field boundaries. */

/** The varint at `offset` in `bytes` and the offset after it; throws, naming `what`, on a malformed one. */
export function readVarint(bytes: Buffer, offset: number, what: string): [number, number] {
  const read = readAnyVarint(bytes, offset, 10);
  if (read === undefined) throw new Error(`${what} has a malformed varint`);
  return read;
}

/** The varint encoding of a non-negative integer. */
export function varintOf(value: number): Buffer {
  return Buffer.from(varint(value));
}
