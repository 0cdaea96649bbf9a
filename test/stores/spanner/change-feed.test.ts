import { expect } from 'chai';
import type { Instance } from '@google-cloud/spanner';
import { pino } from 'pino';
import { SpannerStore } from '../../../src/store/spanner/spanner-store.ts';
import { SCHEMA_VERSION } from '../../../src/store/spanner/schema.ts';
import type { ChangeEvent, ChangeStart, DataStore, TableRef } from '../../../src/store/store.ts';
import { randomInstanceId } from '../../support/driver-harness.ts';
import { spannerSide } from '../../support/spanner-sql.ts';
import { requireSpanner, sharedSpannerEmulator } from '../../support/spanner-emulator.ts';
import { TEST_PROJECT } from '../../support/emulator.ts';

const call = () => ({ deadline: Date.now() + 30_000 });
const set = (family: string, column: string, value: string, timestampMicros: bigint) =>
  ({ type: 'set', family, column: Buffer.from(column), value: Buffer.from(value), timestampMicros }) as const;

/** The schema of a kvcrud database before the change feed (version 1), as that release created it. */
const VERSION_1_DDL = [
  'CREATE TABLE kvcrud_schema (id INT64 NOT NULL, version INT64 NOT NULL) PRIMARY KEY (id)',
  'CREATE TABLE kvcrud_tables (name STRING(MAX) NOT NULL, table_id STRING(32) NOT NULL, families STRING(MAX) NOT NULL) PRIMARY KEY (name)',
  'CREATE TABLE kvcrud_dropped (table_id STRING(32) NOT NULL) PRIMARY KEY (table_id)',
  'CREATE TABLE kvcrud_cells (table_id STRING(32) NOT NULL, row_key BYTES(MAX) NOT NULL, family STRING(64) NOT NULL, col_hash BYTES(32) NOT NULL, ts INT64 NOT NULL, col BYTES(MAX) NOT NULL, value BYTES(MAX) NOT NULL) PRIMARY KEY (table_id, row_key, family, col_hash, ts DESC)',
];

