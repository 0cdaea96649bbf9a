import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { expect } from 'chai';
import { isStoreError } from '../../../src/store/errors.ts';
import { EmbeddedStore } from '../../../src/store/embedded/embedded-store.ts';
import type { Mutation } from '../../../src/store/store.ts';

/** The store's SQLite threads: what a caller sees when one of them dies, and that the store goes on. */
describe('embedded store: a SQLite thread that dies', function () {
  this.timeout(120_000);
  let dataDir: string;
  let store: EmbeddedStore;
  const ref = { instance: 'local', table: 't' };
  const options = () => ({ deadline: Date.now() + 60_000 });
  const set = (value: string): Mutation => ({ type: 'set', family: 'cf', column: Buffer.from('c'), value: Buffer.from(value), timestampMicros: 1000n });
  const outcome = async (promise: Promise<unknown>) => {
    try {
      await promise;
      return 'resolved';
    } catch (error) {
      return error;
    }
  };

  afterEach(async () => {
    await store.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('fails the writes waiting on a writer that runs out of memory with UNAVAILABLE, and the next write starts a new writer', async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'kvcrud-threads-'));
    // Each thread's heap is capped far below what decoding a 500,000-cell row takes: the thread ends, not the process.
    store = await EmbeddedStore.open({ dataDir, threadResourceLimits: { maxOldGenerationSizeMb: 16, maxYoungGenerationSizeMb: 2 } });
    await store.createTable(ref, [{ name: 'cf' }], options());
    await store.mutateRow(ref, Buffer.from('before'), [set('written before')], options());
    const huge = Array.from({ length: 500_000 }, (_, i) => ({ ...set(`v${i}`), column: Buffer.from(`c${i}`) }));

    let settled = false;
    const hugeWrite = outcome(store.mutateRow(ref, Buffer.from('huge'), huge, options())).finally(() => {
      settled = true;
    });
    // Small writes queue behind it until the writer dies; reads go on, on threads of their own.
    const smallWrites: Array<Promise<unknown>> = [];
    const reads: Array<Promise<unknown>> = [];
    for (let i = 0; !settled; i++) {
      smallWrites.push(outcome(store.mutateRow(ref, Buffer.from(`small ${i}`), [set('x')], options())));
      reads.push(outcome(store.readRows(ref, [Buffer.from('before')], { versions: 1 }, options())));
      await sleep(20);
    }
    const failure = await hugeWrite;
    expect(isStoreError(failure, 'UNAVAILABLE') && failure.message, String(failure)).to.match(/writer thread stopped .*memory/);
    // Every call settles: those the writer had taken before fail with it, none waits for ever.
    const small = await Promise.all(smallWrites);
    for (const result of small) {
      if (result !== 'resolved') expect(isStoreError(result, 'UNAVAILABLE'), String(result)).to.equal(true);
    }
    expect(small.filter((result) => result !== 'resolved')).to.not.be.empty;
    expect(await Promise.all(reads)).to.satisfy((results: unknown[]) => results.every((result) => result === 'resolved'));

    await store.mutateRow(ref, Buffer.from('after'), [set('written by a new thread')], options());
    const rows = await store.readRows(ref, [Buffer.from('before'), Buffer.from('huge'), Buffer.from('after')], { versions: 1 }, options());
    expect(rows.map((row) => row?.cells[0]?.value.toString() ?? null)).to.deep.equal(['written before', null, 'written by a new thread']);
  });
});
