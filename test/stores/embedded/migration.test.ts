import { copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { expect } from 'chai';
import { DATABASE_FILE, EmbeddedStore } from '../../../src/store/embedded/embedded-store.ts';
import { SCHEMA_VERSION } from '../../../src/store/embedded/schema.ts';

/**
 * fixtures/schema-v1.sqlite was written by the store of schema version 1 (kvcrud before retention
 * policies), through its own API: tables local/orders (families cf and meta) and other/empty
 * (family x); row "row-1" with three versions (timestamps 1000, 2000, 3000) of cf:name and
 * meta:by; and a row with a binary key, column and value.
 */
const FIXTURE = new URL('fixtures/schema-v1.sqlite', import.meta.url).pathname;

describe('embedded store: a database of schema version 1', () => {
  let dataDir: string;
  let store: EmbeddedStore;
  const orders = { instance: 'local', table: 'orders' };
  const options = () => ({ deadline: Date.now() + 10_000 });

  beforeEach(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'kvcrud-migration-'));
    copyFileSync(FIXTURE, join(dataDir, DATABASE_FILE));
    store = await EmbeddedStore.open({ dataDir });
  });
  afterEach(async () => {
    await store.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('is migrated to the current schema version on open', async () => {
    await store.close();
    const db = new DatabaseSync(join(dataDir, DATABASE_FILE), { readOnly: true });
    try {
      expect(db.prepare('PRAGMA user_version').get()).to.deep.include({ user_version: SCHEMA_VERSION });
    } finally {
      db.close();
    }
    store = await EmbeddedStore.open({ dataDir });
  });

  it('keeps its tables, whose families keep every version as before', async () => {
    expect(await store.listTables('local', options())).to.deep.equal(['orders']);
    expect(await store.listTables('other', options())).to.deep.equal(['empty']);
    expect(await store.describeTable(orders, options())).to.deep.equal({ name: 'orders', families: [{ name: 'cf' }, { name: 'meta' }] });
  });

  it('keeps every version written before the migration', async () => {
    const [row] = await store.readRows(orders, [Buffer.from('row-1')], { versions: 10 }, options());
    expect(row?.cells.map((cell) => `${cell.family}:${cell.column.toString()}=${cell.value.toString()}@${cell.timestampMicros}`)).to.deep.equal([
      'cf:name=name v3@3000',
      'cf:name=name v2@2000',
      'cf:name=name v1@1000',
      'meta:by=user3@3000',
      'meta:by=user2@2000',
      'meta:by=user1@1000',
    ]);
    const [latest] = await store.readRows(orders, [Buffer.from('row-1')], { versions: 1 }, options());
    expect(latest?.cells.map((cell) => cell.value.toString())).to.deep.equal(['name v3', 'user3']);
    const [binary] = await store.readRows(orders, [Buffer.from([0x00, 0xff, 0x80])], { versions: 1 }, options());
    expect(binary?.cells).to.deep.equal([{ family: 'cf', column: Buffer.from([0xc3, 0x28]), value: Buffer.from([0, 1, 2, 255]), timestampMicros: 5000n }]);
  });

  it('takes new writes and new tables with policies afterwards', async () => {
    await store.mutateRow(orders, Buffer.from('row-1'), [{ type: 'set', family: 'cf', column: Buffer.from('name'), value: Buffer.from('name v4'), timestampMicros: 4000n }], options());
    const [row] = await store.readRows(orders, [Buffer.from('row-1')], { versions: 1, columns: [{ family: 'cf' }] }, options());
    expect(row?.cells.map((cell) => cell.value.toString())).to.deep.equal(['name v4']);
    await store.createTable({ instance: 'local', table: 'new' }, [{ name: 'f', maxVersions: 3, maxAgeSeconds: 60 }], options());
    expect(await store.describeTable({ instance: 'local', table: 'new' }, options())).to.deep.equal({
      name: 'new',
      families: [{ name: 'f', maxVersions: 3, maxAgeSeconds: 60 }],
    });
  });

  it('gains an empty change feed that records the writes made after the migration', async () => {
    const db = new DatabaseSync(join(dataDir, DATABASE_FILE), { readOnly: true });
    try {
      expect(db.prepare('SELECT count(*) AS n FROM changes').get()).to.deep.equal({ n: 0 });
    } finally {
      db.close();
    }
    const abort = new AbortController();
    const events = store.readChanges(orders, { type: 'now' }, { signal: abort.signal })[Symbol.asyncIterator]();
    try {
      expect((await events.next()).value).to.deep.equal({ type: 'progress', position: 'e1.0' });
      await store.mutateRow(orders, Buffer.from('row-1'), [{ type: 'set', family: 'meta', column: Buffer.from('by'), value: Buffer.from('user4'), timestampMicros: 4000n }], options());
      const { value } = await events.next();
      expect(value).to.deep.include({ type: 'change', position: 'e1.1' });
      expect(value?.type === 'change' ? value.change.key.toString() : undefined).to.equal('row-1');
    } finally {
      abort.abort();
      await events.return?.();
    }
  });
});
