import { expect } from 'chai';
import { BodyBudget, bodyBudgetBytes } from '../../src/http/admission/body-budget.ts';

const MIB = 1024 * 1024;

describe('BodyBudget: the bytes of large bodies handled at once', () => {
  it('is sized from the heap, and never below one body of the largest size', () => {
    expect(bodyBudgetBytes(10 * MIB, 304 * MIB)).to.equal(Math.floor((304 * MIB) / 18));
    expect(bodyBudgetBytes(10 * MIB, 64 * MIB)).to.equal(10 * MIB);
  });

  it('grants what fits at once, and the rest in arrival order as bytes are given back', async () => {
    const budget = new BodyBudget(100);
    const order: string[] = [];
    const first = await budget.acquire(60, 1000);
    const second = budget.acquire(60, 1000).then((release) => {
      order.push('second');
      return release;
    });
    const third = budget.acquire(30, 1000).then((release) => {
      order.push('third');
      return release;
    });
    await new Promise(setImmediate);
    // The third would fit beside the first, but waits behind the second: a large body is not starved.
    expect(order).to.deep.equal([]);
    expect(budget.inUse).to.equal(60);
    first?.();
    const [releaseSecond, releaseThird] = await Promise.all([second, third]);
    expect(order).to.deep.equal(['second', 'third']);
    expect(budget.inUse).to.equal(90);
    releaseSecond?.();
    releaseSecond?.(); // given back once, however often called
    releaseThird?.();
    expect(budget.inUse).to.equal(0);
  });

  it('lets a body larger than the whole budget go alone', async () => {
    const budget = new BodyBudget(100);
    const small = await budget.acquire(10, 1000);
    const large = budget.acquire(500, 1000);
    await new Promise(setImmediate);
    expect(budget.inUse).to.equal(10);
    small?.();
    const release = await large;
    expect(budget.inUse).to.equal(500);
    release?.();
    expect(budget.inUse).to.equal(0);
  });

  it('gives up after the wait, and lets those behind a body that gave up go', async () => {
    const budget = new BodyBudget(100);
    const held = await budget.acquire(80, 1000);
    const refused = budget.acquire(90, 50);
    const behind = budget.acquire(20, 1000);
    expect(await refused).to.equal(undefined);
    const release = await behind;
    expect(budget.inUse).to.equal(100);
    release?.();
    held?.();
    expect(budget.inUse).to.equal(0);
  });
});
