import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { DATABASE_FILE, EmbeddedStore } from '../../../src/store/embedded/embedded-store.ts';
import type { ModifyRule } from '../../../src/store/store.ts';

const run = promisify(execFile);

/**
 * Counters and conditions as SQLite's own shell (sqlite3) sees them, beside the running store:
 * a counter is the 8 big-endian bytes of a 64-bit two's-complement integer in the cells table,
 * and a condition is decided on the database as it is when the call runs, whoever wrote it.
 */
describe('embedded store: counters and conditions through the sqlite3 shell', () => {
  let dataDir: string;
  let store: EmbeddedStore;
  const ref = { instance: 'local', table: 'counters' };
  const key = Buffer.from('row');
  const options = () => ({ deadline: Date.now() + 10_000 });
  const increment = (column: string, amount: bigint): ModifyRule => ({ type: 'increment', family: 'stats', column: Buffer.from(column), amount });

  /** Runs SQL in the sqlite3 shell on the store's database; returns its output lines. */
  const sqlite3 = async (sql: string, ...flags: string[]) => {
    const { stdout } = await run('sqlite3', [...flags, '-cmd', '.timeout 5000', join(dataDir, DATABASE_FILE), sql], { timeout: 30_000 });
    return stdout.trim().split('\n');
  };
  const cellWhere = (column: string) =>
    `table_id = (SELECT id FROM tables WHERE instance = 'local' AND name = 'counters') AND row_key = CAST('row' AS BLOB)
     AND family = 'stats' AND qualifier = CAST('${column}' AS BLOB)`;

  before(async function () {
    try {
      await run('sqlite3', ['-version']);
    } catch {
      this.skip();
    }
  });
  beforeEach(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'kvcrud-counters-'));
    store = await EmbeddedStore.open({ dataDir });
    await store.createTable(ref, [{ name: 'stats' }], options());
  });
  afterEach(async () => {
    await store.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('stores a counter incremented through the store as the 8 big-endian bytes sqlite3 reads', async () => {
    await store.readModifyWriteRow(ref, key, [increment('views', 41n)], options());
    await store.readModifyWriteRow(ref, key, [increment('views', 1n)], options());
    await store.readModifyWriteRow(ref, key, [increment('debt', -2n)], options());
    await store.readModifyWriteRow(ref, key, [increment('max', 2n ** 63n - 1n), increment('max', 1n)], options());
    const latest = async (column: string) => (await sqlite3(`SELECT hex(value), length(value) FROM cells WHERE ${cellWhere(column)} ORDER BY ts DESC LIMIT 1`, '-readonly'))[0];
    expect(await latest('views')).to.equal('000000000000002A|8');
    expect(await latest('debt')).to.equal('FFFFFFFFFFFFFFFE|8');
    // 2^63 - 1, plus 1, wraps to -2^63.
    expect(await latest('max')).to.equal('8000000000000000|8');
  });

  it('increments a counter sqlite3 wrote, and decides a condition on a value sqlite3 wrote', async () => {
    const now = BigInt(Date.now()) * 1000n;
    await sqlite3(
      `INSERT INTO cells (table_id, row_key, family, qualifier, ts, value)
         SELECT id, CAST('row' AS BLOB), 'stats', CAST('views' AS BLOB), ${now}, x'00000000000000ff' FROM tables WHERE name = 'counters';
       INSERT INTO cells (table_id, row_key, family, qualifier, ts, value)
         SELECT id, CAST('row' AS BLOB), 'stats', CAST('state' AS BLOB), ${now}, CAST('draft' AS BLOB) FROM tables WHERE name = 'counters';`,
    );
    const [views] = (await store.readModifyWriteRow(ref, key, [increment('views', 1n)], options())).cells;
    expect(views?.value.readBigInt64BE()).to.equal(256n);

    const publish = (expected: string) =>
      store.checkAndMutateRow(
        ref,
        key,
        {
          conditions: [{ type: 'columnEquals', family: 'stats', column: Buffer.from('state'), value: Buffer.from(expected) }],
          mutations: [{ type: 'set', family: 'stats', column: Buffer.from('state'), value: Buffer.from('published'), timestampMicros: now }],
          otherwise: [],
        },
        options(),
      );
    expect(await publish('published')).to.equal(false);
    expect(await publish('draft')).to.equal(true);
    expect(await sqlite3(`SELECT CAST(value AS TEXT) FROM cells WHERE ${cellWhere('state')}`, '-readonly')).to.deep.equal(['published']);
    expect(await sqlite3(`SELECT hex(value) FROM cells WHERE ${cellWhere('views')} ORDER BY ts DESC LIMIT 1`, '-readonly')).to.deep.equal(['0000000000000100']);
  });
});
