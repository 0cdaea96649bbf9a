import bourne from '@hapi/bourne';
import { expect } from 'chai';
import fc from 'fast-check';
import { MAX_LARGE_DEPTH, NotInPieces, parseInPieces, walkInPieces } from '../../src/http/json/json-pieces.ts';
import { TurnCounter } from '../support/turns.ts';

/** What JSON.parse gives for `text`: its value, or its error's message. */
function jsonParse(text: string): { value: unknown } | { error: string } {
  try {
    return { value: JSON.parse(text) };
  } catch (error) {
    return { error: (error as Error).message };
  }
}

async function inPieces(text: string, pieceChars: number, parse: (text: string) => unknown = JSON.parse): Promise<{ value: unknown } | { error: string }> {
  try {
    return { value: await parseInPieces(text, parse, pieceChars) };
  } catch (error) {
    return { error: (error as Error).message };
  }
}

/**
 * JSON values whose object keys need no escape in JSON text. V8's JSON.parse (Node 24 and later)
 * can read an escaped key as another key it has cached from an earlier parse anywhere in the
 * process (nodejs/node#63785): the reference these properties compare with is then itself wrong,
 * and differently for the whole text and for its pieces. Escaped keys are checked on fixed texts
 * below.
 */
function jsonWithPlainKeys(constraints: Parameters<typeof fc.jsonValue>[0] = {}): fc.Arbitrary<unknown> {
  const plain = (value: unknown): unknown => {
    if (Array.isArray(value)) return value.map(plain);
    if (typeof value !== 'object' || value === null) return value;
    return Object.fromEntries(Object.entries(value).map(([key, member]) => [key.toWellFormed().replace(/["\\\u0000-\u001f]/g, '_'), plain(member)]));
  };
  return fc.jsonValue(constraints).map(plain);
}

describe('parseInPieces', () => {
  it('parses any JSON in pieces to what JSON.parse gives, whatever the piece size (fast-check)', async () => {
    await fc.assert(
      fc.asyncProperty(jsonWithPlainKeys(), fc.constantFrom(undefined, 1, '\t', ' \r\n'), fc.integer({ min: 1, max: 64 }), async (value, indent, pieceChars) => {
        const text = JSON.stringify(value, null, indent);
        // Without falling back to one parse of the whole text, but where a `__proto__` key asks for it.
        const parsed = text.includes('"__proto__"') ? await parseInPieces(text, JSON.parse, pieceChars) : await walkInPieces(text, JSON.parse, pieceChars);
        expect(parsed, text).to.deep.equal(JSON.parse(text));
      }),
      { numRuns: 1000 },
    );
  });

  it('fails on malformed JSON as JSON.parse does, with its message (fast-check)', async () => {
    const broken = fc
      .tuple(jsonWithPlainKeys({ maxDepth: 4 }), fc.nat(), fc.constantFrom('', ',', ']', '}', '"', ':', '\\', 'x', '[', '{', ' '))
      .map(([value, at, insert]) => {
        const text = JSON.stringify({ v: value, w: [value, value] });
        const cut = at % text.length;
        // One character replaced by another (or removed).
        return text.slice(0, cut) + insert + text.slice(cut + 1);
      });
    await fc.assert(
      fc.asyncProperty(broken, fc.integer({ min: 1, max: 32 }), async (text, pieceChars) => {
        expect(await inPieces(text, pieceChars), text).to.deep.equal(jsonParse(text));
      }),
      { numRuns: 2000 },
    );
  });

  it('keeps repeated keys as JSON.parse does: the last value, in the place of the first', async () => {
    const large = JSON.stringify(Array.from({ length: 50 }, (_, i) => i));
    const text = `{"a": ${large}, "b": 1, "a": 2, "c": {"d": ${large}, "d": [3]}, "b": ${large}}`;
    const value = await walkInPieces(text, JSON.parse, 16);
    expect(value).to.deep.equal(JSON.parse(text));
    expect(Object.keys(value as object)).to.deep.equal(['a', 'b', 'c']);
  });

  it('takes escaped quotes and backslashes in strings as they are', async () => {
    const text = JSON.stringify({ 'k\\': ['a\\', '\\"', '"]}', '\\\\"', 'x'.repeat(40)], '"': { '{': '}' } });
    for (const pieceChars of [1, 2, 5, 9, 30]) expect(await walkInPieces(text, JSON.parse, pieceChars)).to.deep.equal(JSON.parse(text));
  });

  it('refuses a `__proto__` key anywhere, as the parse it is given does on the whole text', async () => {
    const parse = (text: string) => bourne.parse(text, { protoAction: 'error' });
    const items = Array.from({ length: 100 }, (_, i) => ({ n: i }));
    for (const body of [
      `{"data": ${JSON.stringify(items)}, "__proto__": {"x": 1}}`,
      `{"data": ${JSON.stringify(items)}, "__proto__": ${JSON.stringify(items)}}`,
      `{"data": [${JSON.stringify(items).slice(1, -1)}, {"__proto__": 1}]}`,
    ]) {
      const result = await inPieces(body, 16, parse);
      expect(result, body.slice(-40)).to.deep.equal({ error: 'Object contains forbidden prototype property' });
    }
    // JSON.parse alone takes `__proto__` as an own key.
    const own = (await parseInPieces(`{"a": ${JSON.stringify(items)}, "__proto__": [1]}`, JSON.parse, 16)) as Record<string, unknown>;
    expect(Object.getOwnPropertyNames(own)).to.deep.equal(['a', '__proto__']);
    expect(Object.getPrototypeOf(own)).to.equal(Object.prototype);
  });

  it(`walks at most ${MAX_LARGE_DEPTH} large arrays and objects one inside another, and leaves deeper text to one parse`, async () => {
    // 28 levels of at least 4 characters: walked.
    const shallow = '['.repeat(30) + ']'.repeat(30);
    expect(await walkInPieces(shallow, JSON.parse, 4)).to.deep.equal(JSON.parse(shallow));
    // 20,000 levels: each would scan a piece of the next, and the calls would outgrow the stack.
    const deep = `{"a": ${'['.repeat(20_000)}${']'.repeat(20_000)}}`;
    const refused = await walkInPieces(deep, JSON.parse, 1000).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(refused).to.be.instanceOf(NotInPieces);
    // Parsed in one go instead (too deep for a recursive comparison: its depth is counted).
    let value = ((await parseInPieces(deep, JSON.parse, 1000)) as { a: unknown }).a;
    let depth = 0;
    while (Array.isArray(value)) [value, depth] = [value[0], depth + 1];
    expect(depth).to.equal(20_000);
  });

  it('parses a 7.8 MB body in pieces, letting other work run between them', async function () {
    this.timeout(60_000);
    const text = JSON.stringify({
      tableName: 'wide',
      rowKeyId: 'wide',
      data: Array.from({ length: 100_000 }, (_, i) => ({ columnFamily: 'cf', columnName: `column ${i}`, columnValue: `value ${i}` })),
    });
    const counter = new TurnCounter();
    const value = await walkInPieces(text, JSON.parse);
    const turns = counter.stop();
    expect(value).to.deep.equal(JSON.parse(text));
    expect(turns, 'turns of the event loop during the parse').to.be.above(2);
  });
  it('searches a long string for its end once, however many arrays and objects hold it', async () => {
    const text = JSON.stringify({ a: [{ b: [{ c: 'x'.repeat(200_000), d: 1 }] }] });
    const opening = text.indexOf('"xxx');
    // eslint-disable-next-line @typescript-eslint/unbound-method -- called with its string below
    const indexOf = String.prototype.indexOf;
    let searches = 0;
    String.prototype.indexOf = function (this: string, search: string, position?: number): number {
      if (search === '"' && position === opening + 1 && this.length === text.length) searches += 1;
      return indexOf.call(this, search, position);
    };
    let value: unknown;
    try {
      value = await walkInPieces(text, JSON.parse, 1000);
    } finally {
      String.prototype.indexOf = indexOf;
    }
    expect(searches, 'searches for the long string\'s closing quote').to.equal(1);
    expect(value).to.deep.equal(JSON.parse(text));
  });
  it('takes a long plain string as its text, a piece at a time, and any other long string as JSON.parse does', async () => {
    const plain = 'v✓'.repeat(3 * 1024 * 1024);
    const text = JSON.stringify({ columnValue: plain, after: [1, 'x'] });
    let longestParsed = 0;
    const value = await walkInPieces(text, (piece) => {
      longestParsed = Math.max(longestParsed, piece.length);
      return JSON.parse(piece) as unknown;
    });
    expect(longestParsed, 'the longest text parsed in one go').to.be.below(100);
    expect(value).to.deep.equal({ columnValue: plain, after: [1, 'x'] });
    for (const odd of ['\\"', '\\n', '\\u00e9', '\\\\']) {
      const escaped = `{"v":"${'x'.repeat(100_000)}${odd}${'y'.repeat(100_000)}"}`;
      expect(await walkInPieces(escaped, JSON.parse, 1000), odd).to.deep.equal(JSON.parse(escaped));
    }
    // A raw control character is malformed JSON: it fails as JSON.parse fails on the whole text.
    const control = `{"v":"${'x'.repeat(100_000)}\u0001${'y'.repeat(100_000)}"}`;
    const refused = await inPieces(control, 1000);
    expect(refused).to.have.property('error').that.equals(await inPieces(control, control.length + 1).then((whole) => (whole as { error: string }).error));
  });

});
