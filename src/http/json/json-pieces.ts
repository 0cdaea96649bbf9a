/**
 * JSON.parse of a large text a piece at a time, so that parsing a body of megabytes does not hold
 * the event loop: the text is walked member by member, runs of small members are parsed together by
 * `parse` (JSON.parse, or a wrapper of it), and it yields between pieces (its slices).
 *
 * Only well-formed text is taken apart. At the first thing the walk does not expect, or if `parse`
 * refuses a piece, the whole text is given to `parse` in one go, so malformed JSON fails exactly as
 * it would have, with the same error. The value is the one `parse` gives for the whole text: key
 * order, repeated keys (the last wins, in the place of the first) and numbers are JSON.parse's.
 */
import { Turns } from '../../lib/turns.ts';

/**
 * Characters parsed in one piece, at least: well under a millisecond of JSON.parse. A piece's text
 * is made by joining (brackets and a slice); at 128 KiB or more each such string is a large object
 * for V8, which made pieces that large measurably slower (figures: docs/performance.md).
 */
export const PIECE_CHARS = 64 * 1024;

/**
 * Most large arrays and objects walked one inside another; deeper text is left to one parse. Each
 * level scans up to a piece of the next before it knows it is large, so deep nesting would cost
 * time quadratic in the text, and a call stack as deep.
 */
export const MAX_LARGE_DEPTH = 32;

type Parse = (text: string) => unknown;

/** Thrown by walkInPieces at anything it does not expect. */
export class NotInPieces extends Error {}

/** The value of a large JSON text, parsed a piece at a time; malformed text fails as `parse` fails on it whole. */
export async function parseInPieces(text: string, parse: Parse, pieceChars: number = PIECE_CHARS): Promise<unknown> {
  try {
    return await walkInPieces(text, parse, pieceChars);
  } catch (error) {
    if (!(error instanceof NotInPieces) && !(error instanceof SyntaxError)) throw error;
    return parse(text);
  }
}

/**
 * The value of a JSON text, parsed a piece at a time. Throws NotInPieces at anything the walk does
 * not expect, or what `parse` throws for a piece: that is, for malformed text, and for well-formed
 * text only where an object has a `__proto__` key.
 */
export async function walkInPieces(text: string, parse: Parse, pieceChars: number = PIECE_CHARS): Promise<unknown> {
  const walk = new Walk(text, parse, pieceChars);
  const { value, end } = await walk.value(walk.skipSpace(0), 0);
  if (walk.skipSpace(end) !== text.length) throw new NotInPieces();
  return value;
}

const SPACE = new Set([0x20, 0x09, 0x0a, 0x0d]);
/** What a JSON string holds other than plain text: an escape, or a control character (which JSON.parse refuses). */
const NOT_PLAIN = /[\\\u0000-\u001f]/;
const [QUOTE, BACKSLASH, COMMA, COLON] = [0x22, 0x5c, 0x2c, 0x3a];
const [OPEN_ARRAY, CLOSE_ARRAY, OPEN_OBJECT, CLOSE_OBJECT] = [0x5b, 0x5d, 0x7b, 0x7d];

interface Brackets {
  readonly text: string;
  readonly close: number;
}
const ARRAY: Brackets = { text: '[]', close: CLOSE_ARRAY };
const OBJECT: Brackets = { text: '{}', close: CLOSE_OBJECT };

/** How #members reads and gathers the members of an array or an object. */
interface Members {
  /** Where the value of the member starting at `member` starts (after an object member's key). */
  valueStart(member: number): number;
  addRun(run: unknown): void;
  addLarge(member: number, value: unknown): void;
}

class Walk {
  readonly #text: string;
  readonly #parse: Parse;
  readonly #pieceChars: number;
  // A yield every few milliseconds of walking.
  readonly #turns = new Turns();
  // The ends of strings longer than a piece, by where they start (see #stringEnd).
  readonly #longStringEnds = new Map<number, number>();

  constructor(text: string, parse: Parse, pieceChars: number) {
    this.#text = text;
    this.#parse = parse;
    this.#pieceChars = pieceChars;
  }

