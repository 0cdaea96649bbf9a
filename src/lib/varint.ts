/**
 * Unsigned LEB128, protobuf's varint, of non-negative safe integers: page tokens use it, and so
 * does the Bigtable driver to cut and join encoded messages.
 */

/** The varint encoding of `value`. */
export function varint(value: number): number[] {
  const bytes: number[] = [];
  let rest = value;
  while (rest >= 0x80) {
    bytes.push((rest % 0x80) | 0x80);
    rest = Math.floor(rest / 0x80);
  }
  bytes.push(rest);
  return bytes;
}

/** The varint at `start` in `bytes` and the offset after it; undefined if it runs past the end or past `maxBytes`. */
export function readVarint(bytes: Buffer, start: number, maxBytes: number): [number, number] | undefined {
  let value = 0;
  let scale = 1;
  for (let offset = start; offset < bytes.length && offset < start + maxBytes; offset += 1) {
    const byte = bytes[offset] ?? 0;
    value += (byte & 0x7f) * scale;
    if ((byte & 0x80) === 0) return [value, offset + 1];
    scale *= 0x80;
  }
  return undefined;
}
