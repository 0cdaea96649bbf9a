import { expect } from 'chai';
import type { Row } from '../../../src/store/store.ts';
import { harness } from '../../support/harnesses/spanner.ts';
import { useDriverStore } from '../../support/driver-harness.ts';

const call = () => ({ deadline: Date.now() + 60_000 });
const set = (column: string, value: string) => ({ type: 'set' as const, family: 'f', column: Buffer.from(column), value: Buffer.from(value), timestampMicros: 1000n });

/**
 * A forward scan reads a batch of cells at a time (src/store/spanner/spanner-store.ts): rows that
 * straddle a batch's end, and a row larger than a whole batch, still come whole and once.
 */
describe('spanner: forward scans read in batches', () => {
  const opened = useDriverStore(harness);

  it('yields rows that straddle batches, and a row wider than a batch, whole and once, in order', async function () {
    this.timeout(120_000);
    const { store, instance } = opened();
    const ref = { instance, table: 'wide' };
    await store.createTable(ref, [{ name: 'f' }], call());
    // 7 cells per row: 1000-cell batches end inside rows; "m" holds 2,500 cells.
    const keys = Array.from({ length: 300 }, (_, i) => `k${String(i).padStart(3, '0')}`);
    await store.mutateRows(ref, keys.map((key) => ({ key: Buffer.from(key), mutations: Array.from({ length: 7 }, (_, c) => set(`c${c}`, key)) })), call());
    await store.mutateRow(ref, Buffer.from('k150x'), Array.from({ length: 2500 }, (_, c) => set(`w${String(c).padStart(4, '0')}`, 'wide')), call());
    const rows: Row[] = [];
    for await (const row of store.scanRows(ref, { range: {}, reverse: false, limit: 1000, versions: 1 }, call())) rows.push(row);
    const expected = [...keys, 'k150x'].sort();
    expect(rows.map((row) => row.key.toString())).to.deep.equal(expected);
    for (const row of rows) expect(row.cells.length, row.key.toString()).to.equal(row.key.toString() === 'k150x' ? 2500 : 7);
  });
});
