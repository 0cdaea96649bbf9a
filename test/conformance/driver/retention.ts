import { setTimeout as sleep } from 'node:timers/promises';
import { expect } from 'chai';
import type { ReadSelection, TableRef } from '../../../src/store/store.ts';
import type { DriverHarnessFactory } from '../../support/driver-harness.ts';
import { call, deleteColumn, deleteFamily, deleteRow, requireCapability, scanAll, set, showRows, useFixture } from './fixtures.ts';

const HOUR = 3600;

/**
 * Retention: a version the family's policy has expired is never read, from the moment it expires,
 * whatever the store does physically (and whenever it does it).
 */
export function retentionCases(factory: DriverHarnessFactory): void {
  describe('retention', () => {
    const fixture = useFixture(factory);
    const key = Buffer.from('row');

    const read = async (ref: TableRef, selection?: Partial<ReadSelection>) =>
      showRows(await fixture().store.readRows(ref, [key], { versions: fixture().allVersions, ...selection }, call()))[0];

    it('keeps only the newest maxVersions versions of each column, on the read right after the write', async function () {
      requireCapability(this, fixture(), 'multipleVersions');
      const { table, store, at } = fixture();
      const ref = await table([{ name: 'two', maxVersions: 2 }, { name: 'all' }]);
      await store.mutateRow(ref, key, [1, 5, 3, 4, 2].map((n) => set('two', 'c', `v${n}`, at(n))), call());
      await store.mutateRow(ref, key, [set('two', 'd', 'd1', at(1)), set('all', 'c', 'a1', at(1)), set('all', 'c', 'a2', at(2)), set('all', 'c', 'a3', at(3))], call());
      expect((await read(ref))?.cells).to.deep.equal([
        `all:c@${at(3)}=a3`,
        `all:c@${at(2)}=a2`,
        `all:c@${at(1)}=a1`,
        `two:c@${at(5)}=v5`,
        `two:c@${at(4)}=v4`,
        `two:d@${at(1)}=d1`,
      ]);
      expect((await read(ref, { columns: [{ family: 'two' }], versions: 1 }))?.cells).to.deep.equal([`two:c@${at(5)}=v5`, `two:d@${at(1)}=d1`]);

      // An older version than the kept ones is expired as it is written; a newer one pushes the oldest out.
      await store.mutateRow(ref, key, [set('two', 'c', 'old', at(2))], call());
      expect((await read(ref, { columns: [{ family: 'two', column: Buffer.from('c') }] }))?.cells).to.deep.equal([`two:c@${at(5)}=v5`, `two:c@${at(4)}=v4`]);
      await store.mutateRow(ref, key, [set('two', 'c', 'v6', at(6))], call());
      expect((await read(ref, { columns: [{ family: 'two', column: Buffer.from('c') }] }))?.cells).to.deep.equal([`two:c@${at(6)}=v6`, `two:c@${at(5)}=v5`]);
    });

    it('keeps only the newest version in a maxVersions 1 family, written in one call or several', async () => {
      const { table, store, at } = fixture();
      const ref = await table([{ name: 'one', maxVersions: 1 }]);
      await store.mutateRow(ref, key, [set('one', 'c', 'v2', at(2)), set('one', 'c', 'v3', at(3)), set('one', 'c', 'v1', at(1))], call());
      expect((await read(ref))?.cells).to.deep.equal([`one:c@${at(3)}=v3`]);
      await store.mutateRow(ref, key, [set('one', 'c', 'v4', at(4))], call());
      await store.mutateRow(ref, key, [set('one', 'c', 'v0', at(0))], call());
      expect((await read(ref))?.cells).to.deep.equal([`one:c@${at(4)}=v4`]);
    });

    it('keeps an older version written after a delete in the same call, the newer stored one being gone', async () => {
      const { table, store, at } = fixture();
      const ref = await table([{ name: 'one', maxVersions: 1 }]);
      for (const remove of [deleteRow, deleteFamily('one'), deleteColumn('one', 'c')]) {
        await store.mutateRow(ref, key, [set('one', 'c', 'new', at(5))], call());
        await store.mutateRow(ref, key, [remove, set('one', 'c', 'old', at(1))], call());
        expect((await read(ref))?.cells, remove.type).to.deep.equal([`one:c@${at(1)}=old`]);
      }
    });

    it('never reads a version older than maxAgeSeconds, from the write on, in readRows and scanRows', async function () {
      requireCapability(this, fixture(), 'maxAge');
      const { table, store, ago, keepAll, at, scanLimit } = fixture();
      const ref = await table([{ name: 'hour', maxVersions: 1, maxAgeSeconds: HOUR }, keepAll('keep')]);
      const fresh = ago(10 * 60);
      await store.mutateRow(
        ref,
        key,
        [
          set('hour', 'fresh', 'v', fresh),
          set('hour', 'stale', 'v', ago(2 * HOUR)),
          set('hour', 'epoch', 'v', at(1)),
          set('keep', 'epoch', 'v', at(1)),
        ],
        call(),
      );
      await store.mutateRow(ref, Buffer.from('stale-only'), [set('hour', 'c', 'v', ago(HOUR + 10 * 60)), set('hour', 'd', 'v', at(0))], call());

      expect((await read(ref))?.cells).to.deep.equal([`hour:fresh@${fresh}=v`, `keep:epoch@${at(1)}=v`]);
      expect(await store.readRows(ref, [Buffer.from('stale-only')], { versions: 1 }, call())).to.deep.equal([null]);
      expect(await scanAll(store, ref, { range: {}, reverse: false, limit: scanLimit, versions: 1 })).to.deep.equal([
        { key: 'row', cells: [`hour:fresh@${fresh}=v`, `keep:epoch@${at(1)}=v`] },
      ]);
    });

    it('applies maxVersions and maxAgeSeconds together: a version either bound expires is gone', async function () {
      requireCapability(this, fixture(), 'maxAge');
      requireCapability(this, fixture(), 'multipleVersions');
      const { table, store, ago } = fixture();
      const ref = await table([{ name: 'both', maxVersions: 2, maxAgeSeconds: HOUR }]);
      const [t10, t20, t30] = [ago(10 * 60), ago(20 * 60), ago(30 * 60)];
      await store.mutateRow(
        ref,
        key,
        [
          // c: three fresh versions, maxVersions keeps two; an old one maxAge removes.
          set('both', 'c', 'c30', t30),
          set('both', 'c', 'c10', t10),
          set('both', 'c', 'old', ago(3 * HOUR)),
          set('both', 'c', 'c20', t20),
          // d: one fresh version, one too old.
          set('both', 'd', 'd20', t20),
          set('both', 'd', 'old', ago(2 * HOUR)),
          // e: only old versions.
          set('both', 'e', 'old1', ago(2 * HOUR)),
          set('both', 'e', 'old2', ago(3 * HOUR)),
        ],
        call(),
      );
      expect((await read(ref))?.cells).to.deep.equal([`both:c@${t10}=c10`, `both:c@${t20}=c20`, `both:d@${t20}=d20`]);
    });

    it('stops reading a version once it grows older than maxAgeSeconds', async function () {
      requireCapability(this, fixture(), 'maxAge');
      this.timeout(30_000);
      const { table, store, ago, scanLimit } = fixture();
      const maxAgeSeconds = 2;
      const ref = await table([{ name: 'short', maxVersions: 1, maxAgeSeconds }]);
      const written = ago(0);
      await store.mutateRow(ref, key, [set('short', 'c', 'v', written)], call());
      const expiresAtMs = Number(written / 1000n) + maxAgeSeconds * 1000;

      const before = await read(ref);
      // Only a read that finished well before the expiry must have seen the version.
      if (Date.now() < expiresAtMs - 500) expect(before?.cells).to.deep.equal([`short:c@${written}=v`]);

      await sleep(Math.max(0, expiresAtMs - Date.now()) + 200);
      expect(await read(ref)).to.equal(null);
      expect(await scanAll(store, ref, { range: {}, reverse: false, limit: scanLimit, versions: 1 })).to.deep.equal([]);
    });
  });
}
