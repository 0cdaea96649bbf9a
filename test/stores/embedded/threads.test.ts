import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
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

  it('fails a write with UNAVAILABLE when the writer runs out of memory on it, and the next write starts a new writer', async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'kvcrud-threads-'));
    // Each thread's heap is capped far below what decoding a 500,000-cell row takes: the thread ends, not the process.
    store = await EmbeddedStore.open({ dataDir, threadResourceLimits: { maxOldGenerationSizeMb: 16, maxYoungGenerationSizeMb: 2 } });
    await store.createTable(ref, [{ name: 'cf' }], options());
    await store.mutateRow(ref, Buffer.from('before'), [set('written before')], options());
    const huge = Array.from({ length: 500_000 }, (_, i) => ({ ...set(`v${i}`), column: Buffer.from(`c${i}`) }));

    const [hugeWrite, read] = await Promise.all([
      outcome(store.mutateRow(ref, Buffer.from('huge'), huge, options())),
      outcome(store.readRows(ref, [Buffer.from('before')], { versions: 1 }, options())),
    ]);
    expect(isStoreError(hugeWrite, 'UNAVAILABLE') && hugeWrite.message, String(hugeWrite)).to.match(/writer thread stopped .*memory/);
    // The readers have threads of their own.
    expect(read).to.equal('resolved');

    await store.mutateRow(ref, Buffer.from('after'), [set('written by a new thread')], options());
    const rows = await store.readRows(ref, [Buffer.from('before'), Buffer.from('huge'), Buffer.from('after')], { versions: 1 }, options());
    expect(rows.map((row) => row?.cells[0]?.value.toString() ?? null)).to.deep.equal(['written before', null, 'written by a new thread']);
  });

  it('fails the calls waiting on threads that end abruptly, without hanging, and serves the next ones', async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'kvcrud-threads-'));
    store = await EmbeddedStore.open({ dataDir, readers: 1 });
    await store.createTable(ref, [{ name: 'cf' }], options());
    await store.mutateRow(ref, Buffer.from('r'), [set('kept')], options());

    const waiting = [
      outcome(store.readRows(ref, [Buffer.from('r')], { versions: 1 }, options())),
      outcome(store.mutateRow(ref, Buffer.from('w'), [set('x')], options())),
    ];
    await store.crashThreads();
    for (const result of await Promise.all(waiting)) {
      // Each either finished before its thread ended or failed with UNAVAILABLE; none is left waiting.
      if (result !== 'resolved') expect(isStoreError(result, 'UNAVAILABLE'), String(result)).to.equal(true);
    }

    const [row] = await store.readRows(ref, [Buffer.from('r')], { versions: 1 }, options());
    expect(row?.cells[0]?.value.toString()).to.equal('kept');
    await store.checkHealth(options());
  });
});
