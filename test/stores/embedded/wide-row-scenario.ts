/**
 * A 100,000-cell row written, read and scanned on a fresh embedded store while small reads go on,
 * with the main thread watched by a StallMonitor. Run as its own process by event-loop.test.ts, so
 * that the heap it measures holds what a service would hold, not every earlier test file's leftovers.
 * Prints one JSON line: { stalls, wideCells, scannedCells, readsDuringWrite, writeMs }.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { releaseHeapFlags } from '../../../src/heap-size.ts';
import { EmbeddedStore } from '../../../src/store/embedded/embedded-store.ts';
import type { Mutation, Row } from '../../../src/store/store.ts';
import { StallMonitor } from '../../support/loop-stalls.ts';
import { wideRowMutations } from '../../support/wide-row.ts';

const ref = { instance: 'local', table: 'wide' };
const options = () => ({ deadline: Date.now() + 120_000 });
const wide = wideRowMutations();

// As the service does: the heap flags it runs with size its main thread, not the SQLite threads.
releaseHeapFlags();
const dataDir = mkdtempSync(join(tmpdir(), 'kvcrud-event-loop-'));
const store = await EmbeddedStore.open({ dataDir });
try {
  await store.createTable(ref, [{ name: 'cf' }], options());
  await store.mutateRows(ref, Array.from({ length: 100 }, (_, i) => ({ key: Buffer.from(`small ${i}`), mutations: [{ ...(wide[0] as Mutation) }] })), options());

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

  process.stdout.write(
    `${JSON.stringify({
      stalls,
      wideCells: row?.cells.length ?? 0,
      scannedCells: scanned.find((scannedRow) => scannedRow.key.toString() === 'wide')?.cells.length ?? 0,
      readsDuringWrite: readTimes.filter((time) => time > started && time < writeDone).length,
      writeMs: Math.round(writeDone - started),
    })}\n`,
  );
} finally {
  await store.close();
  rmSync(dataDir, { recursive: true, force: true });
}
