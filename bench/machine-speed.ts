import { createHash } from 'node:crypto';

/**
 * The time a fixed piece of work of the kind a request costs (JSON in and out, a hash, small
 * maps) takes on this thread, in milliseconds: the fastest of nine runs of a few milliseconds.
 *
 * On a shared VM the same work costs more CPU time in some minutes than in others (other guests
 * on the host, the cores' clocks). A long run that prints this beside its own figures tells a
 * change in the machine from a change in the code: if both move by the same factor, the machine
 * moved. The fastest run is one that no other process interrupted, so waiting for a core does not
 * count; the threads' CPU clocks here tick in 4 ms steps, too coarse for work this short.
 */
export function referenceWorkMs(): number {
  let fastest = Infinity;
  let total = 0;
  for (let run = 0; run < 9; run += 1) {
    const start = performance.now();
    total += work();
    fastest = Math.min(fastest, performance.now() - start);
  }
  // The results are used, so that the compiler cannot drop the work.
  if (total === 0) throw new Error('the reference work did nothing');
  return fastest;
}

const SAMPLE = JSON.stringify({
  tableName: 'reference',
  rowKeyId: 'row-1',
  data: Array.from({ length: 8 }, (_, index) => ({ columnFamily: 'cf', columnName: `c${index}`, columnValue: 'v'.repeat(128) })),
});
function work(): number {
  let total = 0;
  for (let index = 0; index < 400; index += 1) {
    const body = JSON.parse(SAMPLE) as { data: Array<{ columnName: string }> };
    const columns = new Map(body.data.map((cell) => [cell.columnName, cell]));
    total += JSON.stringify([...columns.values()]).length + (createHash('sha256').update(SAMPLE).digest()[0] ?? 0);
  }
  return total;
}
