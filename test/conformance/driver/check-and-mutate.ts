import { expect } from 'chai';
import type { Condition, ConditionalMutations, Mutation, TableRef } from '../../../src/store/store.ts';
import type { DriverHarnessFactory } from '../../support/driver-harness.ts';
import { bytes, call, deleteRow, expectRejection, requireCapability, set, showRows, useFixture } from './fixtures.ts';

const HOUR = 3600;

export function rowExists(exists: boolean): Condition {
  return { type: 'rowExists', exists };
}

export function familyExists(family: string, exists: boolean): Condition {
  return { type: 'familyExists', family, exists };
}

export function columnExists(family: string, column: string | Buffer, exists: boolean): Condition {
  return { type: 'columnExists', family, column: bytes(column), exists };
}

export function columnEquals(family: string, column: string | Buffer, value: string | Buffer): Condition {
  return { type: 'columnEquals', family, column: bytes(column), value: bytes(value) };
}

/** checkAndMutateRow: each condition on live versions, both branches, atomicity under races. */
export function checkAndMutateCases(factory: DriverHarnessFactory): void {
  describe('checkAndMutateRow', () => {
    const fixture = useFixture(factory);
    const key = Buffer.from('row');
    let ref: TableRef;

    beforeEach(async function () {
      requireCapability(this, fixture(), 'checkAndMutate');
      const { table, keepAll } = fixture();
      ref = await table([keepAll('a'), keepAll('b')]);
    });

    const check = (conditions: Condition[], mutations: Mutation[], otherwise: Mutation[] = [], row = key) =>
      fixture().store.checkAndMutateRow(ref, row, { conditions, mutations, otherwise }, call());
    const read = async (row = key) => showRows(await fixture().store.readRows(ref, [row], { versions: 1 }, call()))[0] ?? null;

    it('applies the mutations when the conditions hold and resolves to true; otherwise applies `otherwise` and resolves to false', async () => {
      const { at } = fixture();
      expect(await check([rowExists(false)], [set('a', 'x', 'created', at(1))], [set('a', 'x', 'exists', at(2))])).to.equal(true);
      expect(await read()).to.deep.equal({ key: 'row', cells: [`a:x@${at(1)}=created`] });
      expect(await check([rowExists(false)], [set('a', 'x', 'created', at(3))], [set('b', 'y', 'was-there', at(2))])).to.equal(false);
      expect(await read()).to.deep.equal({ key: 'row', cells: [`a:x@${at(1)}=created`, `b:y@${at(2)}=was-there`] });
    });

    it('applies nothing when the branch taken is empty', async () => {
      const { at } = fixture();
      expect(await check([rowExists(true)], [set('a', 'x', 'v', at(1))])).to.equal(false);
      expect(await read()).to.equal(null);
      expect(await check([rowExists(false)], [], [set('a', 'x', 'v', at(1))])).to.equal(true);
      expect(await read()).to.equal(null);
    });

    it('decides each kind of condition on the row as it is', async () => {
      const { at, store } = fixture();
      const cases: Array<[string, Condition, boolean]> = [
        ['rowExists true', rowExists(true), true],
        ['rowExists false', rowExists(false), false],
        ['family a exists', familyExists('a', true), true],
        ['family a absent', familyExists('a', false), false],
        ['family b exists', familyExists('b', true), false],
        ['family b absent', familyExists('b', false), true],
        ['column a:x exists', columnExists('a', 'x', true), true],
        ['column a:y exists', columnExists('a', 'y', true), false],
        ['column a:y absent', columnExists('a', 'y', false), true],
        ['column b:x exists (another family)', columnExists('b', 'x', true), false],
        ['a:x equals the latest value', columnEquals('a', 'x', 'newest'), true],
        ['a:x equals an older value', columnEquals('a', 'x', Buffer.from([0, 255, 1])), false],
        ['a:x equals a prefix of the latest', columnEquals('a', 'x', 'new'), false],
        ['a:x equals a longer value', columnEquals('a', 'x', 'newest!'), false],
        ['a:y equals the empty value', columnEquals('a', 'y', ''), false],
      ];
      // One row per case, alike, so that no case sees what another wrote.
      const rows = cases.map((_, i) => Buffer.from(`case${i}`));
      const older = store.capabilities.multipleVersions ? [set('a', 'x', Buffer.from([0, 255, 1]), at(1))] : [];
      for (const row of rows) await store.mutateRow(ref, row, [...older, set('a', 'x', 'newest', at(2))], call());
      const answers = [];
      for (const [i, [name, condition]] of cases.entries()) {
        answers.push([name, await check([condition], [set('b', 'probe', 'held', at(9))], [set('b', 'probe', 'failed', at(9))], rows[i])]);
      }
      expect(answers).to.deep.equal(cases.map(([name, , expected]) => [name, expected]));
      const probes = showRows(await store.readRows(ref, rows, { versions: 1, columns: [{ family: 'b' }] }, call())).map((row) => row?.cells);
      expect(probes).to.deep.equal(cases.map(([, , expected]) => [`b:probe@${at(9)}=${expected ? 'held' : 'failed'}`]));
    });

    it('matches an empty value with equals only when the latest version is empty', async () => {
      const { at, store } = fixture();
      await store.mutateRow(ref, key, [set('a', 'x', '', at(1))], call());
      expect(await check([columnEquals('a', 'x', '')], [set('b', 'y', 'matched', at(1))])).to.equal(true);
      expect(await check([columnEquals('a', 'x', 'v')], [set('b', 'y', 'matched again', at(2))])).to.equal(false);
      expect((await read())?.cells).to.deep.equal([`a:x@${at(1)}=`, `b:y@${at(1)}=matched`]);
    });

    it('requires every condition to hold', async () => {
      const { at, store } = fixture();
      await store.mutateRow(ref, key, [set('a', 'x', '1', at(1))], call());
      expect(await check([rowExists(true), columnEquals('a', 'x', '1'), columnExists('b', 'y', false)], [set('a', 'x', '2', at(2))])).to.equal(true);
      expect(await check([rowExists(true), columnEquals('a', 'x', '1')], [set('a', 'x', '3', at(3))], [set('b', 'y', 'no', at(3))])).to.equal(false);
      expect((await read())?.cells).to.deep.equal([`a:x@${at(2)}=2`, `b:y@${at(3)}=no`]);
    });

    it('checks one row only: cells of other rows, and a row whose cells were deleted, do not count', async () => {
      const { at, store } = fixture();
      await store.mutateRow(ref, Buffer.from('other'), [set('a', 'x', 'v', at(1))], call());
      await store.mutateRow(ref, Buffer.from('rowx'), [set('a', 'x', 'v', at(1))], call());
      expect(await check([rowExists(false)], [set('a', 'x', 'v', at(1))])).to.equal(true);
      await store.mutateRow(ref, key, [deleteRow], call());
      expect(await check([columnExists('a', 'x', false), rowExists(false)], [set('b', 'y', 'again', at(1))])).to.equal(true);
    });

    it('does not count a version the family has expired by age, even before the store removes it', async function () {
      requireCapability(this, fixture(), 'maxAge');
      const { table, store, ago } = fixture();
      ref = await table([{ name: 'hour', maxVersions: 1, maxAgeSeconds: HOUR }, { name: 'b', maxVersions: 1 }]);
      await store.mutateRow(ref, key, [set('hour', 'x', 'stale', ago(2 * HOUR))], call());
      expect(await check([rowExists(true)], [set('b', 'y', 'wrong', ago(0))])).to.equal(false);
      expect(await check([columnEquals('hour', 'x', 'stale')], [set('b', 'y', 'wrong', ago(0))])).to.equal(false);
      expect(await check([familyExists('hour', false), columnExists('hour', 'x', false)], [set('b', 'y', 'right', ago(0))])).to.equal(true);
      expect((await read())?.cells.map((cell) => cell.replace(/@\d+/, ''))).to.deep.equal(['b:y=right']);
    });

    it('fails with NOT_FOUND columnFamily for an unknown family in a condition or in either branch, writing nothing', async () => {
      const { at } = fixture();
      const attempts: Array<[ConditionalMutations, string]> = [
        [{ conditions: [columnExists('nope', 'x', false)], mutations: [set('a', 'x', 'v', at(1))], otherwise: [] }, 'nope'],
        [{ conditions: [rowExists(false)], mutations: [set('a', 'x', 'v', at(1))], otherwise: [set('gone', 'x', 'v', at(1))] }, 'gone'],
        [{ conditions: [rowExists(true)], mutations: [set('a', 'x', 'v', at(1)), set('missing', 'x', 'v', at(1))], otherwise: [set('b', 'x', 'v', at(1))] }, 'missing'],
        [{ conditions: [familyExists('first', true), columnEquals('second', 'x', 'v')], mutations: [set('third', 'x', 'v', at(1))], otherwise: [] }, 'first'],
      ];
      for (const [attempt, name] of attempts) {
        await expectRejection(fixture().store.checkAndMutateRow(ref, key, attempt, call()), { code: 'NOT_FOUND', resource: 'columnFamily', name });
      }
      expect(await read()).to.equal(null);
    });

    it('fails with NOT_FOUND table for a missing table', async () => {
      const { at, instance, store } = fixture();
      const missing = { instance, table: 'no-such-table' };
      await expectRejection(store.checkAndMutateRow(missing, key, { conditions: [rowExists(false)], mutations: [set('a', 'x', 'v', at(1))], otherwise: [] }, call()), {
        code: 'NOT_FOUND',
        resource: 'table',
        name: 'no-such-table',
      });
    });

    it('applies a branch atomically and in order, as mutateRow does', async () => {
      const { at, store } = fixture();
      await store.mutateRow(ref, key, [set('a', 'x', 'old', at(1)), set('b', 'y', 'old', at(1))], call());
      expect(await check([rowExists(true)], [deleteRow, set('a', 'x', 'new', at(2))])).to.equal(true);
      expect(await read()).to.deep.equal({ key: 'row', cells: [`a:x@${at(2)}=new`] });
    });

    it('lets exactly one of many racing create-if-absent calls match', async function () {
      this.timeout(120_000);
      const { at } = fixture();
      const callers = Array.from({ length: 20 }, (_, i) => i);
      const matched = await Promise.all(callers.map((i) => check([rowExists(false)], [set('a', 'owner', `c${i}`, at(1))], [], Buffer.from('lock'))));
      const winners = callers.filter((i) => matched[i]);
      expect(winners).to.have.length(1);
      expect(await read(Buffer.from('lock'))).to.deep.equal({ key: 'lock', cells: [`a:owner@${at(1)}=c${winners[0]}`] });
    });

    it('loses no update of writers racing in compare-and-set loops', async function () {
      this.timeout(180_000);
      const { at, store } = fixture();
      const row = Buffer.from('cas');
      await store.mutateRow(ref, row, [set('a', 'n', '0', at(1))], call());
      const writers = 6;
      const rounds = 5;
      const writer = async () => {
        for (let done = 0; done < rounds; ) {
          const current = (await read(row))?.cells[0]?.replace(/^.*=/, '') ?? '';
          const next = String(Number(current) + 1);
          if (await check([columnEquals('a', 'n', current)], [set('a', 'n', next, at(1))], [], row)) done += 1;
        }
      };
      await Promise.all(Array.from({ length: writers }, writer));
      expect(await read(row)).to.deep.equal({ key: 'cas', cells: [`a:n@${at(1)}=${writers * rounds}`] });
    });
  });
}
