import { randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import { expect } from 'chai';
import fc from 'fast-check';
import Koa from 'koa';
import { JsonText, jsonPieces, markHoldsJsonText, setJsonAnswer } from '../../src/http/json/json-answer.ts';
import { EveryTurnDue, TurnCounter } from '../support/turns.ts';

const KIB = 1024;

/** `text` repeated to at least `bytes` UTF-8 bytes, as a buffer of its own. */
function longText(text: string, bytes = 64 * KIB): Buffer {
  return Buffer.from(text.repeat(Math.ceil(bytes / Buffer.byteLength(text))));
}

/** The JSON blocks of a JsonText, with a turn after each. */
async function blocksOf(text: JsonText): Promise<Buffer[]> {
  const blocks: Buffer[] = [];
  for await (const block of text.jsonBlocks(new EveryTurnDue())) blocks.push(block);
  return blocks;
}

/** The pieces of jsonPieces(value), joined as bytes. */
async function joined(value: unknown): Promise<Buffer> {
  const parts: Buffer[] = [];
  for (const piece of jsonPieces(value)) {
    if (typeof piece === 'string') parts.push(Buffer.from(piece));
    else parts.push(...(await blocksOf(piece)));
  }
  return Buffer.concat(parts);
}

/**
 * Serves `value` through setJsonAnswer on a real socket; resolves with what a client receives, and
 * how many ticks of a 1 ms timer came between the first and the last byte of the text produced.
 */
async function answerOf(value: unknown) {
  const app = new Koa();
  let ticks = 0;
  let ticksWhileRendering = 0;
  app.use((ctx) => {
    setJsonAnswer(ctx, value);
    // A text is produced in one turn; a stream over as many as it takes.
    if (ctx.body instanceof Readable) {
      let first: number | undefined;
      ctx.body.on('data', () => (first ??= ticks));
      ctx.body.on('end', () => (ticksWhileRendering = ticks - (first ?? ticks)));
    }
  });
  const server = app.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  const ticker = setInterval(() => (ticks += 1), 1);
  try {
    const response = await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/`);
    const bytes = Buffer.from(await response.arrayBuffer());
    return { response, bytes, ticksWhileRendering };
  } finally {
    clearInterval(ticker);
    server.close();
  }
}

describe('setJsonAnswer: JSON answers, large ones rendered a piece at a time', () => {
  it('sends a small answer as one text of known length', async () => {
    const value = { instanceID: 'local', data: [{ a: 1 }, { b: 'é' }] };
    const { response, bytes } = await answerOf(value);
    expect(response.headers.get('content-type')).to.equal('application/json; charset=utf-8');
    expect(response.headers.get('content-length')).to.equal(String(Buffer.byteLength(JSON.stringify(value))));
    expect(bytes.toString()).to.equal(JSON.stringify(value));
  });

  it('sends a long list as JSON.stringify would, byte for byte, in chunks', async () => {
    const items: unknown[] = Array.from({ length: 50_000 }, (_, i) => ({ key: `row ${i} ✓ "quoted" \\ ${'\u2028'}`, cells: [{ value: 'x'.repeat(i % 50) }], gone: undefined }));
    // What JSON.stringify does with items and members that have no JSON: null in a list, left out of an object.
    items[3] = undefined;
    items[4] = () => 1;
    const value = { rows: items, skipped: undefined, nextPageToken: 'tok', count: 2, nested: { list: [1, 2, 3] } };
    const { response, bytes } = await answerOf(value);
    expect(response.headers.get('transfer-encoding')).to.equal('chunked');
    expect(response.headers.get('content-length')).to.equal(null);
    expect(bytes.equals(Buffer.from(JSON.stringify(value)))).to.equal(true);
  });

  it('sends a long list that fits in one chunk as one text of known length', async () => {
    const value = { rows: Array.from({ length: 100 }, (_, i) => i) };
    const { response, bytes } = await answerOf(value);
    expect(response.headers.get('content-length')).to.equal(String(bytes.length));
    expect(bytes.toString()).to.equal(JSON.stringify(value));
  });

  it('sends a short answer whole even when the clock jumps while it is rendered, as when the process waits for a core', () => {
    const value = { rows: Array.from({ length: 1000 }, (_, i) => i) };
    const ctx = { type: '', body: undefined as unknown };
    const own = Object.getOwnPropertyDescriptor(performance, 'now');
    let clock = 0;
    // Each reading 10 ms after the last: every check for time finds the slice over.
    Object.defineProperty(performance, 'now', { value: () => (clock += 10), configurable: true });
    try {
      setJsonAnswer(ctx as never, value);
    } finally {
      if (own === undefined) delete (performance as { now?: unknown }).now;
      else Object.defineProperty(performance, 'now', own);
    }
    expect(clock, 'the clock was read').to.be.above(0);
    expect(ctx.body).to.equal(JSON.stringify(value));
  });

  it('lets timers run while a large answer is rendered', async () => {
    const value = { data: Array.from({ length: 200_000 }, (_, i) => ({ columnFamily: 'cf', columnName: `column ${i}`, columnValue: `value ${i}` })) };
    const { bytes, ticksWhileRendering } = await answerOf(value);
    expect(bytes.length).to.equal(Buffer.byteLength(JSON.stringify(value)));
    // Rendered at once (about 18 MB of text), the answer would hold the loop from its first byte to its last.
    expect(ticksWhileRendering).to.be.at.least(3);
  });

  it('sends JsonText as its own bytes, in items marked as holding it, as JSON.stringify would', async () => {
    const escaping = longText('z', 300 * KIB);
    escaping.write('"\\\n\u0001', 32 * KIB - 2);
    const texts = [longText('x'), longText('é✓\u2028\u007f ok '), longText('y', 300 * KIB), escaping].map((bytes) => JsonText.utf8(bytes) as JsonText);
    const rows = texts.map((value, index) => markHoldsJsonText({ key: `row ${index}`, cells: [markHoldsJsonText({ family: 'cf', value, timestamp: 't' })] }));
    for (const value of [{ rows, nextPageToken: 'tok' }, { key: 'one', cells: rows[1]?.cells }]) {
      const { response, bytes } = await answerOf(value);
      expect(response.headers.get('transfer-encoding')).to.equal('chunked');
      expect(bytes.equals(Buffer.from(JSON.stringify(value)))).to.equal(true);
    }
  });

  it('keeps long, valid UTF-8 as JsonText, and writes what JSON escapes in it as JSON.stringify does', async () => {
    const plain = JsonText.utf8(longText('x')) as JsonText;
    expect(plain).to.be.instanceOf(JsonText);
    expect(JsonText.utf8(longText('x').subarray(1)), 'one byte short').to.equal(undefined);
    const invalid = longText('x');
    invalid[5] = 0xff;
    expect(JsonText.utf8(invalid), 'not UTF-8').to.equal(undefined);
    // Nothing to escape: the blocks are the very bytes.
    expect((await blocksOf(plain)).every((block) => block.buffer === plain.bytes.buffer)).to.equal(true);
    const escapes = ['"', '\\', '\n', '\r', '\t', '\b', '\f', '\u0000', '\u001f', '\u007f', '\u2028'];
    // Escapes at the start, on either side of a block's end (32 KiB), among characters of several bytes, and at the end.
    const text = Buffer.from(['"', 'x'.repeat(32 * KIB - 2), '\\', '\n', 'é✓ '.repeat(20 * KIB), '\u0001', '✓'.repeat(10 * KIB), '\u2028\u007f\t', 'y'.repeat(40 * KIB), '\u001f'].join(''));
    for (const bytes of [...escapes.map((escape) => Buffer.concat([longText('x'), Buffer.from(escape)])), text]) {
      const json = JsonText.utf8(bytes) as JsonText;
      expect((await joined({ value: json })).toString(), JSON.stringify(bytes.subarray(-4).toString())).to.equal(JSON.stringify({ value: bytes.toString() }));
    }
    expect(JSON.stringify({ text: plain })).to.equal(JSON.stringify({ text: plain.bytes.toString() }));
  });

  it('lets other work run while it looks through a tall text for what JSON escapes', async () => {
    const counter = new TurnCounter();
    const blocks = await blocksOf(JsonText.utf8(longText('x', 1024 * KIB)) as JsonText);
    expect(Buffer.concat(blocks).equals(longText('x', 1024 * KIB))).to.equal(true);
    expect(counter.stop(), 'turns').to.be.above(2);
  });

  it('keeps long bytes in base64 as JsonText, whatever they hold', async () => {
    const bytes = Buffer.from(Array.from({ length: 64 * KIB }, (_, index) => (index * 7) % 256));
    expect(JsonText.base64(bytes.subarray(1)), 'one byte short').to.equal(undefined);
    const encoded = JsonText.base64(bytes) as JsonText;
    expect(encoded.bytes.toString('latin1')).to.equal(bytes.toString('base64'));
    expect((await joined({ value: encoded })).toString()).to.equal(JSON.stringify({ value: bytes.toString('base64') }));
    // Made a block of 48 KiB at a time: lengths at and around block ends, with and without padding.
    for (const length of [96 * KIB - 1, 96 * KIB, 96 * KIB + 1, 96 * KIB + 2, 1000 * KIB + 5]) {
      const long = randomBytes(length);
      const base64 = JsonText.base64(long) as JsonText;
      expect(base64.bytes.toString('latin1'), `${length} bytes`).to.equal(long.toString('base64'));
    }
  });

  it('writes any value as JSON.stringify does, byte for byte, and JsonText as the very bytes it holds', async () => {
    const text = JsonText.utf8(longText('ok✓')) as JsonText;
    const leaf = fc.oneof(
      fc.jsonValue({ maxDepth: 2 }),
      fc.constantFrom(undefined, () => 1, Symbol('s'), new Date(0), text, Number.NaN, -0),
    );
    const values = fc.letrec<{ value: unknown }>((tie) => ({
      value: fc.oneof({ depthSize: 'small' }, leaf, fc.array(tie('value')), fc.dictionary(fc.string(), tie('value'))),
    })).value.filter((value) => JSON.stringify(value) !== undefined);
    await fc.assert(
      fc.asyncProperty(values, async (value) => {
        expect((await joined(value)).equals(Buffer.from(JSON.stringify(value)))).to.equal(true);
      }),
    );
    expect([...jsonPieces({ value: text })].some((piece) => piece === text)).to.equal(true);
  });
});
