import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { type Database, Transaction } from '@google-cloud/spanner';
import type { CallOptions, DataStore, TableRef } from '../../../src/store/store.ts';
import { spannerSide } from '../../support/spanner-sql.ts';

interface SqlCell {
  col: Buffer;
  ts: { value: string };
  value: Buffer;
  hex: string;
}

const INT64_MAX = 2n ** 63n - 1n;
const HOUR_MICROS = 3_600_000_000n;

/**
 * Counters and conditions through the store, checked with Spanner SQL through a client of the
 * test's own (as `gcloud spanner databases execute-sql` would): a counter is the 8 big-endian
 * bytes SQL reads, a counter SQL wrote is incremented, and a condition is decided on what SQL
 * wrote, retention included.
 */
describe('spanner: counters and conditions, cross-checked with Spanner SQL', function () {
  this.timeout(120_000);
  const side = spannerSide();
  const instance = `cnt${randomBytes(4).toString('hex')}`;
  const stores: DataStore[] = [];
  let store: DataStore;
  let database: Database;
  let tableId: string;
  const ref: TableRef = { instance, table: 'counters' };
  const call = (): CallOptions => ({ deadline: Date.now() + 60_000 });
  const sql = async <T>(query: string, params: Record<string, unknown> = {}): Promise<T[]> => {
    const [rows] = await database.run({ sql: query, params, json: true, jsonOptions: { wrapNumbers: true } });
    return rows as T[];
  };
  /** The versions of one column of one row, newest first, with the value's hex as SQL computes it. */
  const column = (key: string, family: string, name: string) =>
    sql<SqlCell>(
      'SELECT col, ts, value, TO_HEX(value) AS hex FROM kvcrud_cells WHERE table_id = @table AND row_key = @key AND family = @family AND col = @col ORDER BY ts DESC',
      { table: tableId, key: Buffer.from(key), family, col: Buffer.from(name) },
    );
  const sqlWrite = (statement: string, params: Record<string, unknown>) =>
    database.runTransactionAsync(async (transaction) => {
      await transaction.runUpdate({ sql: statement, params: { table: tableId, ...params } });
      await transaction.commit();
    });
  const increment = (family: string, name: string, amount: bigint) => ({ type: 'increment' as const, family, column: Buffer.from(name), amount });

  before(async function () {
    const harness = await side.harness.make(this);
    for (let i = 0; i < 2; i++) stores.push(await harness.open([instance]));
    store = stores[0] as DataStore;
    await store.createTable(ref, [{ name: 'n' }, { name: 'hour', maxVersions: 1, maxAgeSeconds: 3600 }], call());
    database = await side.database(instance);
    const [catalog] = await sql<{ table_id: string }>('SELECT table_id FROM kvcrud_tables WHERE name = @name', { name: 'counters' });
    tableId = catalog?.table_id ?? '';
  });
  after(async () => {
    await Promise.all(stores.map((each) => each.close()));
    await side.close();
  });

  it('SQL reads a counter incremented through the store as 8 big-endian bytes, wrapped on overflow', async () => {
    await store.readModifyWriteRow(ref, Buffer.from('c'), [increment('n', 'views', 41n)], call());
    const [answer] = (await store.readModifyWriteRow(ref, Buffer.from('c'), [increment('n', 'views', 1n)], call())).cells;
    const [latest] = await column('c', 'n', 'views');
    expect(latest?.hex).to.equal('000000000000002a');
    expect(latest?.value.readBigInt64BE()).to.equal(42n);
    expect(latest?.ts.value).to.equal(answer?.timestampMicros.toString());
    await store.readModifyWriteRow(ref, Buffer.from('c'), [increment('n', 'big', INT64_MAX), increment('n', 'big', 2n), increment('n', 'down', -3n)], call());
    expect((await column('c', 'n', 'big'))[0]?.hex).to.equal('8000000000000001');
    expect((await column('c', 'n', 'down'))[0]?.hex).to.equal('fffffffffffffffd');
  });

  it('increments a counter SQL wrote, and refuses a value SQL wrote that is not 8 bytes, writing nothing', async () => {
    await sqlWrite(
      `INSERT INTO kvcrud_cells (table_id, row_key, family, col_hash, col, ts, value) VALUES
         (@table, b'from-sql', 'n', SHA256(b'n'), b'n', 1000, FROM_HEX('00000000000003e8')),
         (@table, b'from-sql', 'n', SHA256(b'text'), b'text', 1000, b'1000')`,
      {},
    );
    const row = await store.readModifyWriteRow(ref, Buffer.from('from-sql'), [increment('n', 'n', 1n)], call());
    expect(row.cells[0]?.value.readBigInt64BE()).to.equal(1001n);
    expect((await column('from-sql', 'n', 'n')).map((cell) => cell.hex)).to.deep.equal(['00000000000003e9', '00000000000003e8']);
    const refused = await store.readModifyWriteRow(ref, Buffer.from('from-sql'), [increment('n', 'n', 1n), increment('n', 'text', 1n)], call()).then(
      () => undefined,
      (error: unknown) => error as { code?: string; reason?: string },
    );
    expect({ code: refused?.code, reason: refused?.reason }).to.deep.equal({ code: 'FAILED_PRECONDITION', reason: 'NOT_A_COUNTER' });
    expect((await column('from-sql', 'n', 'n')).map((cell) => cell.hex)).to.deep.equal(['00000000000003e9', '00000000000003e8']);
  });

  it('decides a condition on what SQL wrote, and not on a version SQL wrote that the family has expired', async () => {
    const now = BigInt(Date.now()) * 1000n;
    await sqlWrite(
      `INSERT INTO kvcrud_cells (table_id, row_key, family, col_hash, col, ts, value) VALUES
         (@table, b'doc', 'hour', SHA256(b'state'), b'state', CAST(@fresh AS INT64), b'draft'),
         (@table, b'stale', 'hour', SHA256(b'state'), b'state', CAST(@old AS INT64), b'draft')`,
      { fresh: (now - 1000n).toString(), old: (now - 2n * HOUR_MICROS).toString() },
    );
    const condition = { type: 'columnEquals' as const, family: 'hour', column: Buffer.from('state'), value: Buffer.from('draft') };
    const publish = { type: 'set' as const, family: 'hour', column: Buffer.from('state'), value: Buffer.from('published'), timestampMicros: now };
    const conflict = { type: 'set' as const, family: 'n', column: Buffer.from('conflict'), value: Buffer.from('1'), timestampMicros: now };
    expect(await store.checkAndMutateRow(ref, Buffer.from('doc'), { conditions: [condition], mutations: [publish], otherwise: [conflict] }, call())).to.equal(true);
    // The family keeps one version: the write trimmed the one SQL wrote.
    expect((await column('doc', 'hour', 'state')).map((cell) => cell.value.toString())).to.deep.equal(['published']);
    expect(await store.checkAndMutateRow(ref, Buffer.from('stale'), { conditions: [condition], mutations: [publish], otherwise: [conflict] }, call())).to.equal(false);
    expect((await column('stale', 'hour', 'state')).map((cell) => cell.value.toString())).to.deep.equal(['draft']);
    expect((await column('stale', 'n', 'conflict')).map((cell) => cell.value.toString())).to.deep.equal(['1']);
  });

  it('counts from 0 where the latest version SQL wrote has expired by age, even a value that is not 8 bytes', async () => {
    const old = (BigInt(Date.now()) * 1000n - 2n * HOUR_MICROS).toString();
    await sqlWrite(
      `INSERT INTO kvcrud_cells (table_id, row_key, family, col_hash, col, ts, value) VALUES
         (@table, b'expired', 'hour', SHA256(b'n'), b'n', CAST(@old AS INT64), FROM_HEX('0000000000000064')),
         (@table, b'expired', 'hour', SHA256(b'text'), b'text', CAST(@old AS INT64), b'not a counter')`,
      { old },
    );
    const row = await store.readModifyWriteRow(ref, Buffer.from('expired'), [increment('hour', 'n', 1n), increment('hour', 'text', 1n)], call());
    expect(row.cells.map((cell) => cell.value.toString('hex'))).to.deep.equal(['0000000000000001', '0000000000000001']);
    // The write trimmed the expired versions the family no longer keeps.
    expect((await column('expired', 'hour', 'n')).map((cell) => cell.hex)).to.deep.equal(['0000000000000001']);
    expect((await column('expired', 'hour', 'text')).map((cell) => cell.hex)).to.deep.equal(['0000000000000001']);
  });

  it('refuses an append that would make a value longer than Spanner holds, writing nothing', async () => {
    const limit = store.limits.valueBytes;
    const at = BigInt(Date.now()) * 1000n;
    await store.mutateRow(ref, Buffer.from('long'), [{ type: 'set', family: 'hour', column: Buffer.from('log'), value: Buffer.alloc(limit, 0x61), timestampMicros: at }], call());
    const refused = await store
      .readModifyWriteRow(ref, Buffer.from('long'), [increment('n', 'n', 1n), { type: 'append', family: 'hour', column: Buffer.from('log'), value: Buffer.from('b') }], call())
      .then(
        () => undefined,
        (error: unknown) => error as { code?: string; limit?: string },
      );
    expect({ code: refused?.code, limit: refused?.limit }).to.deep.equal({ code: 'INVALID_ARGUMENT', limit: 'valueBytes' });
    const [length] = await sql<{ n: { value: string } }>('SELECT LENGTH(value) AS n FROM kvcrud_cells WHERE table_id = @table AND row_key = @key', { table: tableId, key: Buffer.from('long') });
    expect(length?.n.value).to.equal(String(limit));
    expect(await column('long', 'n', 'n')).to.deep.equal([]);
  });

  it('sums increments racing from two stores exactly', async () => {
    const calls = 20;
    await Promise.all(Array.from({ length: calls }, (_, i) => (stores[i % 2] as DataStore).readModifyWriteRow(ref, Buffer.from('hot'), [increment('n', 'hits', 1n)], call())));
    expect((await column('hot', 'n', 'hits'))[0]?.value.readBigInt64BE()).to.equal(BigInt(calls));
  });

  /**
   * Runs `work` with the first commit of a transaction refused as Spanner refuses an aborted
   * transaction's, after `between` has run (once that transaction is rolled back): the client's
   * runner then runs the transaction again. Answers how many commits were asked for in all.
   */
  const withAbortedCommit = async <T>(between: () => Promise<unknown>, work: () => Promise<T>): Promise<{ result: T; commits: number }> => {
    const own = Object.getOwnPropertyDescriptor(Transaction.prototype, 'commit');
    const original = (Transaction.prototype as unknown as { commit: (...args: unknown[]) => Promise<unknown> }).commit;
    let commits = 0;
    Object.defineProperty(Transaction.prototype, 'commit', {
      configurable: true,
      writable: true,
      value: async function (this: Transaction, ...args: unknown[]) {
        if (commits++ > 0) return original.apply(this, args);
        await this.rollback();
        await between();
        throw Object.assign(new Error('10 ABORTED: Transaction was aborted.'), { code: 10 });
      },
    });
    try {
      return { result: await work(), commits };
    } finally {
      if (own === undefined) delete (Transaction.prototype as { commit?: unknown }).commit;
      else Object.defineProperty(Transaction.prototype, 'commit', own);
    }
  };

  it('reads the row again when Spanner aborts the transaction: an increment committed in between is not lost', async () => {
    const other = stores[1] as DataStore;
    const { result, commits } = await withAbortedCommit(
      () => other.readModifyWriteRow(ref, Buffer.from('retried'), [increment('n', 'hits', 100n)], call()),
      () => store.readModifyWriteRow(ref, Buffer.from('retried'), [increment('n', 'hits', 1n)], call()),
    );
    // The call's two attempts and the other store's increment in between.
    expect(commits).to.equal(3);
    expect(result.cells[0]?.value.readBigInt64BE()).to.equal(101n);
    expect((await column('retried', 'n', 'hits'))[0]?.value.readBigInt64BE()).to.equal(101n);
  });

  it('decides the conditions again when Spanner aborts the transaction', async () => {
    const other = stores[1] as DataStore;
    const at = BigInt(Date.now()) * 1000n;
    const set = (name: string, value: string) => ({ type: 'set' as const, family: 'n', column: Buffer.from(name), value: Buffer.from(value), timestampMicros: at });
    const { result, commits } = await withAbortedCommit(
      () => other.mutateRow(ref, Buffer.from('lock'), [set('owner', 'other')], call()),
      () => store.checkAndMutateRow(ref, Buffer.from('lock'), { conditions: [{ type: 'rowExists', exists: false }], mutations: [set('owner', 'me')], otherwise: [set('lost', 'yes')] }, call()),
    );
    expect(commits).to.equal(3);
    expect(result).to.equal(false);
    expect((await column('lock', 'n', 'owner')).map((cell) => cell.value.toString())).to.deep.equal(['other']);
    expect((await column('lock', 'n', 'lost')).map((cell) => cell.value.toString())).to.deep.equal(['yes']);
  });
});
