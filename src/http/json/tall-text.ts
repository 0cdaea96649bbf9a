import { Turns } from '../../lib/turns.ts';

/**
 * The bytes of a request's tall values, made a slice at a time. Buffer.from makes a string into
 * bytes in one go, holding the event loop for tens of milliseconds at the largest values, most of
 * it the new buffer's pages being touched for the first time (figures: docs/performance.md).
 */

/** Text of at least this many characters is tall: made into bytes a slice at a time. */
export const TALL_CHARS = 1024 * 1024;

/** Characters made into bytes at a time: a multiple of 4, so that base64 is cut between its groups. */
const SLICE_CHARS = 256 * 1024;

export type TextEncoding = 'utf8' | 'base64';

/**
 * The bytes `text` stands for (its UTF-8, or the bytes its base64 encodes), as Buffer.from gives
 * them, with other work served between slices when the slice has had its time. Valid base64 only:
 * it is cut every SLICE_CHARS characters, between groups of four.
 */
export async function textBytes(text: string, encoding: TextEncoding, turns: Turns = new Turns()): Promise<Buffer> {
  if (text.length < TALL_CHARS) return Buffer.from(text, encoding);
  const bytes = Buffer.allocUnsafeSlow(Buffer.byteLength(text, encoding));
  let written = 0;
  for (let start = 0; start < text.length; ) {
    let end = Math.min(start + SLICE_CHARS, text.length);
    // A pair of surrogates stays in one slice; a lone one becomes U+FFFD either way.
    if (encoding === 'utf8' && end < text.length && isHighSurrogate(text.charCodeAt(end - 1))) end -= 1;
    written += bytes.write(text.slice(start, end), written, encoding);
    start = end;
    await turns.pause();
  }
  return written === bytes.length ? bytes : bytes.subarray(0, written);
}

/**
 * The bytes of the tall texts among `items` (`text` picks each one's text, `encoding` its
 * encoding), by item. Shorter texts are not in the map: Buffer.from them where they are used.
 */
export async function tallTextBytes<T extends object>(
  items: readonly T[],
  text: (item: T) => string | undefined,
  encoding: (item: T) => TextEncoding,
): Promise<ReadonlyMap<T, Buffer>> {
  const tall = new Map<T, Buffer>();
  const turns = new Turns();
  for (const item of items) {
    const value = text(item);
    if (value !== undefined && value.length >= TALL_CHARS) tall.set(item, await textBytes(value, encoding(item), turns));
  }
  return tall;
}

function isHighSurrogate(code: number): boolean {
  return code >= 0xd800 && code <= 0xdbff;
}
