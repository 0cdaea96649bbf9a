/**
 * A 100,000-cell row written (and the same cells as a batch of 1,000 rows), read and scanned through a fresh RedisStore on a redis-server of its
 * own, with the main thread watched by a StallMonitor. Run as its own process by
 * event-loop.test.ts, so that the heap it measures holds what a service would hold, not every
 * earlier test file's leftovers. Prints one JSON line: { stalls, wideCells, scannedCells, scannedRows, inOrder }.
 */
import { pino } from 'pino';
import { RedisStore } from '../../../src/store/redis/redis-store.ts';
import type { Row } from '../../../src/store/store.ts';
import { StallMonitor } from '../../support/loop-stalls.ts';
import { spawnRedis } from '../../support/redis-server.ts';
import { wideRowMutations } from '../../support/wide-row.ts';

const ref = { instance: 'inst', table: 'wide' };
const options = () => ({ deadline: Date.now() + 120_000 });
const wide = wideRowMutations();

const server = await spawnRedis();
const store = RedisStore.open({ url: server.url, instances: [ref.instance], logger: pino({ level: 'silent' }) });
try {
  await store.createTable(ref, [{ name: 'cf' }], options());
  const monitor = new StallMonitor();
  monitor.start();
  await store.mutateRow(ref, Buffer.from('wide'), wide, options());
  // The same cells as a batch of 1,000 rows of 100.
  await store.mutateRows(ref, Array.from({ length: 1000 }, (_, i) => ({ key: Buffer.from(`narrow ${i}`), mutations: wide.slice(i * 100, (i + 1) * 100) })), options());
  const [row] = await store.readRows(ref, [Buffer.from('wide')], { versions: 1 }, options());
  const scanned: Row[] = [];
  for await (const scannedRow of store.scanRows(ref, { range: {}, reverse: false, limit: 2000, versions: 1 }, options())) scanned.push(scannedRow);
  const stalls = monitor.stop();
  const cells = row?.cells ?? [];
  process.stdout.write(
    `${JSON.stringify({
      stalls,
      wideCells: cells.length,
      scannedCells: scanned.find((scannedRow) => scannedRow.key.toString() === 'wide')?.cells.length ?? 0,
      scannedRows: scanned.length,
      inOrder: cells.every((cell, i) => i === 0 || Buffer.compare((cells[i - 1] as typeof cell).column, cell.column) < 0),
    })}\n`,
  );
} finally {
  await store.close();
  await server.stop();
}
