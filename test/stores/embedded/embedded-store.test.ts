import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { expect } from 'chai';
import { isStoreError } from '../../../src/store/errors.ts';
import { COPY_PIECE_BYTES } from '../../../src/store/embedded/codec.ts';
import { DATABASE_FILE, EmbeddedStore } from '../../../src/store/embedded/embedded-store.ts';
import type { CallOptions, Mutation } from '../../../src/store/store.ts';

/** What the conformance suite cannot see through HTTP: group commit, closing, schema versions. */
describe('EmbeddedStore', () => {
  let dataDir: string;
  let store: EmbeddedStore;
  const ref = { instance: 'local', table: 't' };
  const later = () => ({ deadline: Date.now() + 5000 });
  const cell = (family: string, value: string): Mutation => ({
    type: 'set',
    family,
    column: Buffer.from('q'),
    value: Buffer.from(value),
    timestampMicros: 1_000n,
  });
  const writeRow = (key: Buffer, cells: Mutation[], options: CallOptions) => store.mutateRow(ref, key, cells, options);
  /** The latest cells of a row, or null. */
  const readRow = async (key: Buffer, options: CallOptions) => (await store.readRows(ref, [key], { versions: 1 }, options))[0]?.cells ?? null;
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
    await store.createTable(ref, [{ name: 'cf' }], later());
  });
  afterEach(async () => {
    await store.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('commits the writes of one turn together, failing only the one that is wrong', async () => {
    const results = await Promise.allSettled([
      writeRow(Buffer.from('a'), [cell('cf', 'a')], later()),
      writeRow(Buffer.from('b'), [cell('cf', 'b'), cell('nope', 'b')], later()),
      writeRow(Buffer.from('c'), [cell('cf', 'c')], later()),
    ]);
    expect(results.map((result) => result.status)).to.deep.equal(['fulfilled', 'rejected', 'fulfilled']);
    expect(isStoreError((results[1] as PromiseRejectedResult).reason, 'NOT_FOUND')).to.equal(true);
    expect(await readRow(Buffer.from('b'), later())).to.equal(null);
    expect((await readRow(Buffer.from('c'), later()))?.[0]?.value.toString()).to.equal('c');
  });

  it('stores whole a tall value it copied into its message a piece at a time, with the cells around it', async () => {
    const value = Buffer.from(Array.from({ length: 4 * COPY_PIECE_BYTES + 1 }, (_, index) => index % 251));
    const set = (column: string, bytes: Buffer): Mutation => ({ type: 'set', family: 'cf', column: Buffer.from(column), value: bytes, timestampMicros: 1_000n });
    await writeRow(Buffer.from('tall'), [set('a', Buffer.from('before')), set('b', value), set('c', Buffer.from('after'))], later());
    const cells = await readRow(Buffer.from('tall'), later());
    expect(cells?.map((each) => each.column.toString())).to.deep.equal(['a', 'b', 'c']);
    expect(cells?.[1]?.value.equals(value)).to.equal(true);
    expect(cells?.[2]?.value.toString()).to.equal('after');
  });

  it('decides equals on a tall value and appends a tall value, each copied into its message a piece at a time', async () => {
    const value = Buffer.from(Array.from({ length: 2 * COPY_PIECE_BYTES + 1 }, (_, index) => index % 251));
    const key = Buffer.from('tall');
    await writeRow(key, [{ type: 'set', family: 'cf', column: Buffer.from('q'), value, timestampMicros: 1_000n }], later());
    const equals = (bytes: Buffer) => ({ type: 'columnEquals' as const, family: 'cf', column: Buffer.from('q'), value: bytes });
    const differing = Buffer.from(value);
    differing[COPY_PIECE_BYTES + 7] = 255;
    expect(await store.checkAndMutateRow(ref, key, { conditions: [equals(differing)], mutations: [cell('cf', 'x')], otherwise: [] }, later())).to.equal(false);
    expect(await store.checkAndMutateRow(ref, key, { conditions: [equals(value)], mutations: [], otherwise: [cell('cf', 'x')] }, later())).to.equal(true);
    const [appended] = (await store.readModifyWriteRow(ref, key, [{ type: 'append', family: 'cf', column: Buffer.from('q'), value }], later())).cells;
    expect(appended?.value.equals(Buffer.concat([value, value]))).to.equal(true);
    expect((await readRow(key, later()))?.[0]?.value.equals(Buffer.concat([value, value]))).to.equal(true);
  });

  it('skips a write whose deadline passed before its turn, with DEADLINE_EXCEEDED', async () => {
    const error = await rejection(writeRow(Buffer.from('late'), [cell('cf', 'x')], { deadline: Date.now() - 1 }));
    expect(isStoreError(error, 'DEADLINE_EXCEEDED')).to.equal(true);
    expect(await readRow(Buffer.from('late'), later())).to.equal(null);
  });

  it('commits queued writes on close, and answers UNAVAILABLE afterwards', async () => {
    const queued = writeRow(Buffer.from('queued'), [cell('cf', 'kept')], later());
    await store.close();
    await queued;
    expect(isStoreError(await rejection(readRow(Buffer.from('queued'), later())), 'UNAVAILABLE')).to.equal(true);
    expect(isStoreError(await rejection(writeRow(Buffer.from('x'), [cell('cf', 'x')], later())), 'UNAVAILABLE')).to.equal(true);

    store = await EmbeddedStore.open({ dataDir });
    expect((await readRow(Buffer.from('queued'), later()))?.[0]?.value.toString()).to.equal('kept');
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
