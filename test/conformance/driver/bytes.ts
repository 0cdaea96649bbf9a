import { expect } from 'chai';
import type { DriverHarnessFactory } from '../../support/driver-harness.ts';
import { call, scanAll, set, show, showRows, useFixture } from './fixtures.ts';

/** Every byte of every key, column and value is kept exactly: nothing is decoded, replaced or trimmed. */
export function bytesCases(factory: DriverHarnessFactory): void {
  describe('bytes', () => {
    const fixture = useFixture(factory);
    const allBytes = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
    // Byte strings that a UTF-8 decoder would turn into the same U+FFFD, or trim, or stop at.
    const awkward = [Buffer.from([0xff]), Buffer.from([0xfe]), Buffer.from([0xc3]), Buffer.from([0xc3, 0x28]), Buffer.from([0x00]), Buffer.from('x\u0000'), Buffer.from(' x '), Buffer.from([0xed, 0xa0, 0x80])];

    it('keeps keys, columns and values that are not UTF-8 exactly, and apart from each other', async () => {
      const { table, keepAll, store, at, scanLimit } = fixture();
      const ref = await table([keepAll('f')]);
      for (const [index, key] of awkward.entries()) {
        await store.mutateRow(ref, key, awkward.map((column) => set('f', column, Buffer.concat([key, Buffer.from([index]), column]), at(1))), call());
      }
      const expectedRow = (key: Buffer, index: number) => ({
        key: show(key),
        cells: [...awkward]
          .sort((x, y) => Buffer.compare(x, y))
          .map((column) => `f:${show(column)}@${at(1)}=${show(Buffer.concat([key, Buffer.from([index]), column]))}`),
      });
      expect(showRows(await store.readRows(ref, awkward, { versions: 1 }, call()))).to.deep.equal(awkward.map(expectedRow));
      const ordered = awkward.map((key, index) => ({ key, index })).sort((x, y) => Buffer.compare(x.key, y.key));
      expect(await scanAll(store, ref, { range: {}, reverse: false, limit: scanLimit, versions: 1 })).to.deep.equal(
        ordered.map(({ key, index }) => expectedRow(key, index)),
      );
    });

    it('keeps a value holding every byte value', async () => {
      const { table, keepAll, store, at } = fixture();
      const ref = await table([keepAll('f')]);
      await store.mutateRow(ref, allBytes, [set('f', allBytes, allBytes, at(1))], call());
      const [row] = await store.readRows(ref, [allBytes], { versions: 1 }, call());
      expect(row?.key.equals(allBytes)).to.equal(true);
      expect(row?.cells[0]?.column.equals(allBytes)).to.equal(true);
      expect(row?.cells[0]?.value.equals(allBytes)).to.equal(true);
    });

    it('keeps an empty column name and an empty value, apart from a missing cell', async () => {
      const { table, keepAll, store, at, scanLimit } = fixture();
      const ref = await table([keepAll('f')]);
      const key = Buffer.from('r');
      await store.mutateRow(ref, key, [set('f', '', '', at(1)), set('f', 'x', '', at(1)), set('f', '', Buffer.from([0]), at(2))], call());
      const expected = store.capabilities.multipleVersions ? [`f:@${at(2)}=\\x00`, `f:@${at(1)}=`, `f:x@${at(1)}=`] : [`f:@${at(2)}=\\x00`, `f:x@${at(1)}=`];
      expect(showRows(await store.readRows(ref, [key], { versions: fixture().allVersions }, call()))).to.deep.equal([{ key: 'r', cells: expected }]);

      await store.mutateRow(ref, Buffer.from('empty'), [set('f', '', '', at(1))], call());
      const [row] = await store.readRows(ref, [Buffer.from('empty')], { versions: 1 }, call());
      expect(row?.cells.map((cell) => [cell.column.length, cell.value.length])).to.deep.equal([[0, 0]]);
      expect(await scanAll(store, ref, { range: { start: Buffer.from('empty') }, reverse: false, limit: scanLimit, versions: 1 })).to.deep.equal([
        { key: 'empty', cells: [`f:@${at(1)}=`] },
        { key: 'r', cells: [`f:@${at(2)}=\\x00`, `f:x@${at(1)}=`] },
      ]);
    });
  });
}