/** A feed read in the background until stopped. */
function follow(store: DataStore, ref: TableRef, start: ChangeStart) {
  const abort = new AbortController();
  const events: ChangeEvent[] = [];
  let error: unknown;
  const done = (async () => {
    try {
      for await (const event of store.readChanges(ref, start, { signal: abort.signal })) events.push(event);
    } catch (failure) {
      error = failure;
    }
  })();
  const wait = async (ready: () => boolean, what: string) => {
    const until = Date.now() + 30_000;
    while (!ready()) {
      if (Date.now() > until) throw new Error(`timed out waiting for ${what}: ${String(error)}`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  };
  const changes = () => events.flatMap((event) => (event.type === 'change' ? [event] : []));
  return {
    events,
    changes,
    error: () => error,
    started: () => wait(() => events.length > 0 || error !== undefined, 'the first event'),
    until: async (count: number) => {
      await wait(() => changes().length >= count || error !== undefined, `${count} changes`);
      return changes();
    },
    ended: async () => {
      await wait(() => error !== undefined, 'the end of the feed');
      return error as Error & { code?: string; resource?: string };
    },
    stop: async () => {
      abort.abort();
      await done;
    },
  };
}

describe('spanner: the change feed', () => {
  const side = spannerSide();
  const stores: SpannerStore[] = [];
  const feeds: Array<{ stop(): Promise<void> }> = [];
  let host: string;
  const open = (instances: readonly string[]) => {
    const store = SpannerStore.open({ projectId: TEST_PROJECT, instance: side.instance, emulatorHost: host, instances, logger: pino({ level: 'silent' }) });
    stores.push(store);
    return store;
  };
  const watch = (store: DataStore, ref: TableRef, start: ChangeStart) => {
    const feed = follow(store, ref, start);
    feeds.push(feed);
    return feed;
  };

  before(async function () {
    requireSpanner(this);
    host = (await sharedSpannerEmulator()).host;
  });
  afterEach(async () => {
    await Promise.all(feeds.splice(0).map((feed) => feed.stop()));
  });
  after(async () => {
    await Promise.all(stores.map((store) => store.close()));
    await side.close();
  });

  it('upgrades a database of schema version 1: its tables stay, and their writes are in the feed from then on', async function () {
    this.timeout(120_000);
    // The Spanner instance, created by a store's first call.
    await open([randomInstanceId()]).checkHealth(call());
    const instance = randomInstanceId();
    const spannerInstance = (await side.database(instance)).parent as Instance;
    const [, creating] = await spannerInstance.createDatabase(instance, { schema: VERSION_1_DDL });
    await creating.promise();
    const database = await side.database(instance);
    await database.runTransactionAsync(async (transaction) => {
      transaction.insert('kvcrud_schema', { id: '0', version: '1' });
      transaction.insert('kvcrud_tables', { name: 'old', table_id: 'a'.repeat(32), families: JSON.stringify([{ name: 'f' }]) });
      await transaction.commit();
    });

    // Two replicas upgrade it at once: both serve.
    const [store, other] = [open([instance]), open([instance])] as [SpannerStore, SpannerStore];
    await Promise.all([store.checkHealth(call()), other.checkHealth(call())]);
    const ref = { instance, table: 'old' };
    await store.mutateRow(ref, Buffer.from('k'), [set('f', 'c', 'before the feed', 1n)], call());
    const [version] = await database.run({ sql: 'SELECT version FROM kvcrud_schema', json: true });
    expect(version).to.deep.equal([{ version: SCHEMA_VERSION }]);
    const [streams] = await database.run({ sql: 'SELECT change_stream_name FROM information_schema.change_streams', json: true });
    expect(streams).to.deep.equal([{ change_stream_name: 'kvcrud_feed' }]);

    const feed = watch(store, ref, { type: 'now' });
    await feed.started();
    await store.mutateRow(ref, Buffer.from('k'), [set('f', 'c', 'after', 2n)], call());
    const [change] = await feed.until(1);
    expect(change?.change.mutations).to.deep.equal([set('f', 'c', 'after', 2n)]);
    const [row] = await store.readRows(ref, [Buffer.from('k')], { versions: 2 }, call());
    expect(row?.cells.map((cell) => cell.value.toString())).to.deep.equal(['after', 'before the feed']);
  });

  it('records each write in kvcrud_changes and the change stream, as Spanner SQL reads them', async function () {
    this.timeout(60_000);
    const instance = randomInstanceId();
    const store = open([instance]);
    const ref = { instance, table: 'seen' };
    await store.createTable(ref, [{ name: 'f' }], call());
    const database = await side.database(instance);
    const [[catalog]] = (await database.run({ sql: 'SELECT table_id FROM kvcrud_tables WHERE name = "seen"', json: true })) as unknown as [[{ table_id: string }]];
    const startedAt = new Date();
    await store.mutateRows(
      ref,
      [
        { key: Buffer.from('r1'), mutations: [set('f', 'c', 'one', 5n)] },
        { key: Buffer.from('r1'), mutations: [{ type: 'deleteRow' }] },
      ],
      call(),
    );
    await store.mutateRow(ref, Buffer.from('r2'), [set('f', 'c', 'two', 6n), { type: 'deleteFamily', family: 'f' }], call());
    const [rows] = await database.run({
      sql: 'SELECT row_key, committed, changes FROM kvcrud_changes WHERE table_id = @table AND row_key = @key',
      params: { table: catalog?.table_id, key: Buffer.from('r1') },
      json: true,
    });
    expect(rows).to.have.length(1);
    const row = rows[0] as { row_key: Buffer; committed: Date; changes: Buffer };
    expect(row.row_key.toString()).to.equal('r1');
    expect(JSON.parse(row.changes.toString())).to.deep.equal([
      [{ t: 'set', f: 'f', c: Buffer.from('c').toString('base64'), v: Buffer.from('one').toString('base64'), ts: '5' }],
      [{ t: 'deleteRow' }],
    ]);

    // The change stream itself, read with its table-valued function by SQL of the test's own.
    const [initial] = await database.run(
      {
        sql: 'SELECT ChangeRecord FROM READ_kvcrud_feed(start_timestamp => @start, end_timestamp => @end, partition_token => NULL, heartbeat_milliseconds => 1000)',
        params: { start: startedAt, end: new Date() },
        json: true,
      },
      { strong: true } as never,
    );
    type Records = Array<{
      ChangeRecord: Array<{ child_partitions_record: Array<{ child_partitions: Array<{ token: string }> }>; data_change_record: Array<{ table_name: string; mod_type: string; mods: unknown[] }> }>;
    }>;
    const tokens = (initial as unknown as Records).flatMap((record) => record.ChangeRecord.flatMap((change) => change.child_partitions_record.flatMap((split) => split.child_partitions.map((child) => child.token))));
    expect(tokens.length).to.be.greaterThan(0);
    const mods: unknown[] = [];
    for (const token of tokens) {
      const [records] = await database.run(
        {
          sql: 'SELECT ChangeRecord FROM READ_kvcrud_feed(start_timestamp => @start, end_timestamp => @end, partition_token => @token, heartbeat_milliseconds => 1000)',
          params: { start: startedAt, end: new Date(), token },
          json: true,
        },
        { strong: true } as never,
      );
      for (const record of records as unknown as Records) {
        for (const change of record.ChangeRecord) for (const data of change.data_change_record) {
          expect(data.table_name, 'the tables the stream tracks').to.be.oneOf(['kvcrud_changes', 'kvcrud_tables']);
          if (data.table_name === 'kvcrud_changes') mods.push(...data.mods.map((mod) => ({ type: data.mod_type, mod })));
        }
      }
    }
    expect(mods).to.have.length(2);
    const byKey = new Map(
      (mods as Array<{ type: string; mod: { keys: Record<string, string>; new_values: Record<string, string> } }>).map((found) => [
        Buffer.from(found.mod.keys['row_key'] ?? '', 'base64').toString(),
        found,
      ]),
    );
    expect(byKey.get('r2')?.type).to.equal('INSERT');
    expect(JSON.parse(Buffer.from(byKey.get('r2')?.mod.new_values['changes'] ?? '', 'base64').toString())).to.deep.equal([
      [{ t: 'set', f: 'f', c: Buffer.from('c').toString('base64'), v: Buffer.from('two').toString('base64'), ts: '6' }, { t: 'deleteFamily', f: 'f' }],
    ]);
    const mod = byKey.get('r1')?.mod as { keys: Record<string, string>; new_values: Record<string, string> };
    expect(mod.keys['table_id']).to.equal(catalog?.table_id);
    expect(Buffer.from(mod.keys['row_key'] ?? '', 'base64').toString()).to.equal('r1');
    expect(Buffer.from(mod.new_values['changes'] ?? '', 'base64').equals(row.changes)).to.equal(true);
  });

  it('yields sets as applied also where the same commit deletes, trims or writes their cell again', async function () {
    this.timeout(60_000);
    const instance = randomInstanceId();
    const store = open([instance]);
    const ref = { instance, table: 'gone' };
    await store.createTable(ref, [{ name: 'f' }, { name: 'one', maxVersions: 1 }], call());
    const feed = watch(store, ref, { type: 'now' });
    await feed.started();
    await store.mutateRows(
      ref,
      [
        { key: Buffer.from('a'), mutations: [set('f', 'c', 'first', 1n), set('f', 'c', 'second', 1n)] },
        { key: Buffer.from('a'), mutations: [set('one', 'c', 'newer', 5n), set('one', 'c', 'trimmed', 3n)] },
        { key: Buffer.from('b'), mutations: [set('f', 'c', 'short-lived', 1n), { type: 'deleteRow' }] },
      ],
      call(),
    );
    const changes = await feed.until(3);
    expect(changes.map((event) => [event.change.key.toString(), event.change.mutations])).to.deep.equal([
      ['a', [set('f', 'c', 'first', 1n), set('f', 'c', 'second', 1n)]],
      ['a', [set('one', 'c', 'newer', 5n), set('one', 'c', 'trimmed', 3n)]],
      ['b', [set('f', 'c', 'short-lived', 1n), { type: 'deleteRow' }]],
    ]);
    const [row] = await store.readRows(ref, [Buffer.from('a')], { versions: 5 }, call());
    expect(row?.cells.map((cell) => cell.value.toString())).to.deep.equal(['second', 'newer']);
  });

  it('yields a change recorded in several parts: a value of valueBytes, 10 MiB, is 13.3 MiB of JSON', async function () {
    this.timeout(60_000);
    const instance = randomInstanceId();
    const store = open([instance]);
    const ref = { instance, table: 'big' };
    await store.createTable(ref, [{ name: 'f' }], call());
    const feed = watch(store, ref, { type: 'now' });
    await feed.started();
    const value = Buffer.alloc(store.limits.valueBytes, 7);
    await store.mutateRow(ref, Buffer.from('big'), [{ type: 'set', family: 'f', column: Buffer.from('c'), value, timestampMicros: 1n }], call());
    await store.mutateRow(ref, Buffer.from('small'), [set('f', 'c', 'v', 1n)], call());
    const changes = await feed.until(2);
    const first = changes[0]?.change.mutations[0];
    expect(first?.type === 'set' && first.value.equals(value)).to.equal(true);
    expect(changes[1]?.change.key.toString()).to.equal('small');
    const [parts] = await (await side.database(instance)).run({ sql: 'SELECT part, LENGTH(changes) AS bytes FROM kvcrud_changes WHERE row_key = @key ORDER BY part', params: { key: Buffer.from('big') }, json: true });
    expect((parts as Array<{ part: number }>).map((part) => part.part)).to.deep.equal([0, 1]);
  });

  it('commits a write of bytesPerRow with its change, in one request of at most 100 MiB', async function () {
    this.timeout(120_000);
    const instance = randomInstanceId();
    const store = open([instance]);
    const ref = { instance, table: 'widest' };
    await store.createTable(ref, [{ name: 'f' }], call());
    const feed = watch(store, ref, { type: 'now' });
    await feed.started();
    const count = Math.floor(store.limits.bytesPerRow / store.limits.valueBytes);
    const value = Buffer.alloc(store.limits.valueBytes - 1024, 1);
    const mutations = Array.from({ length: count }, (_, i) => ({ type: 'set', family: 'f', column: Buffer.from(`c${i}`), value, timestampMicros: 1n }) as const);
    await store.mutateRow(ref, Buffer.from('widest'), mutations, { deadline: Date.now() + 60_000 });
    const [change] = await feed.until(1);
    expect(change?.change.mutations).to.have.length(count);
  });

  it('ends the feed of a deleted table, also one resumed after it was created again; a new feed sees only the new table', async function () {
    this.timeout(90_000);
    const instance = randomInstanceId();
    const store = open([instance]);
    const ref = { instance, table: 'again' };
    await store.createTable(ref, [{ name: 'f' }], call());
    const old = watch(store, ref, { type: 'now' });
    await old.started();
    await store.mutateRow(ref, Buffer.from('k'), [set('f', 'c', 'old', 1n)], call());
    const [oldChange] = await old.until(1);
    await store.deleteTable(ref, call());
    const ended = await old.ended();
    expect([ended.code, ended.resource]).to.deep.equal(['NOT_FOUND', 'table']);

    await store.createTable(ref, [{ name: 'f' }], call());
    const fresh = watch(store, ref, { type: 'now' });
    await fresh.started();
    await store.mutateRow(ref, Buffer.from('k'), [set('f', 'c', 'new', 2n)], call());
    const changes = await fresh.until(1);
    expect(changes.map((event) => event.change.mutations)).to.deep.equal([[set('f', 'c', 'new', 2n)]]);

    // A position of the old table resumes that table's feed: it ends at its deletion.
    const resumed = watch(store, ref, { type: 'after', position: oldChange?.position ?? '' });
    const resumedEnd = await resumed.ended();
    expect([resumedEnd.code, resumedEnd.resource]).to.deep.equal(['NOT_FOUND', 'table']);
    expect(resumed.changes()).to.deep.equal([]);
  });
});
