import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { expect } from 'chai';
import { isStoreError } from '../../../src/store/errors.ts';
import { DATABASE_FILE, EmbeddedStore } from '../../../src/store/embedded/embedded-store.ts';

/**
 * Who may open a data directory, within one process (across processes, with SIGKILL:
 * durability.test.ts).
 */
describe('embedded store: the data directory lock', () => {
  let dataDir: string;
  const options = () => ({ deadline: Date.now() + 10_000 });
  const refusal = async (opening: Promise<EmbeddedStore>) => {
    try {
      const store = await opening;
      await store.close();
    } catch (error) {
      return error;
    }
    throw new Error('opened');
  };

  beforeEach(() => {
    dataDir = mkdtempSync(join(tmpdir(), 'kvcrud-lock-'));
  });
  afterEach(() => {
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('refuses a second store on the same directory while the first is open, and lets one open after it closed', async () => {
    const first = await EmbeddedStore.open({ dataDir });
    try {
      const error = await refusal(EmbeddedStore.open({ dataDir }));
      expect(isStoreError(error, 'UNAVAILABLE') && error.message).to.equal(`data directory ${dataDir} is in use by another process`);
      await first.createTable({ instance: 'local', table: 't' }, [{ name: 'cf' }], options());
    } finally {
      await first.close();
    }
    const second = await EmbeddedStore.open({ dataDir });
    expect(await second.listTables('local', options())).to.deep.equal(['t']);
    await second.close();
  });

  it('refuses a directory whose database a kvcrud from before the lock file holds exclusively', async () => {
    await (await EmbeddedStore.open({ dataDir })).close();
    // What the previous version did on open, and kept until it closed.
    const holder = new DatabaseSync(join(dataDir, DATABASE_FILE), { timeout: 0 });
    holder.exec('PRAGMA locking_mode = EXCLUSIVE; PRAGMA journal_mode = WAL; BEGIN IMMEDIATE; COMMIT');
    try {
      const error = await refusal(EmbeddedStore.open({ dataDir }));
      expect(isStoreError(error, 'UNAVAILABLE') && error.message).to.equal(`data directory ${dataDir} is in use by another process`);
    } finally {
      holder.close();
    }
    await (await EmbeddedStore.open({ dataDir })).close();
  });
});
