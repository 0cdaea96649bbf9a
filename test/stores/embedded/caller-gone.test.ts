import { expect } from 'chai';
import { isStoreError } from '../../../src/store/errors.ts';
import type { DataStore } from '../../../src/store/legacy-store.ts';
import { embeddedHarness } from '../../support/stores.ts';

describe('embedded store: a write whose caller has gone', () => {
  let store: DataStore;
  const ref = { instance: 'local', table: 'gone' };
  const cell = (value: string) => ({ family: 'cf', qualifier: Buffer.from('c'), value: Buffer.from(value), timestampMicros: 1_000_000n });
  const options = () => ({ deadline: Date.now() + 5000 });

  before(async function () {
    store = await embeddedHarness(this).open(['local']);
    await store.createTable(ref, ['cf'], options());
  });
  after(async () => {
    await store.close();
  });

  it('is skipped when the caller goes while it waits for the group commit; the others of the batch commit', async () => {
    const controller = new AbortController();
    // Both are queued for the same commit (the next turn of the event loop); one caller then leaves.
    const abandoned = store.writeRow(ref, Buffer.from('abandoned'), [cell('a')], { ...options(), signal: controller.signal });
    const kept = store.writeRow(ref, Buffer.from('kept'), [cell('k')], options());
    controller.abort();

    const [abandonedOutcome, keptOutcome] = await Promise.allSettled([abandoned, kept]);
    expect(abandonedOutcome.status).to.equal('rejected');
    const reason = (abandonedOutcome as PromiseRejectedResult).reason as Error;
    expect(isStoreError(reason, 'DEADLINE_EXCEEDED') && reason.message).to.contain('caller disconnected');
    expect(keptOutcome.status).to.equal('fulfilled');

    expect(await store.readRow(ref, Buffer.from('abandoned'), options())).to.equal(null);
    expect((await store.readRow(ref, Buffer.from('kept'), options()))?.[0]?.value.toString()).to.equal('k');
  });
});
