import { expect } from 'chai';
import { findDriver } from '../../../src/store/drivers.ts';
import type { StoreCapabilities } from '../../../src/store/store.ts';
import type { DriverHarnessFactory } from '../../support/driver-harness.ts';
import { call, plainFamily, set, showRows, useFixture } from './fixtures.ts';

/** What the store publishes, and what it does where it publishes that it cannot do something. */
export function capabilityCases(factory: DriverHarnessFactory): void {
  describe('capabilities', () => {
    const fixture = useFixture(factory);

    it("publishes its driver's limits, and no capability its driver does not publish", function () {
      const driver = findDriver(factory.driver);
      if (driver === undefined) this.skip();
      const { store } = fixture();
      expect(store.limits).to.deep.equal(driver.limits);
      // A store may know more than its driver: Bigtable's emulator, unlike Bigtable, cannot scan in reverse.
      for (const [capability, published] of Object.entries(store.capabilities)) {
        if (published === true) expect(driver.capabilities[capability as keyof StoreCapabilities], capability).to.equal(true);
      }
      expect(Object.keys(store.capabilities).sort()).to.deep.equal(Object.keys(driver.capabilities).sort());
    });

    it('publishes limits of at least one', () => {
      const { limits } = fixture().store;
      for (const [name, value] of Object.entries(limits)) {
        expect(Number.isSafeInteger(value) && value >= 1, `${name} = ${String(value)}`).to.equal(true);
      }
    });

    it('without multipleVersions, keeps only the latest version of a column and describes every family as maxVersions 1', async function () {
      const { store, table, at } = fixture();
      if (store.capabilities.multipleVersions) this.skip();
      const families = [{ name: 'a', maxVersions: 1 }, ...(store.capabilities.maxAge ? [{ name: 'b', maxVersions: 1, maxAgeSeconds: 86_400 }] : [])];
      const ref = await table(families);
      expect((await store.describeTable(ref, call())).families.map(plainFamily)).to.deep.equal(families);
      const key = Buffer.from('r');
      await store.mutateRow(ref, key, [set('a', 'c', 'v1', at(1)), set('a', 'c', 'v3', at(3)), set('a', 'c', 'v2', at(2))], call());
      await store.mutateRow(ref, key, [set('a', 'c', 'v0', at(0))], call());
      expect(showRows(await store.readRows(ref, [key], { versions: 1 }, call()))).to.deep.equal([{ key: 'r', cells: [`a:c@${at(3)}=v3`] }]);
    });
  });
}
