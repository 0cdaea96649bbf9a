import { isUtf8 } from 'node:buffer';
import { Readable } from 'node:stream';
import type { Context } from 'koa';
import { Turns } from '../../lib/turns.ts';

/** Arrays of at most this many items are rendered in one go: the answer is small whatever it holds. */
const ONE_GO_ITEMS = 32;

/** Text rendered before it is handed on: one socket write's worth. */
const CHUNK_CHARS = 64 * 1024;

/**
 * Text short of this is never cut for time: sending it is cheaper than a yield, and on a busy
 * machine the clock also runs while the process waits for a core, so a short answer would go out
 * chunked, without its length, now and then.
 */
const MIN_CUT_CHARS = 4 * 1024;

/** Strings of at least this many bytes may be sent as their bytes (JsonText): below it, making the string costs less than checking. */
const JSON_TEXT_MIN_BYTES = 64 * 1024;

/** The bytes searched for at a time for those JSON escapes: they stay in the core's cache. */
const SCAN_BLOCK_BYTES = 32 * 1024;

/** Bytes made into base64 at a time: a multiple of 3. */
const BASE64_BLOCK_BYTES = 48 * 1024;

/** The bytes that JSON escapes in a string: the quote, the backslash and the control characters. */
const ESCAPED_BYTES = [0x22, 0x5c, ...Array.from({ length: 0x20 }, (_, byte) => byte)];

/** How JSON.stringify writes each byte it escapes: the short escapes, else \u00xx. */
const ESCAPES: ReadonlyMap<number, Buffer> = new Map(ESCAPED_BYTES.map((byte) => [byte, Buffer.from(JSON.stringify(String.fromCharCode(byte)).slice(1, -1), 'latin1')]));

/**
 * A block of UTF-8 text as JSON writes it between quotes. Every byte JSON escapes is ASCII, and no
 * byte of a character of two or more is ASCII, so the block is escaped byte by byte, wherever it
 * was cut.
 */
function escapedJson(block: Buffer): Buffer {
  const parts: Buffer[] = [];
  let from = 0;
  for (let index = 0; index < block.length; index++) {
    const escape = ESCAPES.get(block[index] as number);
    if (escape === undefined) continue;
    if (from < index) parts.push(block.subarray(from, index));
    parts.push(escape);
    from = index + 1;
  }
  if (from < block.length) parts.push(block.subarray(from));
  return Buffer.concat(parts);
}

/** Marks an object of an answer that holds a JsonText, itself or deeper (markHoldsJsonText). */
const HOLDS_JSON_TEXT = Symbol('holds JsonText');

/**
 * JsonText is a string of an answer kept as its UTF-8 bytes, which setJsonAnswer sends without
 * making a string of them: a large value as text, or in base64. A large value made into a
 * string, then into JSON, then back into bytes costs CPU and three copies (docs/performance.md);
 * as is, it costs a look for the bytes JSON escapes, made block by block as it is sent (jsonBlocks), with
 * other work served between blocks. Wherever else it is serialized, it is that string.
 */
export class JsonText {
  readonly bytes: Buffer;
  /** Whether the bytes may hold some that JSON escapes (text), or surely not (base64). */
  readonly #mayEscape: boolean;

  private constructor(bytes: Buffer, mayEscape: boolean) {
    this.bytes = bytes;
    this.#mayEscape = mayEscape;
  }

  /** The bytes as text, when they are long and valid UTF-8; else undefined. */
  static utf8(bytes: Buffer): JsonText | undefined {
    if (bytes.length < JSON_TEXT_MIN_BYTES || !isUtf8(bytes)) return undefined;
    return new JsonText(bytes, true);
  }

  /**
   * The JSON of the text between its quotes, as JSON.stringify writes it, a block at a time; other
   * work is served (a yield) between blocks when `turns` says the slice has had its time. Blocks with
   * nothing to escape are the bytes themselves.
   */
  async *jsonBlocks(turns: Turns): AsyncGenerator<Buffer> {
    if (!this.#mayEscape) {
      yield this.bytes;
      return;
    }
    let plainFrom = 0;
    for (let start = 0; start < this.bytes.length; start += SCAN_BLOCK_BYTES) {
      const block = this.bytes.subarray(start, start + SCAN_BLOCK_BYTES);
      // Each search is a native scan, far cheaper than making the string and its JSON. They run a
      // block at a time so that the bytes come from memory once: all of them over a whole tall
      // value at once cost more than making its string (docs/performance.md).
      if (ESCAPED_BYTES.some((byte) => block.includes(byte))) {
        if (plainFrom < start) yield this.bytes.subarray(plainFrom, start);
        yield escapedJson(block);
        plainFrom = start + block.length;
      }
      if (turns.due()) {
        if (plainFrom < start + block.length) yield this.bytes.subarray(plainFrom, start + block.length);
        plainFrom = start + block.length;
        await turns.next();
      }
    }
    if (plainFrom < this.bytes.length) yield this.bytes.subarray(plainFrom);
  }

