import { expect } from 'chai';
import type { MutationFields } from '../../src/service/mutations.ts';
import { RowService } from '../../src/service/rows.ts';
import type { StoreDirectory } from '../../src/service/stores.ts';
import { EMBEDDED_CAPABILITIES, EMBEDDED_LIMITS } from '../../src/store/embedded/limits.ts';
import type { NamedStore } from '../../src/store/store-set.ts';
import type { DataStore } from '../../src/store/store.ts';

const MIB = 1024 * 1024;
const FIELDS: MutationFields = { key: 'key', mutations: 'cells', field: (index, name) => `cells[${index}].${name}` };

/**
 * A row's mutations reach the store in the turn they were checked in, unless the row is tall: its
 * value was just made into bytes in one go, and the store may copy it in one go too.
 */
describe('RowService: a tall row goes to the store in a turn of its own', () => {
  /** Writes a row with one value of `bytes`; answers whether another turn of the event loop ran before the store was called. */
  async function turnBeforeStore(bytes: number): Promise<boolean> {
    let turned = false;
    let turnedAtStore: boolean | undefined;
    const store = {
      limits: EMBEDDED_LIMITS,
      capabilities: EMBEDDED_CAPABILITIES,
      mutateRow: () => {
        turnedAtStore = turned;
        return Promise.resolve();
      },
    } as unknown as DataStore;
    const named: NamedStore = { name: 'embedded', driver: 'embedded', instances: ['local'], store };
    const rows = new RowService({ stores: { instance: () => named } as unknown as StoreDirectory, storeTimeoutMs: 5000 });
    setImmediate(() => (turned = true));
    await rows.mutate({ store: 'embedded', instance: 'local', table: 't' }, Buffer.from('k'), [{ type: 'set', family: 'cf', column: Buffer.from('c'), value: Buffer.alloc(bytes) }], FIELDS);
    return turnedAtStore as boolean;
  }

  it('gives a row of 4 MiB or more to the store in a later turn', async () => {
    expect(await turnBeforeStore(4 * MIB)).to.equal(true);
  });

  it('gives a smaller row to the store in the same turn', async () => {
    expect(await turnBeforeStore(4 * MIB - 100)).to.equal(false);
  });
});
