import { Database, Snapshot, Transaction } from '@google-cloud/spanner';
import { expect } from 'chai';
import { pino } from 'pino';
import { spannerDriver } from '../../../src/store/spanner/driver.ts';
import type { StoreError } from '../../../src/store/errors.ts';
import type { CallOptions, DataStore, Mutation, ReadSelection, Row, TableRef } from '../../../src/store/store.ts';
import { spannerTestInstance } from '../../support/harnesses/spanner.ts';
import { TEST_PROJECT } from '../../support/emulator.ts';
import { requireSpanner, sharedSpannerEmulator } from '../../support/spanner-emulator.ts';
import { TurnCounter } from '../../support/turns.ts';

/**
 * What the Spanner client is asked while reads run: snapshots taken, and reads (outside read-write
 * transactions) of each Spanner table. `hold` delays each snapshot, to keep a read in flight.
 */
class ClientCalls {
  snapshots = 0;
  /** The turns counted (TurnCounter) when the last snapshot was asked for. */
  snapshotTurn: number | undefined;
  turns: TurnCounter | undefined;
  hold = 0;
  readonly reads = new Map<string, number>();
  readonly #restore: Array<() => void> = [];

  /** Wraps the client's methods until restore(). */
  static install(): ClientCalls {
    const calls = new ClientCalls();
    // The client's own methods, called on their objects by the wrappers (Reflect.get: no bound copy is wanted).
    const getSnapshot = Reflect.get(Database.prototype, 'getSnapshot') as (...args: unknown[]) => Promise<unknown>;
    Reflect.set(Database.prototype, 'getSnapshot', async function (this: Database, ...args: unknown[]) {
      calls.snapshots += 1;
      calls.snapshotTurn = calls.turns?.turns;
      if (calls.hold > 0) await new Promise((resolve) => setTimeout(resolve, calls.hold));
      return getSnapshot.apply(this, args);
    });
    calls.#restore.push(() => Reflect.set(Database.prototype, 'getSnapshot', getSnapshot));
    const read = Reflect.get(Snapshot.prototype, 'read') as (...args: unknown[]) => unknown;
    Reflect.set(Snapshot.prototype, 'read', function (this: Snapshot, table: string, ...args: unknown[]) {
      if (!(this instanceof Transaction)) calls.reads.set(table, (calls.reads.get(table) ?? 0) + 1);
      return read.apply(this, [table, ...args]);
    });
    calls.#restore.push(() => Reflect.set(Snapshot.prototype, 'read', read));
    return calls;
  }

  clear(): void {
    this.snapshots = 0;
    this.snapshotTurn = undefined;
    this.hold = 0;
    this.reads.clear();
  }

