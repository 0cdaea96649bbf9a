import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { expect } from 'chai';
import { isStoreError } from '../../../src/store/errors.ts';
import { DATABASE_FILE, EmbeddedStore } from '../../../src/store/embedded/embedded-store.ts';
import type { CellWrite } from '../../../src/store/legacy-store.ts';

/** What the conformance suite cannot see through HTTP: group commit, closing, schema versions. */
describe('EmbeddedStore', () => {
  let dataDir: string;
  let store: EmbeddedStore;
  const ref = { instance: 'local', table: 't' };
  const later = () => ({ deadline: Date.now() + 5000 });
  const cell = (family: string, value: string): CellWrite => ({
    family,
    qualifier: Buffer.from('q'),
    value: Buffer.from(value),
    timestampMicros: 1_000n,
  });
  const rejection = async (promise: Promise<unknown>) => {
    try {
      await promise;
    } catch (error) {
      return error;
    }
    throw new Error('resolved');
  };

  beforeEach(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'kvcrud-embedded-unit-'));
    store = await EmbeddedStore.open({ dataDir });
    await store.createTable(ref, ['cf'], later());
  });
  afterEach(async () => {
    await store.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('commits the writes of one turn together, failing only the one that is wrong', async () => {
    const results = await Promise.allSettled([
      store.writeRow(ref, Buffer.from('a'), [cell('cf', 'a')], later()),
      store.writeRow(ref, Buffer.from('b'), [cell('cf', 'b'), cell('nope', 'b')], later()),
      store.writeRow(ref, Buffer.from('c'), [cell('cf', 'c')], later()),
    ]);
    expect(results.map((result) => result.status)).to.deep.equal(['fulfilled', 'rejected', 'fulfilled']);
    expect(isStoreError((results[1] as PromiseRejectedResult).reason, 'NOT_FOUND')).to.equal(true);
    expect(await store.readRow(ref, Buffer.from('b'), later())).to.equal(null);
    expect((await store.readRow(ref, Buffer.from('c'), later()))?.[0]?.value.toString()).to.equal('c');
  });

  it('skips a write whose deadline passed before its turn, with DEADLINE_EXCEEDED', async () => {
    const error = await rejection(store.writeRow(ref, Buffer.from('late'), [cell('cf', 'x')], { deadline: Date.now() - 1 }));
    expect(isStoreError(error, 'DEADLINE_EXCEEDED')).to.equal(true);
    expect(await store.readRow(ref, Buffer.from('late'), later())).to.equal(null);
  });

  it('commits queued writes on close, and answers UNAVAILABLE afterwards', async () => {
    const queued = store.writeRow(ref, Buffer.from('queued'), [cell('cf', 'kept')], later());
    await store.close();
    await queued;
    expect(isStoreError(await rejection(store.readRow(ref, Buffer.from('queued'), later())), 'UNAVAILABLE')).to.equal(true);
    expect(isStoreError(await rejection(store.writeRow(ref, Buffer.from('x'), [cell('cf', 'x')], later())), 'UNAVAILABLE')).to.equal(true);

    store = await EmbeddedStore.open({ dataDir });
    expect((await store.readRow(ref, Buffer.from('queued'), later()))?.[0]?.value.toString()).to.equal('kept');
  });

  it('refuses a database written by a newer schema version', async () => {
    await store.close();
    const db = new DatabaseSync(join(dataDir, DATABASE_FILE));
    db.exec('PRAGMA user_version = 99');
    db.close();
    const error = await rejection(EmbeddedStore.open({ dataDir }));
    expect(isStoreError(error, 'INTERNAL') && error.message).to.match(/schema version 99/);
    // afterEach closes `store`: give it a fresh one.
    rmSync(dataDir, { recursive: true, force: true });
    dataDir = mkdtempSync(join(tmpdir(), 'kvcrud-embedded-unit-'));
    store = await EmbeddedStore.open({ dataDir });
  });
});