  /**
   * The bytes in base64, when they are long; else undefined. Base64 needs no escaping, so it is
   * written straight into bytes, a block at a time: the string of each block is short-lived, where
   * one string of the whole value would sit among the large objects until the next full garbage
   * collection. It costs a fraction of what one string per value, or its JSON, costs (figures:
   * docs/performance.md).
   */
  static base64(bytes: Buffer): JsonText | undefined {
    if (bytes.length < JSON_TEXT_MIN_BYTES) return undefined;
    const text = Buffer.allocUnsafe(Math.ceil(bytes.length / 3) * 4);
    let length = 0;
    // Blocks of a multiple of 3 bytes: their base64 strings join with no padding between them.
    for (let start = 0; start < bytes.length; start += BASE64_BLOCK_BYTES) {
      length += text.write(bytes.subarray(start, start + BASE64_BLOCK_BYTES).toString('base64'), length, 'latin1');
    }
    return new JsonText(text, false);
  }

  toJSON(): string {
    return this.bytes.toString('utf8');
  }
}

/** Marks `object`, which holds a JsonText itself or deeper, for setJsonAnswer to send its bytes as they are. */
export function markHoldsJsonText<T extends object>(object: T): T {
  (object as Record<symbol, boolean>)[HOLDS_JSON_TEXT] = true;
  return object;
}

/** Bytes that are valid UTF-8, as an answer's text: JsonText when they may be (JsonText.utf8), else a string. */
export function utf8Value(bytes: Buffer): string | JsonText {
  return JsonText.utf8(bytes) ?? bytes.toString('utf8');
}

/** Bytes as an answer's base64: JsonText when they may be (JsonText.base64), else a string. */
export function base64Value(bytes: Buffer): string | JsonText {
  return JsonText.base64(bytes) ?? bytes.toString('base64');
}

/** `object`, marked as holding a JsonText when `value`, one of its members, is one. */
export function markedFor<T extends object>(object: T, value: string | JsonText): T {
  return value instanceof JsonText ? markHoldsJsonText(object) : object;
}

function holdsJsonText(value: unknown): boolean {
  return typeof value === 'object' && value !== null && (value as Record<symbol, unknown>)[HOLDS_JSON_TEXT] === true;
}

/**
 * setJsonAnswer makes `value` the response body, as JSON. A small answer goes out as one text, as
 * Koa would render it. An answer with a long list (a row of 100,000 cells, a scan page of large
 * rows) is rendered item by item, a chunk (a slice) at a time, yielding between chunks,
 * and its text is never whole in memory: rendering a large answer at once held the event loop for
 * tens of milliseconds and kept the text, and its UTF-8 copy, alive until sent (docs/performance.md). So is an answer with a list of
 * items marked as holding a JsonText, whose bytes go out as they are. The bytes are the same as
 * JSON.stringify's; the answer is sent chunked when it is longer than one chunk.
 */
export function setJsonAnswer(ctx: Context, value: unknown): void {
  ctx.type = 'application/json';
  if (!inPieces(value)) {
    ctx.body = value;
    return;
  }
  const pieces = piecesOf(value);
  // A chunk is cut short when its slice has had its time, and the next is rendered after a yield.
  const turns = new Turns();
  const first = nextChunk(pieces, turns);
  if (first.done) {
    ctx.body = first.text;
    return;
  }
  ctx.body = Readable.from(chunks(first, pieces, turns), { objectMode: false });
}

/**
 * The bytes setJsonAnswer sends for `value`, for an answer that writes its body itself (a
 * StreamedAnswer): the same JSON, rendered the same way, a chunk at a time.
 */
export async function* jsonAnswerChunks(value: unknown): AsyncGenerator<Buffer> {
  if (!inPieces(value)) {
    yield Buffer.from(JSON.stringify(value));
    return;
  }
  const pieces = piecesOf(value);
  const turns = new Turns();
  yield* chunks(nextChunk(pieces, turns), pieces, turns);
}

