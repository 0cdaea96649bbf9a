import { Readable } from 'node:stream';
import type { Context } from 'koa';
import { Turns } from '../store/turns.ts';

/** Arrays of at most this many items are rendered in one go: the answer is small whatever it holds. */
const ONE_GO_ITEMS = 32;

/** Text rendered before it is handed on: one socket write's worth. */
const CHUNK_CHARS = 64 * 1024;

/**
 * Text short of this is never cut for time: sending it is cheaper than a turn, and on a busy
 * machine the clock also runs while the process waits for a core, so a short answer would go out
 * chunked, without its length, now and then.
 */
const MIN_CUT_CHARS = 4 * 1024;

/**
 * setJsonAnswer makes `value` the response body, as JSON. A small answer goes out as one text, as
 * Koa would render it. An answer with a long list (a row of 100,000 cells, a scan page of large
 * rows) is rendered item by item, a chunk at a time, with other requests served between chunks,
 * and its text is never whole in memory: rendering a 12 MB answer at once held the event loop for
 * 30-50 ms and kept the text, and its UTF-8 copy, alive until sent. The bytes are the same as
 * JSON.stringify's; the answer is sent chunked when it is longer than one chunk.
 */
export function setJsonAnswer(ctx: Context, value: unknown): void {
  ctx.type = 'application/json';
  if (!hasLongList(value)) {
    ctx.body = value;
    return;
  }
  const pieces = piecesOf(value);
  // A chunk is cut short when its slice has had its time, and the next is rendered in a turn of its own.
  const turns = new Turns();
  const first = nextChunk(pieces, turns);
  if (first.done) {
    ctx.body = first.text;
    return;
  }
  ctx.body = Readable.from(chunks(first.text, pieces, turns), { objectMode: false });
}

/** Whether `value` is a plain object with a list of more than ONE_GO_ITEMS items among its members. */
function hasLongList(value: unknown): value is Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value) || 'toJSON' in value) return false;
  return Object.values(value).some((member) => Array.isArray(member) && member.length > ONE_GO_ITEMS);
}

/** The JSON text of `value`, in the order JSON.stringify writes it: its long lists item by item. */
function* piecesOf(value: Record<string, unknown>): Generator<string> {
  yield '{';
  let separator = '';
  for (const [key, member] of Object.entries(value)) {
    const head = `${separator}${JSON.stringify(key)}:`;
    if (!Array.isArray(member) || member.length <= ONE_GO_ITEMS) {
      const text = JSON.stringify(member);
      if (text === undefined) continue; // JSON.stringify leaves out members that have no JSON
      yield `${head}${text}`;
      separator = ',';
      continue;
    }
    separator = ',';
    yield `${head}[`;
    for (let index = 0; index < member.length; index++) {
      // As in JSON.stringify, an item that has no JSON (undefined, a function) is null.
      yield `${index === 0 ? '' : ','}${JSON.stringify(member[index]) ?? 'null'}`;
    }
    yield ']';
  }
  yield '}';
}

/** The next CHUNK_CHARS or so of text, or what is left of it, and whether that was the last. */
function nextChunk(pieces: Iterator<string>, turns: Turns): { readonly text: string; readonly done: boolean } {
  let text = '';
  for (let count = 1; ; count++) {
    const piece = pieces.next();
    if (piece.done === true) return { text, done: true };
    text += piece.value;
    // Time is checked too, every 64 pieces: many items may be slow to render.
    if (text.length >= CHUNK_CHARS || ((count & 63) === 0 && text.length >= MIN_CUT_CHARS && turns.due())) {
      return { text, done: false };
    }
  }
}

/** The answer's chunks as UTF-8 bytes, each rendered in a turn of its own. */
async function* chunks(first: string, pieces: Iterator<string>, turns: Turns): AsyncGenerator<Buffer> {
  yield Buffer.from(first);
  for (;;) {
    await turns.next();
    const { text, done } = nextChunk(pieces, turns);
    if (text !== '') yield Buffer.from(text);
    if (done) return;
  }
}
