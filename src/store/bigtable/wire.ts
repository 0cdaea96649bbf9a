/** The few pieces of protobuf's wire format the store needs to cut and join encoded messages at field boundaries. */

/** The varint at `offset` in `bytes` and the offset after it; throws, naming `what`, on a malformed one. */
export function readVarint(bytes: Buffer, offset: number, what: string): [number, number] {
  let value = 0;
  let scale = 1;
  for (let index = offset; index < bytes.length && index < offset + 10; index++) {
    const byte = bytes[index] as number;
    value += (byte & 0x7f) * scale;
    if (byte < 0x80) return [value, index + 1];
    scale *= 128;
  }
  throw new Error(`${what} has a malformed varint`);
}

/** The varint encoding of a non-negative integer. */
export function varintOf(value: number): Buffer {
  const bytes: number[] = [];
  let rest = value;
  while (rest >= 0x80) {
    bytes.push((rest % 0x80) | 0x80);
    rest = Math.floor(rest / 0x80);
  }
  bytes.push(rest);
  return Buffer.from(bytes);
}
