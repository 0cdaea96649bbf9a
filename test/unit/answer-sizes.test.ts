import { expect } from 'chai';
import { AnswerSizes, answerSubject } from '../../src/service/answer-sizes.ts';

/** A read of every column's latest version on `table`. */
const whole = (table: string) => answerSubject(table, { versions: 1 });

describe('AnswerSizes: what an answer will hold, before it reads', () => {
  it('knows nothing before the first answer, then estimates from the bytes per key of the table', () => {
    const sizes = new AnswerSizes();
    expect(sizes.estimate(whole('s/i/t'), 10)).to.equal(0);
    sizes.observe(whole('s/i/t'), 4, 4000);
    expect(sizes.estimate(whole('s/i/t'), 10)).to.equal(10_000);
    expect(sizes.estimate(whole('s/i/t'), 1)).to.equal(1000);
  });

  it('rises at once to a larger answer, and falls a quarter of the way to a smaller one', () => {
    const sizes = new AnswerSizes();
    sizes.observe(whole('t'), 1, 100);
    sizes.observe(whole('t'), 2, 1000);
    expect(sizes.estimate(whole('t'), 1)).to.equal(500);
    sizes.observe(whole('t'), 1, 100);
    expect(sizes.estimate(whole('t'), 1)).to.equal(400);
    sizes.observe(whole('t'), 1, 100);
    expect(sizes.estimate(whole('t'), 1)).to.equal(325);
  });

  it('keeps each table apart, and estimates a table with no answer yet from every table', () => {
    const sizes = new AnswerSizes();
    sizes.observe(whole('large'), 1, 1_000_000);
    sizes.observe(whole('small'), 1, 100);
    expect(sizes.estimate(whole('large'), 2)).to.equal(2_000_000);
    expect(sizes.estimate(whole('small'), 2)).to.equal(200);
    // Every table: 1,000,000 per key, then a quarter of the way down to 100.
    expect(sizes.estimate(whole('new'), 1)).to.equal(750_025);
  });

  it('forgets the table answered longest ago past a thousand tables', () => {
    const sizes = new AnswerSizes();
    sizes.observe(whole('first'), 1, 7);
    sizes.observe(whole('second'), 1, 7);
    for (let index = 0; index < 998; index += 1) sizes.observe(whole(`table-${index}`), 1, 7);
    // The first is answered again, so the second is now the one answered longest ago.
    sizes.observe(whole('first'), 1, 7);
    sizes.observe(whole('one more'), 1, 1_000_000);
    expect(sizes.estimate(whole('first'), 1)).to.equal(7);
    // Forgotten: estimated from every table, which the last answer raised.
    expect(sizes.estimate(whole('second'), 1)).to.equal(1_000_000);
  });

  it('ignores an answer of no keys', () => {
    const sizes = new AnswerSizes();
    sizes.observe(whole('t'), 0, 0);
    expect(sizes.estimate(whole('t'), 3)).to.equal(0);
  });
  it('keeps each selection of a table apart, and estimates one not read yet from every answer on the table', () => {
    const sizes = new AnswerSizes();
    const narrow = answerSubject('t', { columns: [{ family: 'cf', column: Buffer.from('small') }], versions: 1 });
    const family = answerSubject('t', { columns: [{ family: 'cf' }], versions: 1 });
    const versions = answerSubject('t', { versions: 3 });
    sizes.observe(whole('t'), 1, 1_000_000);
    // Not read yet: the table's figure.
    expect(sizes.estimate(narrow, 1)).to.equal(1_000_000);
    sizes.observe(narrow, 1, 100);
    expect(sizes.estimate(narrow, 2)).to.equal(200);
    expect(sizes.estimate(family, 1)).to.equal(sizes.estimate(whole('t'), 1));
    expect(sizes.estimate(whole('t'), 1)).to.be.above(700_000);
    sizes.observe(versions, 1, 3_000_000);
    expect(sizes.estimate(versions, 1)).to.equal(3_000_000);
    expect(sizes.estimate(narrow, 1)).to.equal(100);
  });

  it('tells selections apart by every column, family and the versions they read', () => {
    const subjects = [
      answerSubject('t', { versions: 1 }),
      answerSubject('t', { versions: 2 }),
      answerSubject('t', { columns: [{ family: 'cf' }], versions: 1 }),
      answerSubject('t', { columns: [{ family: 'cf', column: Buffer.from('') }], versions: 1 }),
      answerSubject('t', { columns: [{ family: 'cf', column: Buffer.from('a') }], versions: 1 }),
      answerSubject('t', { columns: [{ family: 'cf', column: Buffer.from('a') }, { family: 'cf', column: Buffer.from('b') }], versions: 1 }),
      answerSubject('t', { columns: [{ family: 'cf', column: Buffer.from('a\0cf\0b') }], versions: 1 }),
      answerSubject('u', { columns: [{ family: 'cf', column: Buffer.from('a') }], versions: 1 }),
    ];
    expect(new Set(subjects.map((subject) => subject.entry)).size).to.equal(subjects.length);
    expect(answerSubject('t', { columns: [{ family: 'cf', column: Buffer.from('a') }], versions: 1 })).to.deep.equal(subjects[4]);
    // A selection of many long columns is kept short.
    const wide = answerSubject('t', { columns: Array.from({ length: 100 }, (_, index) => ({ family: 'cf', column: Buffer.alloc(16 * 1024, index) })), versions: 1 });
    expect(wide.entry.length).to.be.below(100);
  });
});