  skipSpace(at: number): number {
    let position = at;
    while (SPACE.has(this.#text.charCodeAt(position))) position += 1;
    return position;
  }

  /** The value starting at `start`, within `depth` large arrays and objects, and where it ends. */
  async value(start: number, depth: number): Promise<{ value: unknown; end: number }> {
    const end = this.#smallEnd(start);
    if (end !== undefined) return { value: this.#parse(this.#text.slice(start, end)), end };
    const open = this.#text.charCodeAt(start);
    if ((open === OPEN_ARRAY || open === OPEN_OBJECT) && depth >= MAX_LARGE_DEPTH) throw new NotInPieces();
    if (open === OPEN_ARRAY) return this.#array(start, depth + 1);
    if (open === OPEN_OBJECT) return this.#object(start, depth + 1);
    if (open === QUOTE) {
      const stringEnd = this.#stringEnd(start);
      return { value: await this.#longString(start, stringEnd), end: stringEnd };
    }
    // A number of more than a piece: one piece of its own.
    const scalarEnd = this.#scalarEnd(start);
    return { value: this.#parse(this.#text.slice(start, scalarEnd)), end: scalarEnd };
  }

  /**
   * The value of the string of more than a piece from `start` to `end` (its quotes included). Most
   * such strings are plain text (a tall value): with no backslash and no control character, which
   * is looked for a piece at a time, the value is the text between the quotes, as JSON.parse would
   * give it, without parsing all of it in one go (docs/performance.md). Any other is parsed whole.
   */
  async #longString(start: number, end: number): Promise<unknown> {
    const text = this.#text;
    for (let from = start + 1; from < end - 1; from += this.#pieceChars) {
      if (NOT_PLAIN.test(text.slice(from, Math.min(from + this.#pieceChars, end - 1)))) return this.#parse(text.slice(start, end));
      if (this.#turns.dueAfterItem()) await this.#turns.next();
    }
    return text.slice(start + 1, end - 1);
  }

  async #array(start: number, depth: number): Promise<{ value: unknown[]; end: number }> {
    const items: unknown[] = [];
    const end = await this.#members(start, depth, ARRAY, {
      valueStart: (member) => member,
      addRun: (run) => {
        for (const item of run as unknown[]) items.push(item);
      },
      addLarge: (_member, value) => items.push(value),
    });
    return { value: items, end };
  }

  async #object(start: number, depth: number): Promise<{ value: Record<string, unknown>; end: number }> {
    const members: Record<string, unknown> = {};
    // An own `__proto__` cannot be set by assignment: such a text is left to `parse` whole, to refuse or take.
    const add = (key: string, value: unknown) => {
      if (key === '__proto__') throw new NotInPieces();
      members[key] = value;
    };
    const end = await this.#members(start, depth, OBJECT, {
      valueStart: (member) => {
        if (this.#text.charCodeAt(member) !== QUOTE) throw new NotInPieces();
        const colon = this.skipSpace(this.#stringEnd(member));
        if (this.#text.charCodeAt(colon) !== COLON) throw new NotInPieces();
        return this.skipSpace(colon + 1);
      },
      addRun: (run) => {
        for (const [key, value] of Object.entries(run as Record<string, unknown>)) add(key, value);
      },
      addLarge: (member, value) => add(JSON.parse(this.#text.slice(member, this.#stringEnd(member))) as string, value),
    });
    return { value: members, end };
  }

  /**
   * Walks the members of the array or object whose opening bracket is at `start`, and answers
   * where its closing bracket ends. A run of small members is parsed as one piece, in brackets of
   * its own, and given to `addRun`; a large member's value is walked in turn and given to
   * `addLarge`, with where the member starts.
   */
  async #members(start: number, depth: number, brackets: Brackets, members: Members): Promise<number> {
    const text = this.#text;
    let position = this.skipSpace(start + 1);
    if (text.charCodeAt(position) === brackets.close) return position + 1;
    // A run of small members not parsed yet: from the first one's start to the last one's end.
    let runStart = -1;
    let runEnd = -1;
    const flush = () => {
      if (runStart < 0) return;
      members.addRun(this.#parse(`${brackets.text[0]}${text.slice(runStart, runEnd)}${brackets.text[1]}`));
      runStart = -1;
    };
    for (;;) {
      const valueStart = members.valueStart(position);
      const end = this.#smallEnd(valueStart);
      if (end === undefined) {
        flush();
        const large = await this.value(valueStart, depth);
        members.addLarge(position, large.value);
        position = large.end;
      } else {
        if (runStart < 0) runStart = position;
        runEnd = end;
        position = end;
        if (runEnd - runStart >= this.#pieceChars) flush();
      }
      position = this.skipSpace(position);
      const next = text.charCodeAt(position);
      if (next === brackets.close) {
        flush();
        return position + 1;
      }
      if (next !== COMMA) throw new NotInPieces();
      position = this.skipSpace(position + 1);
      if (this.#turns.dueAfterItem()) await this.#turns.next();
    }
  }

  /**
   * Where the value starting at `start` ends, if it is small: an array or object that closes
   * within a piece's length, or a string, number or literal. Undefined for a large array or
   * object, or a large string or number.
   */
  #smallEnd(start: number): number | undefined {
    const text = this.#text;
    const limit = Math.min(text.length, start + this.#pieceChars);
    const first = text.charCodeAt(start);
    if (first !== OPEN_ARRAY && first !== OPEN_OBJECT) {
      const end = first === QUOTE ? this.#stringEnd(start) : this.#scalarEnd(start);
      return end <= limit ? end : undefined;
    }
    let depth = 0;
    for (let position = start; position < limit; position++) {
      const code = text.charCodeAt(position);
      if (code === QUOTE) {
        position = this.#stringEnd(position) - 1;
      } else if (code === OPEN_ARRAY || code === OPEN_OBJECT) {
        depth += 1;
      } else if (code === CLOSE_ARRAY || code === CLOSE_OBJECT) {
        depth -= 1;
        if (depth === 0) return position + 1;
      }
    }
    if (limit === text.length) throw new NotInPieces();
    return undefined;
  }

  /**
   * The end of the string whose opening quote is at `start`. Each enclosing array and object asks
   * where a long string ends (is it small?), and finding it means searching all of it, several
   * times over for a tall value, in one go. So the ends of long strings are remembered; a short
   * one is searched again, within a piece.
   */
  #stringEnd(start: number): number {
    const known = this.#longStringEnds.get(start);
    if (known !== undefined) return known;
    const text = this.#text;
    let from = start + 1;
    for (;;) {
      const quote = text.indexOf('"', from);
      if (quote < 0) throw new NotInPieces();
      let backslashes = 0;
      while (text.charCodeAt(quote - 1 - backslashes) === BACKSLASH) backslashes += 1;
      if (backslashes % 2 === 0) {
        if (quote + 1 - start > this.#pieceChars) this.#longStringEnds.set(start, quote + 1);
        return quote + 1;
      }
      from = quote + 1;
    }
  }

  /** The end of a number or literal: the next space, comma or closing bracket. */
  #scalarEnd(start: number): number {
    const text = this.#text;
    let position = start;
    while (position < text.length) {
      const code = text.charCodeAt(position);
      if (SPACE.has(code) || code === COMMA || code === CLOSE_ARRAY || code === CLOSE_OBJECT) break;
      position += 1;
    }
    if (position === start) throw new NotInPieces();
    return position;
  }
}
