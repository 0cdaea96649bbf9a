import { randomBytes } from 'node:crypto';
import { status } from '@grpc/grpc-js';
import { expect } from 'chai';
import { BigtableStore } from '../../../src/store/bigtable/bigtable-store.ts';
import type { StoreError } from '../../../src/store/errors.ts';
import type { Mutation, Row, TableRef } from '../../../src/store/store.ts';
import { BigtableFront } from '../../support/bigtable-front.ts';
import { cbt } from '../../support/cbt.ts';
import { emulatorHost } from '../../support/emulator.ts';
import { TEST_PROJECT } from '../../support/test-app.ts';

/**
 * Faults the emulator never produces by itself, caused by a gRPC front (bigtable-front.ts) that
 * passes everything else to the real emulator: MutateRows entries failing on their own, a ReadRows
 * stream breaking half-way. The front also sees, as Bigtable would, whether the store cancelled a
 * call.
 */
describe('Bigtable store (v2 contract): per-entry failures, broken streams and cancelled scans', () => {
  let host: string;
  let front: BigtableFront;
  let store: BigtableStore;
  let ref: TableRef;
  const instance = `v2f-${randomBytes(4).toString('hex')}`;
  const call = (ms = 10_000) => ({ deadline: Date.now() + ms });
  const set = (value: string): Mutation => ({ type: 'set', family: 'f', column: Buffer.from('c'), value: Buffer.from(value), timestampMicros: 1_000n });
  const keys = (...names: string[]) => names.map((name) => Buffer.from(name));

  before(async function () {
    host = emulatorHost(this);
    front = await BigtableFront.start(host);
    store = new BigtableStore({ projectId: TEST_PROJECT, instanceIds: [instance], emulatorHost: front.host });
    ref = { instance, table: 'faults' };
    await store.createTable(ref, [{ name: 'f' }], call());
  });
  after(async () => {
    await store?.close();
    await front?.close();
  });
  beforeEach(() => {
    front.failEntry = () => undefined;
    front.mutateRowsCalls.length = 0;
  });

  describe('mutateRows', () => {
    it('sends again only the entries that failed transiently, and applies every entry', async () => {
      const transient: Record<string, status> = { b: status.UNAVAILABLE, d: status.ABORTED, e: status.DEADLINE_EXCEEDED };
      front.failEntry = (number, key) => {
        const code = transient[key.toString().slice(-1)];
        return number === 0 && code !== undefined ? { code, message: 'injected' } : undefined;
      };
      const names = ['retry-a', 'retry-b', 'retry-c', 'retry-d', 'retry-e'];
      const results = await store.mutateRows(ref, names.map((name) => ({ key: Buffer.from(name), mutations: [set(name)] })), call());
      expect(results).to.deep.equal([undefined, undefined, undefined, undefined, undefined]);
      expect(front.mutateRowsCalls).to.deep.equal([keys(...names), keys('retry-b', 'retry-d', 'retry-e')]);
      const output = await cbt(host, instance, 'read', ref.table, 'prefix=retry-');
      for (const name of names) expect(output).to.contain(`"${name}"`);
    });

    it('reports an entry that keeps failing transiently by its index once the deadline leaves no time, and applies the rest', async () => {
      front.failEntry = (_, key) => (key.toString() === 'stuck-b' ? { code: status.UNAVAILABLE, message: 'injected' } : undefined);
      const started = Date.now();
      const results = await store.mutateRows(ref, ['stuck-a', 'stuck-b', 'stuck-c'].map((name) => ({ key: Buffer.from(name), mutations: [set(name)] })), call(1000));
      expect(Date.now() - started).to.be.below(1000 + 300);
      expect(results.map((result) => result?.code)).to.deep.equal([undefined, 'UNAVAILABLE', undefined]);
      expect(front.mutateRowsCalls.length, 'calls made within the deadline').to.be.above(2);
      expect(front.mutateRowsCalls.slice(1).every((sent) => sent.length === 1 && sent[0]?.toString() === 'stuck-b')).to.equal(true);
      const output = await cbt(host, instance, 'read', ref.table, 'prefix=stuck-');
      expect(output).to.contain('stuck-a').and.contain('stuck-c').and.not.contain('stuck-b');
    });

    it('does not send again an entry that failed for good', async () => {
      front.failEntry = (_, key) => (key.toString() === 'final-b' ? { code: status.FAILED_PRECONDITION, message: 'injected' } : undefined);
      const results = await store.mutateRows(ref, ['final-a', 'final-b'].map((name) => ({ key: Buffer.from(name), mutations: [set(name)] })), call());
      expect(results.map((result) => result?.code)).to.deep.equal([undefined, 'INTERNAL']);
      expect(front.mutateRowsCalls).to.have.length(1);
    });
  });

  describe('admin calls', () => {
    it('spends no admin call on calls naming a missing table, and one per table while its schema is cached', async () => {
      const fresh = new BigtableStore({ projectId: TEST_PROJECT, instanceIds: [instance], emulatorHost: front.host });
      try {
        front.calls.clear();
        const missing = { instance, table: 'never-created' };
        const outcomes = await Promise.all([
          fresh.readRows(missing, [Buffer.from('k')], { versions: 1 }, call()).catch((error: unknown) => error),
          fresh.mutateRow(missing, Buffer.from('k'), [set('v')], call()).catch((error: unknown) => error),
          fresh.mutateRows(missing, [{ key: Buffer.from('k'), mutations: [set('v')] }], call()).catch((error: unknown) => error),
          (async () => {
            for await (const row of fresh.scanRows(missing, { range: {}, limit: 1, reverse: false, versions: 1 }, call())) return row;
          })().catch((error: unknown) => error),
        ]);
        expect(outcomes.map((outcome) => [(outcome as StoreError).code, (outcome as StoreError).resource])).to.deep.equal(Array(4).fill(['NOT_FOUND', 'table']));
        expect(front.calls.get('GetTable') ?? 0).to.equal(0);

        for (let read = 0; read < 5; read++) await fresh.readRows(ref, [Buffer.from('k')], { versions: 1 }, call());
        await fresh.mutateRow(ref, Buffer.from('admin-k'), [set('v')], call());
        expect(front.calls.get('GetTable')).to.equal(1);
      } finally {
        await fresh.close();
      }
    });
  });

  describe('scans', () => {
    const total = 60;
    before(async () => {
      // Rows of 8 KiB, so that a scan of them outlasts the first few responses.
      const value = 'v'.repeat(8192);
      const entries = Array.from({ length: total }, (_, index) => ({ key: Buffer.from(`row-${String(index).padStart(3, '0')}`), mutations: [set(value)] }));
      const results = await store.mutateRows(ref, entries, call());
      expect(results.every((result) => result === undefined)).to.equal(true);
    });
    const range = { start: Buffer.from('row-'), end: Buffer.from('row.') };

    it('resumes after the stream breaks, yielding each row once, in order, up to the limit', async () => {
      for (const limit of [total + 10, 45]) {
        const callsBefore = front.readRowsCalls;
        front.breakReadAfterRows = 20;
        const rows: Row[] = [];
        for await (const row of store.scanRows(ref, { range, limit, reverse: false, versions: 1 }, call())) rows.push(row);
        const expected = Array.from({ length: Math.min(limit, total) }, (_, index) => `row-${String(index).padStart(3, '0')}`);
        expect(rows.map((row) => row.key.toString())).to.deep.equal(expected);
        expect(front.readRowsCalls - callsBefore, 'ReadRows calls').to.equal(2);
      }
    });

    it('cancels the ReadRows call when the consumer stops early', async () => {
      const cancelledBefore = front.readRowsCancelled;
      let seen = 0;
      for await (const row of store.scanRows(ref, { range, limit: total, reverse: false, versions: 1 }, call())) {
        expect(row.key.toString()).to.equal('row-000');
        seen += 1;
        break;
      }
      expect(seen).to.equal(1);
      await until(() => front.readRowsCancelled > cancelledBefore);
    });

    it('cancels the ReadRows call and fails as callerGone when the caller goes away', async () => {
      const cancelledBefore = front.readRowsCancelled;
      const caller = new AbortController();
      const rows = store.scanRows(ref, { range, limit: total, reverse: false, versions: 1 }, { ...call(), signal: caller.signal })[Symbol.asyncIterator]();
      expect((await rows.next()).done).to.equal(false);
      caller.abort();
      const error = await (async () => {
        for (;;) if ((await rows.next()).done === true) return undefined;
      })().catch((caught: unknown) => caught as StoreError);
      expect(error?.code).to.equal('DEADLINE_EXCEEDED');
      expect(error?.message).to.match(/caller disconnected/);
      await until(() => front.readRowsCancelled > cancelledBefore);
    });
  });
});

async function until(condition: () => boolean, ms = 2000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`not within ${ms} ms`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