  restore(): void {
    for (const undo of this.#restore) undo();
  }
}

/**
 * Single-key reads (readRows of one key) made in one turn of the event loop, of one table and
 * selection, are read as one readRows over their keys: one snapshot, one catalog read and one read
 * of the cells. Each caller gets its own row, or null, and its own deadline or departure.
 */
describe('Spanner store: coalesced single-key reads', () => {
  let store: DataStore;
  let host: string;
  let calls: ClientCalls;
  const batches: Array<[string, string, number]> = [];
  const instance = 'coalesced';
  const ref: TableRef = { instance, table: 'rows' };
  const latest: ReadSelection = { versions: 1 };
  const call = (ms = 30_000): CallOptions => ({ deadline: Date.now() + ms });
  const set = (value: string, family = 'f'): Mutation => ({ type: 'set', family, column: Buffer.from('c'), value: Buffer.from(value), timestampMicros: 1_000n });
  const read = (name: string, options: CallOptions = call(), selection = latest, table = ref) => store.readRows(table, [Buffer.from(name)], selection, options).then(([row]) => row ?? null);
  const keyOf = (row: Row | null) => row?.key.toString() ?? null;
  const outcome = (promise: Promise<unknown>) =>
    promise.then(
      () => 'OK',
      (error: StoreError) => error.code,
    );
  const open = (coalesce?: boolean) =>
    spannerDriver.open(
      { name: 'spanner', instances: [instance], settings: { projectId: TEST_PROJECT, instance: spannerTestInstance(), emulatorHost: host, ...(coalesce === undefined ? {} : { coalesce }) } },
      { logger: pino({ level: 'silent' }), onBatch: (name, operation, size) => batches.push([name, operation, size]) },
    );

  before(async function () {
    this.timeout(120_000);
    requireSpanner(this);
    host = (await sharedSpannerEmulator()).host;
    store = await open();
    await store.createTable(ref, [{ name: 'f' }, { name: 'g' }], call());
    await store.mutateRows(
      ref,
      ['read-a', 'read-b', 'read-c'].map((name) => ({ key: Buffer.from(name), mutations: [set(name)] })),
      call(),
    );
    await store.mutateRow(ref, Buffer.from('read-g'), [set('read-g', 'g')], call());
    calls = ClientCalls.install();
  });
  after(async () => {
    calls?.restore();
    await store?.close();
  });
  beforeEach(() => {
    calls.clear();
    batches.length = 0;
  });

  it('reads the keys of one turn in one snapshot, one catalog read and one read of the cells, each caller getting its own row or null', async () => {
    const rows = await Promise.all(['read-c', 'read-a', 'read-none', 'read-b', 'read-a'].map((name) => read(name)));
    expect(rows.map(keyOf)).to.deep.equal(['read-c', 'read-a', null, 'read-b', 'read-a']);
    expect(rows[0]?.cells.map((cell) => cell.value.toString())).to.deep.equal(['read-c']);
    expect(calls.snapshots).to.equal(1);
    expect(Object.fromEntries(calls.reads)).to.deep.equal({ kvcrud_tables: 1, kvcrud_cells: 1 });
    expect(batches).to.deep.equal([['spanner', 'readRows', 5]]);
  });

  it('sends a lone read in the turn it was made, in a snapshot of its own', async () => {
    calls.turns = new TurnCounter();
    try {
      expect(keyOf(await read('read-b'))).to.equal('read-b');
    } finally {
      calls.turns.stop();
      calls.turns = undefined;
    }
    // The counter's first tick and the batch's flush run in the same check phase: nothing waited for a later turn.
    expect(calls.snapshotTurn).to.equal(1);
    expect(calls.snapshots).to.equal(1);
    expect(batches).to.deep.equal([['spanner', 'readRows', 1]]);
  });

  it('reads different selections, and different tables, in calls of their own', async () => {
    const other: TableRef = { instance, table: 'other' };
    await store.createTable(other, [{ name: 'f' }], call());
    calls.clear();
    const onlyG: ReadSelection = { versions: 1, columns: [{ family: 'g' }] };
    const rows = await Promise.all([read('read-a'), read('read-g'), read('read-a', call(), onlyG), read('read-g', call(), onlyG), read('read-a', call(), latest, other)]);
    expect(rows.map(keyOf)).to.deep.equal(['read-a', 'read-g', null, 'read-g', null]);
    expect(calls.snapshots).to.equal(3);
    expect(batches.map(([, , size]) => size).sort()).to.deep.equal([1, 2, 2]);
  });

  it('leaves a read of several keys (batchGet) as its own call', async () => {
    const [many, one] = await Promise.all([store.readRows(ref, [Buffer.from('read-a'), Buffer.from('read-b')], latest, call()), read('read-c')]);
    expect(many.map(keyOf)).to.deep.equal(['read-a', 'read-b']);
    expect(keyOf(one)).to.equal('read-c');
    expect(calls.snapshots).to.equal(2);
    expect(batches).to.deep.equal([['spanner', 'readRows', 1]]);
  });

  it("answers a caller that goes at once, and its batch-mates' reads go on", async () => {
    calls.hold = 300;
    const controller = new AbortController();
    const started = Date.now();
    const leaving = outcome(read('read-a', { ...call(), signal: controller.signal })).then((code) => [code, Date.now() - started] as const);
    const rest = Promise.all([read('read-b'), read('read-c')]);
    setImmediate(() => controller.abort());
    const [code, elapsed] = await leaving;
    expect(code).to.equal('DEADLINE_EXCEEDED');
    expect(elapsed).to.be.below(200);
    expect((await rest).map(keyOf)).to.deep.equal(['read-b', 'read-c']);
    expect(calls.snapshots).to.equal(1);
  });

  it('answers a caller whose deadline passes at its deadline, without failing its batch-mates', async () => {
    calls.hold = 600;
    const started = Date.now();
    const late = outcome(read('read-a', call(200))).then((code) => [code, Date.now() - started] as const);
    const rest = Promise.all([read('read-b'), read('read-c')]);
    const [code, elapsed] = await late;
    expect(code).to.equal('DEADLINE_EXCEEDED');
    expect(elapsed).to.be.within(150, 500);
    expect((await rest).map(keyOf)).to.deep.equal(['read-b', 'read-c']);
    expect(calls.snapshots).to.equal(1);
  });

  it('fails each caller with NOT_FOUND for the table when the table is missing', async () => {
    const missing: TableRef = { instance, table: 'missing' };
    const results = await Promise.all(
      ['x', 'y', 'z'].map((name) =>
        read(name, call(), latest, missing).then(
          () => 'OK',
          (error: StoreError) => `${error.code} ${error.resource ?? ''}`,
        ),
      ),
    );
    expect(results).to.deep.equal(['NOT_FOUND table', 'NOT_FOUND table', 'NOT_FOUND table']);
    expect(calls.snapshots).to.equal(1);
  });

  it('reads each key alone when coalescing is off', async () => {
    const plain = await open(false);
    try {
      await plain.createTable(ref, [{ name: 'f' }], call());
      calls.clear();
      const rows = await Promise.all(['off-a', 'off-b', 'off-c'].map((name) => plain.readRows(ref, [Buffer.from(name)], latest, call())));
      expect(rows).to.deep.equal([[null], [null], [null]]);
      expect(calls.snapshots).to.equal(3);
      expect(batches).to.deep.equal([]);
    } finally {
      await plain.close();
    }
  });
});
