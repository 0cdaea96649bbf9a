import { expect } from 'chai';
import { isStoreError } from '../../../src/store/errors.ts';
import type { DataStore, Mutation } from '../../../src/store/store.ts';
import type { DriverHarness } from '../../support/driver-harness.ts';
import { harness as embeddedHarness } from '../../support/harnesses/embedded.ts';

describe('embedded store: a write whose caller has gone', () => {
  let harness: DriverHarness;
  let store: DataStore;
  const ref = { instance: 'local', table: 'gone' };
  const cell = (value: string): Mutation => ({ type: 'set', family: 'cf', column: Buffer.from('c'), value: Buffer.from(value), timestampMicros: 1_000_000n });
  const latest = async (key: string) => (await store.readRows(ref, [Buffer.from(key)], { versions: 1 }, options()))[0]?.cells ?? null;
  const options = () => ({ deadline: Date.now() + 5000 });

  before(async function () {
    harness = await embeddedHarness.make(this);
    store = await harness.open(['local']);
    await store.createTable(ref, [{ name: 'cf' }], options());
  });
  after(async () => {
    await harness.close(store);
  });

  it('is skipped when the caller goes while it waits for the group commit; the others of the batch commit', async () => {
    const controller = new AbortController();
    // Both are queued for the same commit (the next turn of the event loop); one caller then leaves.
    const abandoned = store.mutateRow(ref, Buffer.from('abandoned'), [cell('a')], { ...options(), signal: controller.signal });
    const kept = store.mutateRow(ref, Buffer.from('kept'), [cell('k')], options());
    controller.abort();

    const [abandonedOutcome, keptOutcome] = await Promise.allSettled([abandoned, kept]);
    expect(abandonedOutcome.status).to.equal('rejected');
    const reason = (abandonedOutcome as PromiseRejectedResult).reason as Error;
    expect(isStoreError(reason, 'DEADLINE_EXCEEDED') && reason.message).to.contain('caller disconnected');
    expect(keptOutcome.status).to.equal('fulfilled');

    expect(await latest('abandoned')).to.equal(null);
    expect((await latest('kept'))?.[0]?.value.toString()).to.equal('k');
  });
});
