import { expect } from 'chai';
import type { ModifyRule, TableRef } from '../../../src/store/store.ts';
import type { DriverHarnessFactory } from '../../support/driver-harness.ts';
import { bytes, call, expectRejection, requireCapability, set, show, showRows, useFixture } from './fixtures.ts';

const HOUR = 3600;
const INT64_MAX = 2n ** 63n - 1n;
const INT64_MIN = -(2n ** 63n);

export function increment(family: string, column: string | Buffer, amount: bigint | number): ModifyRule {
  return { type: 'increment', family, column: bytes(column), amount: BigInt(amount) };
}

export function append(family: string, column: string | Buffer, value: string | Buffer): ModifyRule {
  return { type: 'append', family, column: bytes(column), value: bytes(value) };
}

/** A counter's 8 bytes: a 64-bit two's-complement big-endian integer. */
export function counter(value: bigint | number): Buffer {
  const buffer = Buffer.alloc(8);
  buffer.writeBigInt64BE(BigInt.asIntN(64, BigInt(value)));
  return buffer;
}

/** readModifyWriteRow: counters and appends, on the latest live version, atomically. */
export function readModifyWriteCases(factory: DriverHarnessFactory): void {
  describe('readModifyWriteRow', () => {
    const fixture = useFixture(factory);
    const key = Buffer.from('row');
    let ref: TableRef;

    beforeEach(async function () {
      requireCapability(this, fixture(), 'readModifyWrite');
      const { table, keepAll } = fixture();
      ref = await table([keepAll('a'), { name: 'one', maxVersions: 1 }]);
    });

    const modify = async (...rules: ModifyRule[]) => {
      const row = await fixture().store.readModifyWriteRow(ref, key, rules, call());
      return row.cells.map((cell) => `${cell.family}:${show(cell.column)}=${show(cell.value)}`);
    };
    const latest = async (row = key) =>
      showRows(await fixture().store.readRows(ref, [row], { versions: 1 }, call()))[0]?.cells.map((cell) => cell.replace(/@\d+=/, '=')) ?? null;

    it('counts a missing column from 0, and answers the new value as 8 big-endian bytes', async () => {
      expect(await modify(increment('a', 'n', 5))).to.deep.equal([`a:n=${show(counter(5))}`]);
      expect(await modify(increment('a', 'n', -7))).to.deep.equal([`a:n=${show(counter(-2))}`]);
      expect(await latest()).to.deep.equal([`a:n=${show(counter(-2))}`]);
    });

    it('adds any int64 and wraps on overflow, as Bigtable does', async () => {
      expect(await modify(increment('a', 'n', INT64_MAX))).to.deep.equal([`a:n=${show(counter(INT64_MAX))}`]);
      expect(await modify(increment('a', 'n', 1))).to.deep.equal([`a:n=${show(counter(INT64_MIN))}`]);
      expect(await modify(increment('a', 'n', INT64_MIN))).to.deep.equal([`a:n=${show(counter(0))}`]);
    });

    it('increments a value written as 8 bytes by mutateRow', async () => {
      const { at, store } = fixture();
      await store.mutateRow(ref, key, [set('a', 'n', counter(41), at(1))], call());
      expect(await modify(increment('a', 'n', 1))).to.deep.equal([`a:n=${show(counter(42))}`]);
    });

    it('appends to the latest value, or to nothing, bytes as they are', async () => {
      const { at, store } = fixture();
      expect(await modify(append('a', 'log', Buffer.from([0, 1])))).to.deep.equal(['a:log=\\x00\\x01']);
      await store.mutateRow(ref, key, [set('a', 'trail', 'start', at(1))], call());
      expect(await modify(append('a', 'trail', '|next'))).to.deep.equal(['a:trail=start|next']);
      expect(await modify(append('a', 'trail', ''))).to.deep.equal(['a:trail=start|next']);
    });

    it('applies rules in order, each on what the earlier ones left, answering each column touched once, in row order', async () => {
      expect(await modify(increment('one', 'z', 1), append('a', 'y', 'x'), increment('one', 'z', 2), append('a', 'y', 'y'), increment('a', 'b', 3))).to.deep.equal([
        `a:b=${show(counter(3))}`,
        'a:y=xy',
        `one:z=${show(counter(3))}`,
      ]);
      expect(await latest()).to.deep.equal([`a:b=${show(counter(3))}`, 'a:y=xy', `one:z=${show(counter(3))}`]);
    });

    it('fails with FAILED_PRECONDITION NOT_A_COUNTER for a value that is not 8 bytes, writing nothing', async () => {
      const { at, store } = fixture();
      await store.mutateRow(ref, key, [set('a', 'text', 'seven-b', at(1)), set('a', 'nine', '123456789', at(1))], call());
      for (const column of ['text', 'nine']) {
        const error = await expectRejection(store.readModifyWriteRow(ref, key, [append('a', 'log', 'x'), increment('a', 'ok', 1), increment('a', column, 1)], call()), {
          code: 'FAILED_PRECONDITION',
        });
        expect(error.reason).to.equal('NOT_A_COUNTER');
      }
      // An append first makes a counter a longer value: the increment after it fails too.
      await store.mutateRow(ref, key, [set('a', 'n', counter(1), at(1))], call());
      await expectRejection(store.readModifyWriteRow(ref, key, [append('a', 'n', 'x'), increment('a', 'n', 1)], call()), { code: 'FAILED_PRECONDITION' });
      expect(await latest()).to.deep.equal([`a:n=${show(counter(1))}`, 'a:nine=123456789', 'a:text=seven-b']);
    });

    it('fails with NOT_FOUND columnFamily for an unknown family, writing nothing', async () => {
      await expectRejection(fixture().store.readModifyWriteRow(ref, key, [increment('a', 'n', 1), append('nope', 'x', 'v'), increment('gone', 'n', 1)], call()), {
        code: 'NOT_FOUND',
        resource: 'columnFamily',
        name: 'nope',
      });
      expect(await latest()).to.equal(null);
    });

    it('fails with NOT_FOUND table for a missing table', async () => {
      const { instance, store } = fixture();
      await expectRejection(store.readModifyWriteRow({ instance, table: 'no-such-table' }, key, [increment('a', 'n', 1)], call()), {
        code: 'NOT_FOUND',
        resource: 'table',
        name: 'no-such-table',
      });
    });

    it('writes the new version at the clock, or at the replaced version when that is later; it is what reads see as latest', async () => {
      const { store } = fixture();
      const before = BigInt(Date.now() - 1000) * 1000n;
      const [first] = (await store.readModifyWriteRow(ref, key, [increment('a', 'n', 1)], call())).cells;
      expect((first?.timestampMicros ?? 0n) >= before, "timestamp at the clock").to.equal(true);
      expect(Number((first?.timestampMicros ?? 0n) % BigInt(store.limits.timestampGranularityMicros))).to.equal(0);
      // A version far in the future: the new one takes its timestamp, and replaces it.
      const future = BigInt(Date.now() + 10 * 365 * 86_400_000) * 1000n;
      await store.mutateRow(ref, key, [set('one', 'f', counter(10), future)], call());
      const [later] = (await store.readModifyWriteRow(ref, key, [increment('one', 'f', 1)], call())).cells;
      expect(later?.timestampMicros).to.equal(future);
      const versions = showRows(await store.readRows(ref, [key], { versions: fixture().allVersions, columns: [{ family: 'one' }] }, call()))[0];
      expect(versions?.cells).to.deep.equal([`one:f@${future}=${show(counter(11))}`]);
    });

    it('counts from 0 again when the latest version has expired by age, even before the store removes it', async function () {
      requireCapability(this, fixture(), 'maxAge');
      const { table, store, ago } = fixture();
      ref = await table([{ name: 'hour', maxVersions: 1, maxAgeSeconds: HOUR }]);
      await store.mutateRow(ref, key, [set('hour', 'n', counter(100), ago(2 * HOUR)), set('hour', 'log', 'old', ago(2 * HOUR))], call());
      expect(await modify(increment('hour', 'n', 1), append('hour', 'log', 'new'))).to.deep.equal(['hour:log=new', `hour:n=${show(counter(1))}`]);
    });

    it('sums racing increments exactly', async function () {
      this.timeout(120_000);
      const { store } = fixture();
      const callers = 40;
      await Promise.all(Array.from({ length: callers }, () => store.readModifyWriteRow(ref, Buffer.from('hot'), [increment('a', 'n', 1), append('one', 'log', '.')], call())));
      expect(await latest(Buffer.from('hot'))).to.deep.equal([`a:n=${show(counter(callers))}`, `one:log=${'.'.repeat(callers)}`]);
    });
  });
}
