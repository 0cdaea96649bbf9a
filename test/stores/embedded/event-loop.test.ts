import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { expect } from 'chai';
import { EmbeddedStore } from '../../../src/store/embedded/embedded-store.ts';
import type { Mutation, Row } from '../../../src/store/store.ts';
import { StallMonitor } from '../../support/loop-stalls.ts';

/**
 * SQLite runs on the store's own threads: the main thread only encodes requests and decodes
 * answers, a bounded piece per turn of the event loop. Measured as the main thread's own CPU time
 * between two ticks of a 1 ms timer, which a busy machine does not inflate (wall-clock delays are
 * printed by `node bench/embedded.ts store`).
 */
describe('embedded store: the event loop under a 100,000-cell row', function () {
  this.timeout(180_000);
  let dataDir: string;
  let store: EmbeddedStore;
  const ref = { instance: 'local', table: 'wide' };
  const options = () => ({ deadline: Date.now() + 120_000 });
  const wide: Mutation[] = Array.from({ length: 100_000 }, (_, i) => ({
    type: 'set',
    family: 'cf',
    column: Buffer.from(`column ${i}`),
    value: Buffer.from(`value ${i}`),
    timestampMicros: 1_000_000n,
  }));

  before(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'kvcrud-event-loop-'));
    store = await EmbeddedStore.open({ dataDir });
    await store.createTable(ref, [{ name: 'cf' }], options());
    await store.mutateRows(ref, Array.from({ length: 100 }, (_, i) => ({ key: Buffer.from(`small ${i}`), mutations: [{ ...(wide[0] as Mutation) }] })), options());
  });
  after(async () => {
    await store.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('never holds the main thread for 50 ms while it writes, reads and scans 100,000 cells, and small reads go on meanwhile', async () => {
    const monitor = new StallMonitor();
    monitor.start();
    const started = performance.now();
    let writeDone = Number.POSITIVE_INFINITY;
    const write = store.mutateRow(ref, Buffer.from('wide'), wide, options()).then(() => {
      writeDone = performance.now();
    });
    // Small reads, each from a turn of its own, while the wide row is written.
    const readTimes: number[] = [];
    const reads = (async () => {
      while (performance.now() < writeDone) {
        await new Promise(setImmediate);
        await store.readRows(ref, [Buffer.from(`small ${readTimes.length % 100}`)], { versions: 1 }, options());
        readTimes.push(performance.now());
      }
    })();
    await Promise.all([write, reads]);

    const [row] = await store.readRows(ref, [Buffer.from('wide')], { versions: 1 }, options());
    const scanned: Row[] = [];
    for await (const scannedRow of store.scanRows(ref, { range: {}, reverse: false, limit: 1000, versions: 1 }, options())) scanned.push(scannedRow);
    const stalls = monitor.stop();

    expect(row?.cells).to.have.length(100_000);
    expect(scanned.find((scannedRow) => scannedRow.key.toString() === 'wide')?.cells).to.have.length(100_000);
    expect(stalls.maxCpuStretchMs, JSON.stringify(stalls)).to.be.below(50);
    const duringWrite = readTimes.filter((time) => time > started && time < writeDone);
    expect(duringWrite.length, `${readTimes.length} reads while the write took ${Math.round(writeDone - started)} ms`).to.be.at.least(1);
  });
});
