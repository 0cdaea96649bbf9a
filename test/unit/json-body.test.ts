import { expect } from 'chai';
import { parseJson } from '../../src/http/middleware/json-body.ts';
import { ApiError } from '../../src/service/errors.ts';
import { TurnCounter } from '../support/turns.ts';

const MIB = 1024 * 1024;

/** An object of `bytes` bytes or more whose strings are 3-byte characters, so the 1 MiB pieces cut characters in two. */
function largeBody(bytes: number): { text: string; body: Buffer } {
  const value = '€'.repeat(1000);
  const text = JSON.stringify({ cells: Array.from({ length: Math.ceil(bytes / 3000) }, (_, i) => ({ column: `c${i}`, value })) });
  return { text, body: Buffer.from(text) };
}

async function failure(bytes: Uint8Array): Promise<ApiError> {
  try {
    await parseJson(bytes);
  } catch (error) {
    if (error instanceof ApiError) return error;
    throw error;
  }
  throw new Error('parsed');
}

describe('JSON bodies', () => {
  it('decodes a large body a piece at a time, characters cut between pieces included, to what JSON.parse makes of it', async () => {
    const { text, body } = largeBody(3.5 * MIB);
    expect(body.length % MIB).to.not.equal(0);
    expect(await parseJson(body)).to.deep.equal(JSON.parse(text));
    // A byte order mark is dropped, as from a small body.
    expect(await parseJson(Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), body]))).to.deep.equal(JSON.parse(text));
  });

  it('lets other work run between the pieces of a large body, and not for a small one', async () => {
    const turnsDuring = async (body: Buffer) => {
      const counter = new TurnCounter();
      await parseJson(body);
      return counter.stop();
    };
    // One before each of its four pieces is decoded. The parse after them takes a turn every 5 ms,
    // which a fast machine may not reach for this body: json-pieces.test.ts checks it on a larger one.
    expect(await turnsDuring(largeBody(3.5 * MIB).body)).to.be.at.least(4);
    expect(await turnsDuring(Buffer.from('{"small":true}'))).to.equal(0);
  });

  it('refuses bytes that are not UTF-8 in a later piece, and a body that ends within a character, as MALFORMED_JSON', async () => {
    const { body } = largeBody(3.5 * MIB);
    const stray = Buffer.from(body);
    stray[3 * MIB + 5] = 0xff;
    const cut = Buffer.concat([body.subarray(0, body.length - 2), Buffer.from([0xe2, 0x82])]);
    for (const bytes of [stray, cut]) {
      const error = await failure(bytes);
      expect(error.code).to.equal('MALFORMED_JSON');
      expect(error.message).to.match(/not valid UTF-8/);
    }
  });

  it('refuses a large body that is not JSON, or has a "__proto__" key, as MALFORMED_JSON', async () => {
    const { text } = largeBody(1.5 * MIB);
    const broken = await failure(Buffer.from(text.slice(0, -1)));
    expect(broken.code).to.equal('MALFORMED_JSON');
    expect(broken.message).to.equal(`The body is not a valid JSON object or array: it breaks at line 1, column ${text.length} (character ${text.length}).`);
    const polluted = await failure(Buffer.from(`{"__proto__":{"x":1},${text.slice(1)}`));
    expect(polluted.code).to.equal('MALFORMED_JSON');
    expect(polluted.message).to.equal('The body is not a valid JSON object or array: it has a "__proto__" key.');
  });
});
