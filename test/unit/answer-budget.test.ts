import { expect } from 'chai';
import { AnswerBudget, type AnswerHold, answerBudgetBytes } from '../../src/service/answer-budget.ts';
import { SERVICE_LIMITS } from '../../src/service/limits.ts';

const MIB = 1024 * 1024;
const settled = () => new Promise(setImmediate);

/** A budget of 100 bytes whose admissions wait at most `waitMs`, with a page holding `held` of them. */
function withPage(held: number, waitMs = 1000): { budget: AnswerBudget; page: AnswerHold } {
  const budget = new AnswerBudget(100, waitMs);
  const page = budget.hold();
  page.take(held);
  return { budget, page };
}

describe('AnswerBudget: the bytes of rows held for answers at once', () => {
  it('is sized from the heap, and never below one full page', () => {
    expect(answerBudgetBytes(1024 * MIB)).to.equal(Math.floor((1024 * MIB) / 20));
    expect(answerBudgetBytes(304 * MIB)).to.equal(SERVICE_LIMITS.pageBytes);
  });

  it('takes what fits, refuses what does not, and forces what must be held', () => {
    const budget = new AnswerBudget(100, 1000);
    const page = budget.hold();
    expect(page.tryTake(60)).to.equal(true);
    expect(page.tryTake(50)).to.equal(false);
    expect(budget.inUse).to.equal(60);
    page.take(50);
    expect(budget.inUse).to.equal(110);
    expect(budget.hold().tryTake(1)).to.equal(false);
    page.release();
    expect(budget.inUse).to.equal(0);
  });

  it('gives back all of a hold once, however often released, and takes nothing after', async () => {
    const budget = new AnswerBudget(100, 1000);
    const first = budget.hold();
    const second = budget.hold();
    first.take(30);
    expect(first.tryTake(20)).to.equal(true);
    expect(await first.admit(10)).to.equal(true);
    expect(await first.settle(10)).to.equal(true);
    second.take(40);
    first.release();
    first.release();
    expect(budget.inUse).to.equal(40);
    first.take(10);
    expect(first.tryTake(10)).to.equal(false);
    expect(await first.admit(10)).to.equal(false);
    expect(await first.settle(10)).to.equal(false);
    expect(budget.inUse).to.equal(40);
    second.release();
    expect(budget.inUse).to.equal(0);
  });

  it('admits an answer to read at once while there is any room, and to bytes that fit or that an idle budget takes alone', async () => {
    const { budget, page } = withPage(99);
    const answer = budget.hold();
    expect(await answer.admit()).to.equal(true);
    expect(budget.inUse).to.equal(99);
    page.release();
    expect(await answer.settle(500)).to.equal(true);
    expect(budget.inUse).to.equal(500);
    answer.release();
    expect(budget.inUse).to.equal(0);
    const estimated = budget.hold();
    expect(await estimated.admit(500)).to.equal(true);
    expect(budget.inUse).to.equal(500);
    estimated.release();
  });

  it('makes an answer wait for room for all it read, while pages take nothing beyond their first row', async () => {
    const { budget, page } = withPage(60);
    const answer = budget.hold();
    expect(await answer.admit(10)).to.equal(true);
    let granted = false;
    const settle = answer.settle(80).then((value) => (granted = value));
    await settled();
    expect(granted).to.equal(false);
    // The estimate was given back while it waits, and nobody else took it.
    expect(budget.inUse).to.equal(60);
    const other = budget.hold();
    expect(other.tryTake(1)).to.equal(false);
    page.release();
    await settle;
    expect(granted).to.equal(true);
    expect(budget.inUse).to.equal(80);
    answer.release();
    expect(other.tryTake(1)).to.equal(true);
    other.release();
  });

  it('lets answers read together while their estimates fit, and the next once one settles for less', async () => {
    const budget = new AnswerBudget(100, 1000);
    const [first, second, third] = [budget.hold(), budget.hold(), budget.hold()];
    expect(await first.admit(40)).to.equal(true);
    expect(await second.admit(40)).to.equal(true);
    let thirdReads = false;
    const admitted = third.admit(40).then((granted) => (thirdReads = granted));
    await settled();
    expect(thirdReads).to.equal(false);
    expect(budget.inUse).to.equal(80);
    // The first read less than expected: the rest of its estimate goes back, and the third reads.
    expect(await first.settle(15)).to.equal(true);
    await admitted;
    expect(thirdReads).to.equal(true);
    expect(budget.inUse).to.equal(15 + 40 + 40);
    for (const hold of [first, second, third]) hold.release();
    expect(budget.inUse).to.equal(0);
  });

  it('lets an answer of unknown size read alone, even with room: those behind it wait until it has counted what it read', async () => {
    const budget = new AnswerBudget(100, 1000);
    const [first, second] = [budget.hold(), budget.hold()];
    const order: string[] = [];
    expect(await first.admit()).to.equal(true);
    const admitted = second.admit(10).then(() => order.push('second'));
    await settled();
    expect(order).to.deep.equal([]);
    expect(budget.hold().tryTake(1)).to.equal(false);
    expect(await first.settle(30)).to.equal(true);
    await admitted;
    expect(order).to.deep.equal(['second']);
    expect(budget.inUse).to.equal(40);
    first.release();
    second.release();
    expect(budget.inUse).to.equal(0);
  });

  it('lets answers waiting to read in one at a time, in arrival order, each once the one before has counted what it read', async () => {
    const { budget, page } = withPage(120);
    const [first, second] = [budget.hold(), budget.hold()];
    const order: string[] = [];
    const admissions = [first.admit().then(() => order.push('first')), second.admit().then(() => order.push('second'))];
    page.release();
    await settled();
    // The first was let in and has not counted its rows yet: the second waits for it, and pages get nothing.
    expect(order).to.deep.equal(['first']);
    expect(budget.hold().tryTake(1)).to.equal(false);
    expect(await first.settle(30)).to.equal(true);
    await Promise.all(admissions);
    expect(order).to.deep.equal(['first', 'second']);
    expect(await second.settle(70)).to.equal(true);
    expect(budget.inUse).to.equal(100);
    first.release();
    second.release();
    expect(budget.inUse).to.equal(0);
  });

  it('puts an answer that has read before those waiting to read when it waits for room for what it read', async () => {
    const budget = new AnswerBudget(100, 1000);
    const [first, second, other] = [budget.hold(), budget.hold(), budget.hold()];
    expect(await first.admit(20)).to.equal(true);
    other.take(50);
    const order: string[] = [];
    const secondReads = second.admit(45).then(() => order.push('second reads'));
    const firstRendered = first.settle(60).then(() => order.push('first rendered'));
    await settled();
    expect(order).to.deep.equal([]);
    // Room for either, not both: the one that has read goes first.
    other.release();
    await firstRendered;
    await settled();
    expect(order).to.deep.equal(['first rendered']);
    first.release();
    await secondReads;
    expect(order).to.deep.equal(['first rendered', 'second reads']);
    second.release();
    expect(budget.inUse).to.equal(0);
  });

  it('refuses admission after the wait, and lets those behind an answer that gave up go', async () => {
    const { budget, page } = withPage(100, 100);
    const refused = budget.hold().admit();
    await new Promise((resolve) => setTimeout(resolve, 50));
    const behind = budget.hold();
    const admitted = behind.admit();
    expect(await refused).to.equal(false);
    page.release();
    expect(await admitted).to.equal(true);
    behind.release();
    expect(budget.inUse).to.equal(0);
  });

  it('ends the wait of a hold released while it waits (its client left), and lets the next go', async () => {
    const { budget, page } = withPage(100);
    const [gone, next] = [budget.hold(), budget.hold()];
    const goneAdmitted = gone.admit();
    const nextAdmitted = next.admit();
    gone.release();
    expect(await goneAdmitted).to.equal(false);
    page.release();
    expect(await nextAdmitted).to.equal(true);
    // One let in to read that leaves without counting anything lets the rest go too.
    const last = budget.hold();
    const lastAdmitted = last.admit();
    next.release();
    expect(await lastAdmitted).to.equal(true);
    last.release();
    expect(budget.inUse).to.equal(0);
  });
  it('tells its owner when a hold is first used, once, and never for a hold not used', async () => {
    const budget = new AnswerBudget(100);
    const used: string[] = [];
    budget.hold(() => used.push('unused')).release();
    const taking = budget.hold(() => used.push('take'));
    taking.take(10);
    taking.take(10);
    expect(budget.hold(() => used.push('tryTake')).tryTake(10)).to.equal(true);
    expect(await budget.hold(() => used.push('admit')).admit(10)).to.equal(true);
    expect(await budget.hold(() => used.push('settle')).settle(10)).to.equal(true);
    expect(used).to.deep.equal(['take', 'tryTake', 'admit', 'settle']);
    // Released at first use (its client had gone): it takes nothing.
    const gone = budget.hold((hold) => hold.release());
    expect(await gone.admit(10)).to.equal(false);
    expect(budget.inUse).to.equal(50);
  });
  it('lets an answer that read alone without an estimate take one once known, so that others read beside it', async () => {
    const budget = new AnswerBudget(100, 1000);
    const alone = budget.hold();
    expect(await alone.admit()).to.equal(true);
    const behind = budget.hold();
    let behindIn = false;
    const behindAdmitted = behind.admit(20).then((granted) => (behindIn = granted));
    await new Promise(setImmediate);
    expect(behindIn, 'waits while one reads without an estimate').to.equal(false);
    expect(await alone.reestimate(30)).to.equal(true);
    await behindAdmitted;
    expect(behindIn, 'goes once the estimate is known and fits').to.equal(true);
    expect(budget.inUse).to.equal(50);
    // Settling replaces the estimate, as after admission.
    expect(await alone.settle(10)).to.equal(true);
    expect(budget.inUse).to.equal(30);
    alone.release();
    behind.release();
    expect(budget.inUse).to.equal(0);
  });
});
