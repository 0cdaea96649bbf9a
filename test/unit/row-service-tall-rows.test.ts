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
 * A row's mutations reach the store in the slice they were checked in, unless the row is tall: its
 * value was just made into bytes in one go, and the store may copy it in one go too, so the
 * service yields first.
 */
describe('RowService: a tall row goes to the store after a yield, in a slice of its own', () => {
  /** Writes a row with one value of `bytes`; answers whether the service yielded to the event loop before the store was called. */
  async function yieldedBeforeStore(bytes: number): Promise<boolean> {
    let yielded = false;
    let yieldedAtStore: boolean | undefined;
    const store = {
      limits: EMBEDDED_LIMITS,
      capabilities: EMBEDDED_CAPABILITIES,
      mutateRow: () => {
        yieldedAtStore = yielded;
        return Promise.resolve();
      },
    } as unknown as DataStore;
    const named: NamedStore = { name: 'embedded', driver: 'embedded', instances: ['local'], store };
    const rows = new RowService({ stores: { instance: () => named } as unknown as StoreDirectory, storeTimeoutMs: 5000 });
    setImmediate(() => (yielded = true));
    await rows.mutate({ store: 'embedded', instance: 'local', table: 't' }, Buffer.from('k'), [{ type: 'set', family: 'cf', column: Buffer.from('c'), value: Buffer.alloc(bytes) }], FIELDS);
    return yieldedAtStore as boolean;
  }

  it('gives a row of 4 MiB or more to the store after a yield', async () => {
    expect(await yieldedBeforeStore(4 * MIB)).to.equal(true);
  });

  it('gives a smaller row to the store in the same slice', async () => {
    expect(await yieldedBeforeStore(4 * MIB - 100)).to.equal(false);
  });
});
