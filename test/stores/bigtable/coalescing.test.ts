import { randomBytes } from 'node:crypto';
import { status } from '@grpc/grpc-js';
import { expect } from 'chai';
import { BigtableStore } from '../../../src/store/bigtable/bigtable-store.ts';
import type { StoreError } from '../../../src/store/errors.ts';
import type { CallOptions, Mutation, TableRef } from '../../../src/store/store.ts';
import { BigtableFront } from '../../support/bigtable-front.ts';
import { cbt } from '../../support/cbt.ts';
import { emulatorHost } from '../../support/emulator.ts';
import { TEST_PROJECT } from '../../support/test-app.ts';

/**
 * Single-row writes made in one turn of the event loop go out, per table, as one MutateRows; each
 * caller is answered as its own MutateRow would have answered it. A gRPC front before the emulator
 * (bigtable-front.ts) records the calls and fails chosen entries.
 */
describe('Bigtable store: coalesced single-row calls', () => {
  let host: string;
  let front: BigtableFront;
  let store: BigtableStore;
  const batches: number[] = [];
  const instance = `coal-${randomBytes(4).toString('hex')}`;
  const ref: TableRef = { instance, table: 'coalesced' };
  const call = (ms = 10_000) => ({ deadline: Date.now() + ms });
  const set = (value: string, family = 'f'): Mutation => ({ type: 'set', family, column: Buffer.from('c'), value: Buffer.from(value), timestampMicros: 1_000n });
  const keys = (...names: string[]) => names.map((name) => Buffer.from(name));
  const write = (name: string, options: CallOptions = call(), family = 'f') => store.mutateRow(ref, Buffer.from(name), [set(name, family)], options);
  const outcome = (promise: Promise<void>) =>
    promise.then(
      () => 'OK',
      (error: StoreError) => error.code,
    );

  before(async function () {
    host = emulatorHost(this);
    front = await BigtableFront.start(host);
    store = new BigtableStore({ projectId: TEST_PROJECT, instanceIds: [instance], emulatorHost: front.host, onBatch: (_, size) => batches.push(size) });
    await store.createTable(ref, [{ name: 'f' }, { name: 'g' }], call());
  });
  after(async () => {
    await store?.close();
    await front?.close();
  });
  beforeEach(() => {
    front.failEntry = () => undefined;
    front.mutateRowsCalls.length = 0;
    front.calls.clear();
    batches.length = 0;
  });

  it('sends the writes of one turn as one MutateRows, and each is applied', async () => {
    const names = ['turn-a', 'turn-b', 'turn-c', 'turn-d'];
    const results = await Promise.all(names.map((name) => outcome(write(name))));
    expect(results).to.deep.equal(['OK', 'OK', 'OK', 'OK']);
    expect(front.mutateRowsCalls).to.deep.equal([keys(...names)]);
    expect(front.calls.get('MutateRow') ?? 0).to.equal(0);
    expect(batches).to.deep.equal([4]);
    const output = await cbt(host, instance, 'read', ref.table, 'prefix=turn-');
    for (const name of names) expect(output).to.contain(`"${name}"`);
  });

  it('sends a lone write as a MutateRow, at once', async () => {
    await write('alone');
    expect(front.calls.get('MutateRow')).to.equal(1);
    expect(front.mutateRowsCalls).to.have.length(0);
    expect(batches).to.deep.equal([1]);
  });

  it('puts two writes to one row in different calls', async () => {
    const results = await Promise.all([outcome(write('same')), outcome(write('same')), outcome(write('other'))]);
    expect(results).to.deep.equal(['OK', 'OK', 'OK']);
    expect(batches).to.deep.equal([1, 2]);
  });

  it('sends again only the entry that failed transiently', async () => {
    front.failEntry = (number, key) => (number === 0 && key.toString() === 'retry-b' ? { code: status.UNAVAILABLE, message: 'injected' } : undefined);
    const results = await Promise.all(['retry-a', 'retry-b', 'retry-c'].map((name) => outcome(write(name))));
    expect(results).to.deep.equal(['OK', 'OK', 'OK']);
    expect(front.mutateRowsCalls).to.deep.equal([keys('retry-a', 'retry-b', 'retry-c'), keys('retry-b')]);
  });

  it("gives an entry's lasting error to its caller alone", async () => {
    front.failEntry = (_, key) => (key.toString() === 'final-b' ? { code: status.FAILED_PRECONDITION, message: 'injected' } : undefined);
    const results = await Promise.all(['final-a', 'final-b', 'final-c'].map((name) => outcome(write(name))));
    expect(results).to.deep.equal(['OK', 'INTERNAL', 'OK']);
    expect(front.mutateRowsCalls).to.have.length(1);
  });

  it('reports a family deleted behind the cache to the caller that named it, alone', async () => {
    const table: TableRef = { instance, table: 'families' };
    await store.createTable(table, [{ name: 'f' }, { name: 'g' }], call());
    await cbt(host, instance, 'deletefamily', table.table, 'g');
    const results = await Promise.all([
      store.mutateRow(table, Buffer.from('fam-a'), [set('a')], call()).then(() => 'OK'),
      store.mutateRow(table, Buffer.from('fam-b'), [set('b', 'g')], call()).then(
        () => 'OK',
        (error: StoreError) => `${error.code} ${error.message}`,
      ),
      store.mutateRow(table, Buffer.from('fam-c'), [set('c')], call()).then(() => 'OK'),
    ]);
    expect(results[0]).to.equal('OK');
    expect(results[1]).to.match(/^NOT_FOUND column family "g"/);
    expect(results[2]).to.equal('OK');
  });

  it('fails each caller as its own call would have when the batch fails as a whole', async () => {
    const table: TableRef = { instance, table: 'dropped' };
    await store.createTable(table, [{ name: 'f' }], call());
    await cbt(host, instance, 'deletetable', table.table);
    const results = await Promise.all(['gone-a', 'gone-b'].map((name) => outcome(store.mutateRow(table, Buffer.from(name), [set(name)], call()))));
    expect(results).to.deep.equal(['NOT_FOUND', 'NOT_FOUND']);
  });

  it("answers a caller that goes at once, and its batch-mates' writes are applied", async () => {
    front.failEntry = (_, key) => (key.toString() === 'leave-b' ? { code: status.UNAVAILABLE, message: 'injected' } : undefined);
    const controller = new AbortController();
    const leaving = outcome(write('leave-b', { ...call(), signal: controller.signal }));
    const rest = Promise.all([outcome(write('leave-a')), outcome(write('leave-c'))]);
    while (front.mutateRowsCalls.length === 0) await new Promise((resolve) => setTimeout(resolve, 5));
    const sentBefore = front.mutateRowsCalls.length;
    controller.abort();
    expect(await leaving).to.equal('DEADLINE_EXCEEDED');
    expect(await rest).to.deep.equal(['OK', 'OK']);
    expect(front.mutateRowsCalls[0]).to.deep.equal(keys('leave-b', 'leave-a', 'leave-c'));
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(front.mutateRowsCalls.length, 'no entry sent again for a caller gone').to.be.at.most(sentBefore + 1);
  });

  it("answers a caller whose deadline passes within it, without failing its batch-mates", async () => {
    front.failEntry = (number, key) => (key.toString() === 'late-b' || (number === 0 && key.toString() === 'late-c') ? { code: status.UNAVAILABLE, message: 'injected' } : undefined);
    const started = Date.now();
    const late = outcome(write('late-b', call(400))).then((code) => [code, Date.now() - started] as const);
    const rest = Promise.all([outcome(write('late-a')), outcome(write('late-c'))]);
    const [code, elapsed] = await late;
    expect(code).to.be.oneOf(['DEADLINE_EXCEEDED', 'UNAVAILABLE']);
    // At its own deadline, not its batch-mates' (seconds later), with room for a loaded machine.
    expect(elapsed).to.be.below(400 + 1000);
    front.failEntry = () => undefined;
    expect(await rest).to.deep.equal(['OK', 'OK']);
  });

  it('sends each write alone when coalescing is off', async () => {
    const plain = new BigtableStore({ projectId: TEST_PROJECT, instanceIds: [instance], emulatorHost: front.host, coalesce: false });
    try {
      await Promise.all(['off-a', 'off-b', 'off-c'].map((name) => plain.mutateRow(ref, Buffer.from(name), [set(name)], call())));
      // Only these writes' calls: a retry of an earlier test's batch may still reach the front.
      expect(front.mutateRowsCalls.filter((call) => call.some((key) => key.toString().startsWith('off-')))).to.have.length(0);
      expect(front.calls.get('MutateRow')).to.equal(3);
    } finally {
      await plain.close();
    }
  });

  describe('single-key reads', () => {
    const selection = { versions: 1 };
    const read = (name: string, options: CallOptions = call()) => store.readRows(ref, [Buffer.from(name)], selection, options).then(([row]) => row);
    before(async () => {
      await Promise.all(['read-a', 'read-b', 'read-c'].map((name) => write(name)));
    });

    it('reads the keys of one turn in one ReadRows, each caller getting its own row or null', async () => {
      front.readRowsCalls = 0;
      batches.length = 0;
      const rows = await Promise.all(['read-c', 'read-a', 'read-none', 'read-b', 'read-a'].map((name) => read(name)));
      expect(rows.map((row) => row?.key.toString() ?? null)).to.deep.equal(['read-c', 'read-a', null, 'read-b', 'read-a']);
      expect(rows[0]?.cells.map((cell) => cell.value.toString())).to.deep.equal(['read-c']);
      expect(front.readRowsCalls).to.equal(1);
      expect(batches).to.deep.equal([5]);
    });

    it('reads a lone key in a call of its own', async () => {
      front.readRowsCalls = 0;
      expect((await read('read-b'))?.key.toString()).to.equal('read-b');
      expect(front.readRowsCalls).to.equal(1);
    });

    it('answers every caller after a broken stream, with one more call', async () => {
      front.readRowsCalls = 0;
      front.breakReadAfterRows = 1;
      const rows = await Promise.all(['read-a', 'read-b', 'read-c'].map((name) => read(name)));
      expect(rows.map((row) => row?.key.toString())).to.deep.equal(['read-a', 'read-b', 'read-c']);
      expect(front.readRowsCalls).to.equal(2);
    });

    it("answers a caller that goes, and its batch-mates' reads go on", async () => {
      const controller = new AbortController();
      const leaving = read('read-a', { ...call(), signal: controller.signal }).then(
        () => 'OK',
        (error: StoreError) => error.code,
      );
      const rest = Promise.all([read('read-b'), read('read-c')]);
      setImmediate(() => controller.abort());
      expect(await leaving).to.equal('DEADLINE_EXCEEDED');
      expect((await rest).map((row) => row?.key.toString())).to.deep.equal(['read-b', 'read-c']);
    });

    it('fails each caller as its own read would have when the table is gone', async () => {
      const table: TableRef = { instance, table: 'dropped-read' };
      await store.createTable(table, [{ name: 'f' }], call());
      await store.readRows(table, [Buffer.from('x')], selection, call());
      await cbt(host, instance, 'deletetable', table.table);
      const results = await Promise.all(
        ['x', 'y'].map((name) =>
          store.readRows(table, [Buffer.from(name)], selection, call()).then(
            () => 'OK',
            (error: StoreError) => error.code,
          ),
        ),
      );
      expect(results).to.deep.equal(['NOT_FOUND', 'NOT_FOUND']);
    });
  });
});
