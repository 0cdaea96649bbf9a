import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { TALL_CHARS, tallTextBytes, textBytes } from '../../src/http/json/tall-text.ts';
import { EveryTurnDue, TurnCounter } from '../support/turns.ts';

describe('tall text', () => {
  it('gives the bytes Buffer.from gives, for text of every kind, cut anywhere', async () => {
    const texts = [
      'x'.repeat(TALL_CHARS),
      'é✓ ok '.repeat(TALL_CHARS / 4),
      // A pair of surrogates across every place a slice could end, and lone ones.
      '😀'.repeat(TALL_CHARS),
      `a${'😀'.repeat(TALL_CHARS / 2)}`,
      `${'\ud800x\udc00'.repeat(TALL_CHARS / 3)}\ud83d`,
      'short é',
    ];
    for (const text of texts) {
      const bytes = await textBytes(text, 'utf8', new EveryTurnDue());
      expect(bytes.equals(Buffer.from(text, 'utf8')), `${text.length} characters from ${JSON.stringify(text.slice(0, 4))}`).to.equal(true);
    }
    for (const length of [3 * TALL_CHARS, 3 * TALL_CHARS + 1, 3 * TALL_CHARS + 2, 10]) {
      const data = randomBytes(length);
      const bytes = await textBytes(data.toString('base64'), 'base64', new EveryTurnDue());
      expect(bytes.equals(data), `base64 of ${length} bytes`).to.equal(true);
    }
  });

  it('lets other work run while it makes a tall text into bytes, and not for a short one', async () => {
    let counter = new TurnCounter();
    await textBytes('x'.repeat(4 * TALL_CHARS), 'utf8', new EveryTurnDue());
    expect(counter.stop(), 'turns during a tall text').to.be.above(2);
    counter = new TurnCounter();
    await textBytes('x'.repeat(TALL_CHARS - 1), 'utf8', new EveryTurnDue());
    expect(counter.stop(), 'turns during a short text').to.equal(0);
  });

  it('maps each item with a tall text to its bytes, and leaves the others out', async () => {
    const items = [{ text: 'short' }, { text: 'y'.repeat(TALL_CHARS) }, { text: Buffer.from('z'.repeat(TALL_CHARS)).toString('base64'), base64: true }];
    const tall = await tallTextBytes(items, (item) => item.text, (item) => (item.base64 === true ? 'base64' : 'utf8'));
    expect([...tall.keys()]).to.deep.equal([items[1], items[2]]);
    expect(tall.get(items[1] as (typeof items)[number])?.equals(Buffer.from('y'.repeat(TALL_CHARS)))).to.equal(true);
    expect(tall.get(items[2] as (typeof items)[number])?.equals(Buffer.from('z'.repeat(TALL_CHARS)))).to.equal(true);
  });
});
