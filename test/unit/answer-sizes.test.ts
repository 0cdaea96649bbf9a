import { expect } from 'chai';
import { AnswerSizes } from '../../src/service/answer-sizes.ts';

describe('AnswerSizes: what a batchGet will hold, before it reads', () => {
  it('knows nothing before the first answer, then estimates from the bytes per key of the table', () => {
    const sizes = new AnswerSizes();
    expect(sizes.estimate('s/i/t', 10)).to.equal(0);
    sizes.observe('s/i/t', 4, 4000);
    expect(sizes.estimate('s/i/t', 10)).to.equal(10_000);
    expect(sizes.estimate('s/i/t', 1)).to.equal(1000);
  });

  it('rises at once to a larger answer, and falls a quarter of the way to a smaller one', () => {
    const sizes = new AnswerSizes();
    sizes.observe('t', 1, 100);
    sizes.observe('t', 2, 1000);
    expect(sizes.estimate('t', 1)).to.equal(500);
    sizes.observe('t', 1, 100);
    expect(sizes.estimate('t', 1)).to.equal(400);
    sizes.observe('t', 1, 100);
    expect(sizes.estimate('t', 1)).to.equal(325);
  });

  it('keeps each table apart, and estimates a table with no answer yet from every table', () => {
    const sizes = new AnswerSizes();
    sizes.observe('large', 1, 1_000_000);
    sizes.observe('small', 1, 100);
    expect(sizes.estimate('large', 2)).to.equal(2_000_000);
    expect(sizes.estimate('small', 2)).to.equal(200);
    // Every table: 1,000,000 per key, then a quarter of the way down to 100.
    expect(sizes.estimate('new', 1)).to.equal(750_025);
  });

  it('forgets the table answered longest ago past a thousand tables', () => {
    const sizes = new AnswerSizes();
    sizes.observe('first', 1, 7);
    sizes.observe('second', 1, 7);
    for (let index = 0; index < 998; index += 1) sizes.observe(`table-${index}`, 1, 7);
    // The first is answered again, so the second is now the one answered longest ago.
    sizes.observe('first', 1, 7);
    sizes.observe('one more', 1, 1_000_000);
    expect(sizes.estimate('first', 1)).to.equal(7);
    // Forgotten: estimated from every table, which the last answer raised.
    expect(sizes.estimate('second', 1)).to.equal(1_000_000);
  });

  it('ignores an answer of no keys', () => {
    const sizes = new AnswerSizes();
    sizes.observe('t', 0, 0);
    expect(sizes.estimate('t', 3)).to.equal(0);
  });
});
