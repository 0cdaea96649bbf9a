import { expect } from 'chai';
import { allocatorEnvironment, heapChoice, heapFlags, heapSizeChosenBy } from '../../src/heap-size.ts';

const MIB = 1024 * 1024;
const GIB = 1024 * MIB;

describe('heap sizing', () => {
  it('gives the old generation half of a cgroup memory limit, with 16 MiB semi-spaces from 512 MiB on', () => {
    expect(heapFlags(heapChoice(512 * MIB, 24 * GIB))).to.deep.equal(['--max-old-space-size=256', '--max-semi-space-size=16', '--heap-growing-percent=60']);
    expect(heapFlags(heapChoice(8 * GIB, 24 * GIB))).to.deep.equal(['--max-old-space-size=4096', '--max-semi-space-size=16']);
    expect(heapChoice(2 * GIB, 24 * GIB)).to.include({ source: 'cgroup memory limit', budgetMiB: 2048 });
  });

  it('never goes below 128 MiB of old space, where V8 would collect all the time', () => {
    expect(heapFlags(heapChoice(192 * MIB, 24 * GIB))).to.deep.equal(['--max-old-space-size=128', '--max-semi-space-size=8', '--heap-growing-percent=60']);
  });

  it("lets the old generation grow by 60 % between major collections up to 512 MiB of old space, and leaves larger heaps to V8's own growth", () => {
    expect(heapChoice(1 * GIB, 24 * GIB)).to.include({ maxOldSpaceMiB: 512, heapGrowingPercent: 60 });
    expect(heapChoice(1 * GIB + 2 * MIB, 24 * GIB)).to.include({ maxOldSpaceMiB: 513, heapGrowingPercent: 0 });
    expect(heapFlags(heapChoice(2 * GIB, 24 * GIB))).to.deep.equal(['--max-old-space-size=1024', '--max-semi-space-size=16']);
  });

  it('sizes an unlimited process (no cgroup limit, or one above the machine) as a 512 MiB container', () => {
    for (const constrained of [0, 2 ** 64, 32 * GIB]) {
      expect(heapChoice(constrained, 24 * GIB)).to.deep.equal({ budgetMiB: 512, source: 'no memory limit', maxOldSpaceMiB: 256, maxSemiSpaceMiB: 16, heapGrowingPercent: 60 });
    }
  });

  it('leaves the heap alone when NODE_OPTIONS or a node flag sizes it or sets its growth', () => {
    expect(heapSizeChosenBy([], '--max-old-space-size=1024')).to.equal(true);
    expect(heapSizeChosenBy(['--max-semi-space-size=4'], undefined)).to.equal(true);
    expect(heapSizeChosenBy([], '--heap-growing-percent=20')).to.equal(true);
    expect(heapSizeChosenBy(['--enable-source-maps'], '--trace-warnings')).to.equal(false);
  });

  it("fixes glibc's mmap threshold at 128 KiB, unless the environment sets it", () => {
    expect(allocatorEnvironment({})).to.deep.equal({ MALLOC_MMAP_THRESHOLD_: '131072' });
    expect(allocatorEnvironment({ MALLOC_MMAP_THRESHOLD_: '1048576' })).to.deep.equal({});
  });
});
