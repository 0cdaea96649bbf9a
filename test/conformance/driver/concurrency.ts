import { expect } from 'chai';
import type { Mutation } from '../../../src/store/store.ts';
import { isStoreError } from '../../../src/store/errors.ts';
import type { DriverHarnessFactory } from '../../support/driver-harness.ts';
import { type RowView, call, deleteRow, expectStoreError, scanAll, set, showRows, useFixture, writeRows } from './fixtures.ts';

/** Calls racing each other: each row mutation is seen whole or not at all. */
export function concurrencyCases(factory: DriverHarnessFactory): void {
  describe('concurrent calls', () => {
    const fixture = useFixture(factory);

    it('never lets a reader see part of a mutateRow', async function () {
      this.timeout(120_000);
      const { table, keepAll, store, at, scanLimit } = fixture();
      const ref = await table([keepAll('a'), keepAll('b')]);
      const key = Buffer.from('contended');
      const write = (i: number): Mutation[] => [deleteRow, set('a', 'x', `v${i}`, at(1)), set('a', 'y', `v${i}`, at(1)), set('b', 'z', `v${i}`, at(1))];
      const whole = (row: RowView | null, where: string) => {
        const value = /=(v\d+)$/.exec(row?.cells[0] ?? '')?.[1];
        expect(row, where).to.deep.equal({ key: 'contended', cells: [`a:x@${at(1)}=${value}`, `a:y@${at(1)}=${value}`, `b:z@${at(1)}=${value}`] });
      };
      await store.mutateRow(ref, key, write(0), call());

      let writing = true;
      let reads = 0;
      const reader = async () => {
        while (writing) {
          const [row] = showRows(await store.readRows(ref, [key], { versions: 1 }, call()));
          whole(row ?? null, 'readRows');
          const scanned = await scanAll(store, ref, { range: {}, reverse: false, limit: scanLimit, versions: 1 });
          expect(scanned).to.have.length(1);
          whole(scanned[0] ?? null, 'scanRows');
          reads += 1;
        }
      };
      const writer = async () => {
        try {
          for (let i = 1; i <= 150; i += 1) await store.mutateRow(ref, key, write(i), call());
        } finally {
          writing = false;
        }
      };
      await Promise.all([writer(), reader(), reader(), reader()]);
      expect(reads, 'reads made while writing').to.be.greaterThan(0);
    });

    it('applies racing mutateRow calls to one row each whole: the row ends as exactly one of them', async function () {
      this.timeout(120_000);
      const { table, keepAll, store, at } = fixture();
      const ref = await table([keepAll('a'), keepAll('b')]);
      const key = Buffer.from('raced');
      const writers = Array.from({ length: 30 }, (_, i) => i);
      const mutations = (i: number): Mutation[] => [deleteRow, ...[0, 1, 2, 3].map((c) => set(c % 2 === 0 ? 'a' : 'b', `w${i}-c${c}`, `w${i}`, at(1)))];
      await Promise.all(writers.map((i) => store.mutateRow(ref, key, mutations(i), call())));

      const [row] = showRows(await store.readRows(ref, [key], { versions: 1 }, call()));
      const winner = /^a:w(\d+)-/.exec(row?.cells[0] ?? '')?.[1];
      expect(row).to.deep.equal({
        key: 'raced',
        cells: [`a:w${winner}-c0@${at(1)}=w${winner}`, `a:w${winner}-c2@${at(1)}=w${winner}`, `b:w${winner}-c1@${at(1)}=w${winner}`, `b:w${winner}-c3@${at(1)}=w${winner}`],
      });
    });

    it('applies racing mutateRows batches that share rows entry by entry, each entry whole', async function () {
      this.timeout(120_000);
      const { table, keepAll, store, at } = fixture();
      const ref = await table([keepAll('a')]);
      const keys = ['k1', 'k2', 'k3'].map((text) => Buffer.from(text));
      const batches = Array.from({ length: 10 }, (_, i) =>
        keys.map((key) => ({ key, mutations: [deleteRow, set('a', 'x', `b${i}`, at(1)), set('a', 'y', `b${i}`, at(1))] })),
      );
      const results = await Promise.all(batches.map((entries) => store.mutateRows(ref, entries, call())));
      expect(results.flat().every((result) => result === undefined)).to.equal(true);
      for (const row of showRows(await store.readRows(ref, keys, { versions: 1 }, call()))) {
        const value = /=(b\d+)$/.exec(row?.cells[0] ?? '')?.[1];
        expect(row?.cells).to.deep.equal([`a:x@${at(1)}=${value}`, `a:y@${at(1)}=${value}`]);
      }
    });

    it('scans while rows are rewritten, added and deleted: each row once, in order, whole, and every row that stayed', async function () {
      this.timeout(120_000);
      const { table, keepAll, store, at } = fixture();
      const ref = await table([keepAll('a'), keepAll('b')]);
      const count = Math.min(300, Math.floor(store.limits.rowsPerPage / 2));
      const name = (i: number) => `k${String(i).padStart(4, '0')}`;
      const row = (value: string): Mutation[] => [deleteRow, set('a', 'x', value, at(1)), set('a', 'y', value, at(1)), set('b', 'z', value, at(1))];
      const initial = Array.from({ length: count }, (_, i) => name(i));
      await writeRows(store, ref, initial.map((key) => ({ key: Buffer.from(key), mutations: row('v0') })));
      // Every fifth row may be deleted during the scan; the others are only ever replaced whole.
      const deletable = new Set(initial.filter((_, i) => i % 5 === 0));

      let round = 0;
      const write = async () => {
        round += 1;
        const current = round;
        const i = (current * 37) % count;
        const key = name(i);
        if (deletable.has(key) && current % 2 === 0) await store.mutateRow(ref, Buffer.from(key), [deleteRow], call());
        else await store.mutateRow(ref, Buffer.from(key), row(`v${current}`), call());
        // New rows between existing ones, at most half as many as there were.
        if (current <= count / 2) await store.mutateRow(ref, Buffer.from(`${key}+${current}`), row(`n${current}`), call());
      };
      let scanning = true;
      const writer = async () => {
        while (scanning) await write();
      };
      const scan = async () => {
        const seen: RowView[] = [];
        try {
          for await (const each of store.scanRows(ref, { range: {}, reverse: false, limit: fixture().scanLimit, versions: 1 }, call())) {
            seen.push(showRows([each])[0] as RowView);
            // Some writes surely land between two rows, however the store and the machine schedule.
            if (seen.length % 3 === 0) await write();
          }
        } finally {
          scanning = false;
        }
        return seen;
      };
      const [seen] = await Promise.all([scan(), writer()]);

      const keys = seen.map((view) => view.key);
      expect(keys, 'keys in strictly ascending order').to.deep.equal([...new Set(keys)].sort((x, y) => Buffer.compare(Buffer.from(x), Buffer.from(y))));
      for (const view of seen) {
        const value = /=([vn]\d+)$/.exec(view.cells[0] ?? '')?.[1];
        expect(view.cells, view.key).to.deep.equal([`a:x@${at(1)}=${value}`, `a:y@${at(1)}=${value}`, `b:z@${at(1)}=${value}`]);
      }
      expect(initial.filter((key) => !deletable.has(key) && !keys.includes(key)), 'rows that existed throughout').to.deep.equal([]);
    });

    it('creates a table once when many callers race to create it; the others get ALREADY_EXISTS', async () => {
      const { store, instance, keepAll } = fixture();
      const ref = { instance, table: 'raced-create' };
      const outcomes = await Promise.allSettled(Array.from({ length: 8 }, (_, i) => store.createTable(ref, [keepAll(`f${i}`)], call())));
      const created = outcomes.flatMap((outcome, i) => (outcome.status === 'fulfilled' ? [i] : []));
      expect(created).to.have.length(1);
      for (const outcome of outcomes) {
        if (outcome.status === 'rejected') expectStoreError(outcome.reason, { code: 'ALREADY_EXISTS', resource: 'table', name: 'raced-create' });
      }
      const families = (await store.describeTable(ref, call())).families.map((family) => family.name);
      expect(families).to.deep.equal([`f${created[0]}`]);
    });

    it('answers reads and scans racing the deletion of their table with all of it or NOT_FOUND, never part of it', async function () {
      this.timeout(120_000);
      const { table, keepAll, store, at, scanLimit } = fixture();
      const ref = await table([keepAll('f')]);
      const count = Math.min(200, store.limits.entriesPerBatch, scanLimit);
      const keys = Array.from({ length: count }, (_, i) => Buffer.from(`k${String(i).padStart(3, '0')}`));
      await writeRows(store, ref, keys.map((key) => ({ key, mutations: [set('f', 'c', 'v', at(1))] })));
      const outcomes: string[] = [];
      const scanner = async () => {
        for (;;) {
          try {
            const rows = await scanAll(store, ref, { range: {}, reverse: false, limit: scanLimit, versions: 1 });
            outcomes.push(`scan ${rows.length}`);
            const read = await store.readRows(ref, keys, { versions: 1 }, call());
            outcomes.push(`read ${read.filter((row) => row !== null).length}`);
          } catch (error) {
            if (!isStoreError(error)) throw error;
            expectStoreError(error, { code: 'NOT_FOUND', resource: 'table', name: ref.table });
            return;
          }
        }
      };
      const scanning = [scanner(), scanner()];
      await new Promise((resolve) => setTimeout(resolve, 20));
      await store.deleteTable(ref, call());
      await Promise.all(scanning);
      // A call that saw the table at all saw all of it; one that did not failed with NOT_FOUND.
      expect(outcomes.filter((outcome) => !outcome.endsWith(` ${count}`)), outcomes.join(', ')).to.deep.equal([]);
    });
  });
}
