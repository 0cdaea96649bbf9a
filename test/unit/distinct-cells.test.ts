import { expect } from 'chai';
import { requireDistinctCells } from '../../src/http/v2/mapping.ts';
import { ApiError } from '../../src/service/errors.ts';
import type { MutationInput } from '../../src/service/rows.ts';
import { TurnCounter } from '../support/turns.ts';

const set = (column: string, timestampMicros?: bigint): MutationInput => ({ type: 'set', family: 'cf', column: Buffer.from(column), value: Buffer.from('v'), timestampMicros });

describe('requireDistinctCells (v2 writes)', () => {
  it('refuses a second cell of the same family, column and timestamp, naming both', async () => {
    const cells = [set('a'), set('b'), set('a', 5n), { type: 'deleteRow' } as const, set('a')];
    const error = await requireDistinctCells(cells).then(
      () => undefined,
      (refused: unknown) => refused,
    );
    expect(error).to.be.instanceOf(ApiError);
    expect((error as ApiError).code).to.equal('VALIDATION_FAILED');
    expect((error as ApiError).extensions).to.deep.equal({ errors: [{ path: 'cells[4]', message: 'cells[4] writes the same column and timestamp as cells[0]' }] });
    await requireDistinctCells([set('a'), set('a', 1n), set('a', 2n)]);
  });

  it('checks 100,000 cells in slices, letting other work run, and finds a repeat at the end', async function () {
    this.timeout(60_000);
    const cells = Array.from({ length: 100_000 }, (_, i) => set(`column ${i}`));
    cells[99_999] = set('column 7');
    const counter = new TurnCounter();
    const error = await requireDistinctCells(cells).then(
      () => undefined,
      (refused: unknown) => refused,
    );
    const turns = counter.stop();
    expect((error as ApiError).extensions).to.deep.equal({ errors: [{ path: 'cells[99999]', message: 'cells[99999] writes the same column and timestamp as cells[7]' }] });
    expect(turns, 'turns of the event loop while 100,000 cells were checked').to.be.above(1);
  });
});
