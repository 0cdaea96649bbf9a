import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { setTimeout as sleep } from 'node:timers/promises';
import { expect } from 'chai';
import { DATABASE_FILE, EmbeddedStore } from '../../../src/store/embedded/embedded-store.ts';
import type { Mutation, Row } from '../../../src/store/store.ts';

/**
 * Retention as the embedded store keeps it on disk: what a policy removes is gone from the database
 * in the transaction of the write that made it surplus or expired, and what has expired since is
 * never read, even while it is still on disk.
 */
describe('embedded store: retention on disk', () => {
  let dataDir: string;
  let store: EmbeddedStore;
  let disk: DatabaseSync;
  const ref = { instance: 'local', table: 'retained' };
  const options = () => ({ deadline: Date.now() + 10_000 });
  const nowMicros = () => BigInt(Date.now()) * 1000n;
  const set = (family: string, value: string, timestampMicros: bigint, column = 'c'): Mutation => ({
    type: 'set',
    family,
    column: Buffer.from(column),
    value: Buffer.from(value),
    timestampMicros,
  });
  const onDisk = (family: string) =>
    (disk.prepare('SELECT count(*) AS n FROM cells WHERE family = ?').get(family) as { n: number }).n;
  const values = (row: Row | null | undefined) => row?.cells.map((cell) => cell.value.toString()) ?? null;
  const read = async (key: string, versions = 100) => (await store.readRows(ref, [Buffer.from(key)], { versions }, options()))[0];

  beforeEach(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'kvcrud-retention-'));
    store = await EmbeddedStore.open({ dataDir });
    await store.createTable(
      ref,
      [{ name: 'all' }, { name: 'two', maxVersions: 2 }, { name: 'young', maxAgeSeconds: 2 }, { name: 'both', maxVersions: 1, maxAgeSeconds: 3600 }],
      options(),
    );
    disk = new DatabaseSync(join(dataDir, DATABASE_FILE), { readOnly: true });
  });
  afterEach(async () => {
    disk.close();
    await store.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('keeps only the newest maxVersions versions on disk, removing the surplus with the write that made it', async () => {
    for (let version = 1n; version <= 5n; version++) {
      await store.mutateRow(ref, Buffer.from('r'), [set('two', `v${version}`, version * 1000n)], options());
      expect(onDisk('two')).to.equal(Number(version < 2n ? version : 2n));
    }
    expect(values(await read('r'))).to.deep.equal(['v5', 'v4']);
  });

  it('drops at once a version written older than the ones kept', async () => {
    await store.mutateRow(ref, Buffer.from('r'), [set('two', 'new', 9000n), set('two', 'newer', 10_000n)], options());
    await store.mutateRow(ref, Buffer.from('r'), [set('two', 'old', 1000n)], options());
    expect(onDisk('two')).to.equal(2);
    expect(values(await read('r'))).to.deep.equal(['newer', 'new']);
  });

  it('trims each column on its own, and other families not at all', async () => {
    const mutations: Mutation[] = [];
    for (let version = 1n; version <= 4n; version++) {
      mutations.push(set('two', `x${version}`, version * 1000n, 'x'), set('two', `y${version}`, version * 1000n, 'y'), set('all', `a${version}`, version * 1000n));
    }
    await store.mutateRow(ref, Buffer.from('r'), mutations, options());
    expect(onDisk('two')).to.equal(4);
    expect(onDisk('all')).to.equal(4);
    expect(values(await read('r'))).to.deep.equal(['a4', 'a3', 'a2', 'a1', 'x4', 'x3', 'y4', 'y3']);
  });

  it('removes versions older than maxAgeSeconds with the write to their column', async () => {
    const now = nowMicros();
    await store.mutateRow(ref, Buffer.from('r'), [set('young', 'ancient', now - 60_000_000n - (now % 1000n))], options());
    expect(onDisk('young')).to.equal(0);
    await store.mutateRow(ref, Buffer.from('r'), [set('both', 'ancient', now - 7_200_000_000n - (now % 1000n))], options());
    expect(onDisk('both')).to.equal(0);
    expect(await read('r')).to.equal(null);
  });

  it('never reads a version once it is older than maxAgeSeconds, though no write has removed it yet', async () => {
    const written = nowMicros() - 200_000n;
    const timestamp = written - (written % 1000n);
    await store.mutateRow(ref, Buffer.from('r'), [set('young', 'fresh', timestamp)], options());
    expect(values(await read('r'))).to.deep.equal(['fresh']);

    // maxAgeSeconds is 2: wait until the version is older than that.
    await sleep(Number((timestamp + 2_300_000n - nowMicros()) / 1000n));
    expect(await read('r')).to.equal(null);
    expect(onDisk('young')).to.equal(1);
    const scanned: Row[] = [];
    for await (const row of store.scanRows(ref, { range: {}, reverse: false, limit: 10, versions: 1 }, options())) scanned.push(row);
    expect(scanned).to.deep.equal([]);
  });

  it('neither checks nor increments a version expired but still on disk, and the increment removes it', async () => {
    const written = nowMicros() - 200_000n;
    const timestamp = written - (written % 1000n);
    const counter = Buffer.alloc(8);
    counter.writeBigInt64BE(100n);
    await store.mutateRow(ref, Buffer.from('r'), [{ type: 'set', family: 'young', column: Buffer.from('c'), value: counter, timestampMicros: timestamp }], options());
    await sleep(Number((timestamp + 2_300_000n - nowMicros()) / 1000n));
    expect(onDisk('young')).to.equal(1);
    const check = { conditions: [{ type: 'columnExists' as const, family: 'young', column: Buffer.from('c'), exists: true }], mutations: [set('all', 'seen', timestamp)], otherwise: [set('all', 'gone', timestamp)] };
    expect(await store.checkAndMutateRow(ref, Buffer.from('r'), check, options())).to.equal(false);
    const [cell] = (await store.readModifyWriteRow(ref, Buffer.from('r'), [{ type: 'increment', family: 'young', column: Buffer.from('c'), amount: 1n }], options())).cells;
    expect(cell?.value.readBigInt64BE()).to.equal(1n);
    expect(onDisk('young')).to.equal(1);
    expect((disk.prepare("SELECT hex(value) AS v FROM cells WHERE family = 'young'").get() as { v: string }).v).to.equal('0000000000000001');
  });

  it('keeps every version of a family without a policy', async () => {
    for (let version = 1n; version <= 5n; version++) {
      await store.mutateRow(ref, Buffer.from('r'), [set('all', `v${version}`, version * 1000n)], options());
    }
    expect(onDisk('all')).to.equal(5);
    expect(values(await read('r', 3))).to.deep.equal(['v5', 'v4', 'v3']);
  });

  it('applies the mutations of a row in order, trimming what is left at the end', async () => {
    await store.mutateRow(
      ref,
      Buffer.from('r'),
      [set('two', 'gone', 1000n), { type: 'deleteRow' }, set('two', 'a', 2000n), set('two', 'b', 3000n), set('two', 'c', 4000n)],
      options(),
    );
    expect(onDisk('two')).to.equal(2);
    expect(values(await read('r'))).to.deep.equal(['c', 'b']);
  });
});
