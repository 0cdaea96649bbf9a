import { status } from '@grpc/grpc-js';
import { expect } from 'chai';
import { checkCallable } from '../../src/store/bigtable/calls.ts';
import { applyEntries } from '../../src/store/bigtable/mutate-rows.ts';
import { StoreError } from '../../src/store/errors.ts';

/**
 * The race of a timer that fires late on a busy process cannot be caused on purpose against the
 * emulator (test/stores/bigtable/v2-faults.test.ts covers the rest there): here the deadline runs
 * out between the backoff and the next attempt's call, which checks it before starting.
 */
describe('applyEntries: MutateRows sent again for entries that failed transiently', () => {
  it('keeps the transient errors, and the entries applied, when the deadline passes before a later attempt starts', async () => {
    const options = { deadline: Date.now() + 1000 };
    const sent: number[][] = [];
    const outcome = await applyEntries(
      [0, 1, 2],
      // eslint-disable-next-line @typescript-eslint/require-await -- a stand-in for the call, answering at once
      async function* (indexes) {
        sent.push([...indexes]);
        if (sent.length === 1) {
          yield { entries: [{ index: 0, status: {} }, { index: 1, status: { code: status.UNAVAILABLE, message: 'injected' } }, { index: 2, status: {} }] };
          return;
        }
        // The backoff found time left, but the process ran late: no time is left when the call would start.
        checkCallable({ deadline: Date.now() - 1 });
      },
      options,
    );
    expect(sent).to.deep.equal([[0, 1, 2], [1]]);
    expect(outcome.answered).to.equal(true);
    expect([...outcome.results].map(([index, error]) => [index, (error as { code?: number } | null)?.code ?? null])).to.deep.equal([
      [0, null],
      [1, status.UNAVAILABLE],
      [2, null],
    ]);
  });

  it('still throws a deadline that passed before the first attempt: nothing was sent', async () => {
    const failure = await applyEntries(
      [0],
      // eslint-disable-next-line @typescript-eslint/require-await, require-yield -- a call that never starts
      async function* () {
        checkCallable({ deadline: Date.now() - 1 });
      },
      { deadline: Date.now() + 1000 },
    ).catch((error: unknown) => error);
    expect(failure).to.be.instanceOf(StoreError);
    expect((failure as StoreError).code).to.equal('DEADLINE_EXCEEDED');
  });
});
