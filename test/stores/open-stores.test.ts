import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { StoreOpenError, closeStores, openStores } from '../../src/store/open-store.ts';
import type { StoreConfig } from '../../src/store/stores-config.ts';
import { createLogger } from '../../src/telemetry/logger.ts';

const logger = createLogger('silent');

describe('openStores', () => {
  let directory: string;
  beforeEach(() => {
    directory = mkdtempSync(join(tmpdir(), 'kvcrud-open-'));
  });
  afterEach(() => rmSync(directory, { recursive: true, force: true }));

  const embedded = (name: string, dataDir: string): StoreConfig => ({ name, driver: 'embedded', instances: ['local'], settings: { dataDir } });

  it('opens every store through its driver, in configuration order, with the default among them', async () => {
    const a = embedded('a', join(directory, 'a'));
    const b = embedded('b', join(directory, 'b'));
    const stores = await openStores({ default: b, all: [a, b] }, { logger });
    try {
      expect(stores.all.map((named) => [named.name, named.driver, named.instances])).to.deep.equal([
        ['a', 'embedded', ['local']],
        ['b', 'embedded', ['local']],
      ]);
      expect(stores.default).to.equal(stores.get('b'));
      expect(stores.get('c')).to.equal(undefined);
      await stores.get('a')?.store.checkHealth({ deadline: Date.now() + 1000 });
    } finally {
      await closeStores(stores);
    }
  });

  it('names the store it cannot open, and closes the ones it opened before', async () => {
    const shared = join(directory, 'shared');
    const first = embedded('first', shared);
    // The configuration refuses two stores on one directory; here the lock is what stops it.
    const second = embedded('second', shared);
    let error: unknown;
    try {
      await openStores({ default: first, all: [first, second] }, { logger });
    } catch (caught) {
      error = caught;
    }
    expect(error).to.be.instanceOf(StoreOpenError);
    expect((error as StoreOpenError).store).to.equal('second');
    expect((error as StoreOpenError).message).to.match(/^cannot open the second \(embedded\) store: data directory .* is in use by another process$/);
    // The first store released the directory: it opens again.
    const again = await openStores({ default: first, all: [first] }, { logger });
    await closeStores(again);
  });
});
