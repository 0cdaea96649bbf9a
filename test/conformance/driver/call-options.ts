import { setTimeout as sleep } from 'node:timers/promises';
import { expect } from 'chai';
import type { Mutation, Row, ScanRequest, TableRef } from '../../../src/store/store.ts';
import type { DriverHarnessFactory } from '../../support/driver-harness.ts';
import { call, deleteRow, expectStoreError, set, show, showRows, useFixture, writeRows } from './fixtures.ts';

/**
 * Deadlines and departed callers (CallOptions): a call stopped for either fails with
 * DEADLINE_EXCEEDED, never with anything else, stays atomic, and leaves the store working.
 */
export function callOptionsCases(factory: DriverHarnessFactory): void {
  describe('deadlines and departed callers', () => {
    const fixture = useFixture(factory);
    let ref: TableRef;
    let keys: string[];

    before(async function () {
      this.timeout(60_000);
      const { table, keepAll, store, at } = fixture();
      ref = await table([keepAll('a'), keepAll('b')]);
      keys = Array.from({ length: Math.min(300, store.limits.rowsPerPage) }, (_, i) => `k${String(i).padStart(4, '0')}`);
      await writeRows(
        store,
        ref,
        keys.map((key) => ({ key: Buffer.from(key), mutations: [set('a', 'c', 'v'.repeat(2000), at(1))] })),
      );
    });

    /** Reads the scan to its end or its first error; the rows so far must be the first ones of the table. */
    const drain = async (iterator: AsyncIterator<Row>, seen: string[]): Promise<unknown> => {
      try {
        for (;;) {
          const next = await iterator.next();
          if (next.done === true) return undefined;
          seen.push(show(next.value.key));
        }
      } catch (error) {
        return error;
      } finally {
        expect(seen, 'rows yielded').to.deep.equal(keys.slice(0, seen.length));
      }
    };

    it('stops a scan whose caller has gone with DEADLINE_EXCEEDED, or finishes it, and keeps working', async () => {
      const { store } = fixture();
      const request: ScanRequest = { range: {}, reverse: false, limit: store.limits.rowsPerPage, versions: 1 };
      const controller = new AbortController();
      const iterator = store.scanRows(ref, request, { ...call(), signal: controller.signal })[Symbol.asyncIterator]();
      const seen: string[] = [];
      const first = await iterator.next();
      expect(first.done).to.equal(false);
      if (first.done !== true) seen.push(show(first.value.key));
      controller.abort();
      const error = await drain(iterator, seen);
      if (error !== undefined) expectStoreError(error, { code: 'DEADLINE_EXCEEDED' });
      else expect(seen.length).to.equal(keys.length);
      expect((await store.readRows(ref, [Buffer.from('k0000')], { versions: 1 }, call()))[0]).not.to.equal(null);
    });

    it('gives up a scan read past its deadline with DEADLINE_EXCEEDED, or finishes it, and keeps working', async function () {
      this.timeout(30_000);
      const { store } = fixture();
      const request: ScanRequest = { range: {}, reverse: false, limit: store.limits.rowsPerPage, versions: 1 };
      const deadline = Date.now() + 1000;
      const iterator = store.scanRows(ref, request, { deadline })[Symbol.asyncIterator]();
      const seen: string[] = [];
      // On a loaded machine even the first row may come after the deadline.
      let error: unknown = await iterator.next().then(
        (first) => void (first.done === true || seen.push(show(first.value.key))),
        (failure: unknown) => failure ?? new Error('rejected without a reason'),
      );
      if (error === undefined) {
        await sleep(Math.max(0, deadline - Date.now()) + 200);
        error = await drain(iterator, seen);
      }
      if (error !== undefined) expectStoreError(error, { code: 'DEADLINE_EXCEEDED' });
      else expect(seen.length).to.equal(keys.length);
      await store.checkHealth(call());
    });

    it('keeps a mutateRow whose caller goes during the call atomic: it fails only with DEADLINE_EXCEEDED, and the row holds all of it or none', async function () {
      this.timeout(60_000);
      const { store, at } = fixture();
      const mutations = (i: number): Mutation[] => [deleteRow, ...['x', 'y', 'z'].map((column) => set(column === 'y' ? 'b' : 'a', column, `v${i}`, at(1)))];
      const key = Buffer.from('abandoned');
      await store.mutateRow(ref, key, mutations(0), call());
      let last = 0;
      for (let i = 1; i <= 30; i += 1) {
        const controller = new AbortController();
        const pending = store.mutateRow(ref, key, mutations(i), { ...call(), signal: controller.signal });
        // Abort at different moments: before the store's first await, or a little later.
        if (i % 3 === 0) controller.abort();
        else setTimeout(() => controller.abort(), i % 3);
        try {
          await pending;
          last = i;
        } catch (error) {
          expectStoreError(error, { code: 'DEADLINE_EXCEEDED' });
        }
        const [row] = showRows(await store.readRows(ref, [key], { versions: 1 }, call()));
        const value = /=(v\d+)$/.exec(row?.cells[0] ?? '')?.[1];
        expect(row, `after call ${i}`).to.deep.equal({ key: 'abandoned', cells: [`a:x@${at(1)}=${value}`, `a:z@${at(1)}=${value}`, `b:y@${at(1)}=${value}`] });
        // A call that failed may still have been applied (the caller cannot know); one that succeeded was.
        expect(Number(value?.slice(1)), `after call ${i}`).to.be.at.least(last);
      }
    });
  });
}