/**
 * Whether `value` is a plain object to render a slice at a time: with a list of more than ONE_GO_ITEMS
 * items among its members, or of items marked as holding a JsonText.
 */
function inPieces(value: unknown): value is Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value) || 'toJSON' in value) return false;
  return Object.values(value).some((member) => Array.isArray(member) && (member.length > ONE_GO_ITEMS || member.some(holdsJsonText)));
}

/** The JSON text of `value`, in the order JSON.stringify writes it: its lists item by item, and JsonText as bytes. */
function* piecesOf(value: Record<string, unknown>): Generator<string | JsonText> {
  yield '{';
  let separator = '';
  for (const [key, member] of Object.entries(value)) {
    const head = `${separator}${JSON.stringify(key)}:`;
    if (!Array.isArray(member) || (member.length <= ONE_GO_ITEMS && !member.some(holdsJsonText))) {
      const text = JSON.stringify(member);
      if (text === undefined) continue; // JSON.stringify leaves out members that have no JSON
      yield `${head}${text}`;
      separator = ',';
      continue;
    }
    separator = ',';
    yield `${head}[`;
    for (let index = 0; index < member.length; index++) {
      const item: unknown = member[index];
      if (index > 0) yield ',';
      if (holdsJsonText(item)) yield* jsonPieces(item);
      // As in JSON.stringify, an item that has no JSON (undefined, a function) is null.
      else yield JSON.stringify(item) ?? 'null';
    }
    yield ']';
  }
  yield '}';
}

/**
 * jsonPieces writes `value` as JSON.stringify does, byte for byte, but a JsonText as its bytes.
 * `value` has JSON (JSON.stringify does not answer undefined for it). Exported for its test.
 */
export function* jsonPieces(value: unknown): Generator<string | JsonText> {
  if (value instanceof JsonText) {
    yield '"';
    yield value;
    yield '"';
    return;
  }
  if (typeof value !== 'object' || value === null || ('toJSON' in value && typeof value.toJSON === 'function')) {
    yield JSON.stringify(value);
    return;
  }
  if (Array.isArray(value)) {
    yield '[';
    for (let index = 0; index < value.length; index++) {
      if (index > 0) yield ',';
      const item: unknown = value[index];
      if (hasJson(item)) yield* jsonPieces(item);
      else yield 'null';
    }
    yield ']';
    return;
  }
  yield '{';
  let separator = '';
  for (const [key, member] of Object.entries(value)) {
    if (!hasJson(member)) continue;
    yield `${separator}${JSON.stringify(key)}:`;
    yield* jsonPieces(member);
    separator = ',';
  }
  yield '}';
}

/** Whether JSON.stringify gives `value` a text of its own (undefined, functions and symbols have none). */
function hasJson(value: unknown): boolean {
  return value !== undefined && typeof value !== 'function' && typeof value !== 'symbol';
}

/** A chunk of the answer: text, and the JsonText that follows it, if it ended there. */
interface Chunk {
  readonly text: string;
  readonly json?: JsonText;
  readonly done: boolean;
}

/** The next CHUNK_CHARS or so of text, or what is left of it, and whether that was the last; it ends after a JsonText's bytes. */
function nextChunk(pieces: Iterator<string | JsonText>, turns: Turns): Chunk {
  let text = '';
  for (let count = 1; ; count++) {
    const piece = pieces.next();
    if (piece.done === true) return { text, done: true };
    if (typeof piece.value !== 'string') return { text, json: piece.value, done: false };
    text += piece.value;
    // Time is checked too, every 64 pieces: many items may be slow to render.
    if (text.length >= CHUNK_CHARS || ((count & 63) === 0 && text.length >= MIN_CUT_CHARS && turns.due())) {
      return { text, done: false };
    }
  }
}

/** The answer's chunks as UTF-8 bytes, each rendered after a yield. */
async function* chunks(first: Chunk, pieces: Iterator<string | JsonText>, turns: Turns): AsyncGenerator<Buffer> {
  let chunk = first;
  for (;;) {
    if (chunk.text !== '') yield Buffer.from(chunk.text);
    if (chunk.json !== undefined) yield* chunk.json.jsonBlocks(turns);
    if (chunk.done) return;
    await turns.next();
    chunk = nextChunk(pieces, turns);
  }
}
