import { execFile } from 'node:child_process';
import { totalmem } from 'node:os';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { heapChoice, heapFlags } from '../../../src/heap-size.ts';
import type { Stalls } from '../../support/loop-stalls.ts';
import { requireRedis } from '../../support/redis-server.ts';

/**
 * The Redis store packs a large row's mutations into one script argument and decodes and sorts a
 * large row a slice at a time. Measured as the main thread's own CPU time between two ticks of a
 * 1 ms timer, which a busy machine does not inflate. The scenario runs in a process of its own:
 * in the test runner's heap, grown by every earlier test file, garbage collection alone can hold
 * the thread for longer than the store ever does.
 */
describe('redis store: the event loop under a 100,000-cell row', function () {
  this.timeout(180_000);

  it('never holds the main thread for long while it writes 100,000 cells as one row and as a batch, reads and scans them', async function () {
    requireRedis(this);
    const scenario = fileURLToPath(new URL('./wide-row-scenario.ts', import.meta.url));
    // With the heap the service gives itself: V8's own sizing, from a 24 GB machine, let single
    // collections hold the thread for 95-125 ms.
    const flags = heapFlags(heapChoice(process.constrainedMemory(), totalmem()));
    const { stdout } = await promisify(execFile)(process.execPath, [...flags, scenario], { timeout: 150_000 });
    const result = JSON.parse(stdout) as { stalls: Stalls; wideCells: number; scannedCells: number; scannedRows: number; inOrder: boolean };

    expect(result.wideCells).to.equal(100_000);
    expect(result.scannedCells).to.equal(100_000);
    expect(result.scannedRows).to.equal(1001);
    expect(result.inOrder).to.equal(true);
    // The target is 50 ms (bench/event-loop.ts measures it: 39-46 ms). The bound here leaves room for
    // garbage collection, whose share of the main thread grows when its helper threads find no free
    // core (85 ms once, with the suite and a benchmark on two cores); the unsliced store took 316 ms.
    expect(result.stalls.maxCpuStretchMs, JSON.stringify(result.stalls)).to.be.below(100);
  });
});
