import { expect } from 'chai';
import fc from 'fast-check';
import { randomBytes } from 'node:crypto';
import { StoreError } from '../../../src/store/errors.ts';
import type { CallOptions, Condition, DataStore, FamilySpec, Micros, ModifyRule, Mutation, Row, TableRef } from '../../../src/store/store.ts';
import { ContractModel } from '../../conformance/driver/model.ts';
import { spannerSide } from '../../support/spanner-sql.ts';

type Operation =
  | { readonly kind: 'mutateRow'; readonly key: Buffer; readonly mutations: readonly Mutation[] }
  | { readonly kind: 'checkAndMutateRow'; readonly key: Buffer; readonly conditions: readonly Condition[]; readonly mutations: readonly Mutation[]; readonly otherwise: readonly Mutation[] }
  | { readonly kind: 'readModifyWriteRow'; readonly key: Buffer; readonly rules: readonly ModifyRule[] };

const HOUR_MICROS = 3_600_000_000n;
const FAMILIES: FamilySpec[] = [{ name: 'a' }, { name: 'one', maxVersions: 1 }, { name: 'hour', maxVersions: 2, maxAgeSeconds: 3600 }];
const KEYS = ['r', 'r\u0000'].map((key) => Buffer.from(key, 'latin1'));
const COLUMNS = ['x', ''].map((column) => Buffer.from(column));
const counter = (value: number) => {
  const bytes = Buffer.alloc(8);
  bytes.writeBigInt64BE(BigInt(value));
  return bytes;
};
const VALUES = [Buffer.from(''), Buffer.from('v'), Buffer.from('w'), counter(1), counter(2)];

/**
 * checkAndMutateRow and readModifyWriteRow on Spanner, against the contract's model
 * (test/conformance/driver/model.ts), in random sequences mixed with mutateRow: every answer the
 * same, and every row's latest live values the same after each call. Timestamps of sets are an
 * hour and more in the past or ten minutes in the past (expired or live under the hour family's
 * maxAge, whichever clock decides); counters and appends take the clock, which store and model
 * read each on its own, so their versions are compared by value.
 */
describe('spanner: conditional mutations and counters against the contract model', function () {
  this.timeout(600_000);
  const side = spannerSide();
  const instance = `mdl${randomBytes(4).toString('hex')}`;
  let store: DataStore;
  const call = (): CallOptions => ({ deadline: Date.now() + 60_000 });

  before(async function () {
    store = await (await side.harness.make(this)).open([instance]);
  });
  after(async () => {
    await store.close();
    await side.close();
  });

  const now = BigInt(Date.now()) * 1000n;
  const timestamp = fc.constantFrom(now - 2n * HOUR_MICROS, now - 2n * HOUR_MICROS + 1n, now - HOUR_MICROS / 6n, now - HOUR_MICROS / 6n + 5n, now - HOUR_MICROS / 6n + 9n);
  const family = fc.constantFrom(...FAMILIES.map((spec) => spec.name));
  const column = fc.constantFrom(...COLUMNS);
  const value = fc.constantFrom(...VALUES);
  const key = fc.constantFrom(...KEYS);
  const mutation: fc.Arbitrary<Mutation> = fc.oneof(
    { weight: 5, arbitrary: fc.record({ type: fc.constant('set' as const), family, column, value, timestampMicros: timestamp }) },
    { weight: 1, arbitrary: fc.record({ type: fc.constant('deleteColumn' as const), family, column }) },
    { weight: 1, arbitrary: fc.record({ type: fc.constant('deleteFamily' as const), family }) },
    { weight: 1, arbitrary: fc.constant({ type: 'deleteRow' as const }) },
  );
  const condition: fc.Arbitrary<Condition> = fc.oneof(
    fc.record({ type: fc.constant('rowExists' as const), exists: fc.boolean() }),
    fc.record({ type: fc.constant('familyExists' as const), family, exists: fc.boolean() }),
    fc.record({ type: fc.constant('columnExists' as const), family, column, exists: fc.boolean() }),
    fc.record({ type: fc.constant('columnEquals' as const), family, column, value }),
  );
  const rule: fc.Arbitrary<ModifyRule> = fc.oneof(
    fc.record({ type: fc.constant('increment' as const), family, column, amount: fc.constantFrom(1n, -1n, 2n ** 63n - 1n) }),
    fc.record({ type: fc.constant('append' as const), family, column, value }),
  );
  const operation: fc.Arbitrary<Operation> = fc.oneof(
    fc.record({ kind: fc.constant('mutateRow' as const), key, mutations: fc.array(mutation, { minLength: 1, maxLength: 3 }) }),
    fc.record({
      kind: fc.constant('checkAndMutateRow' as const),
      key,
      conditions: fc.array(condition, { minLength: 1, maxLength: 2 }),
      mutations: fc.array(mutation, { maxLength: 2 }),
      otherwise: fc.array(mutation, { maxLength: 2 }),
    }),
    fc.record({ kind: fc.constant('readModifyWriteRow' as const), key, rules: fc.array(rule, { minLength: 1, maxLength: 3 }) }),
  );
  /** A call's answer, as the two sides must agree on it: the error's code and reason, or what it resolved to, by value. */
  const answer = async (run: () => unknown): Promise<unknown> => {
    try {
      const result = await run();
      if (typeof result === 'boolean' || result === undefined) return result;
      return showLatest(result as Row);
    } catch (error) {
      if (!(error instanceof StoreError)) throw error;
      return { code: error.code, reason: error.reason, name: error.resourceName };
    }
  };

  it('answers as the model does, and leaves the rows as the model does', async () => {
    let run = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(operation, { minLength: 5, maxLength: 20 }), async (operations) => {
        // Every other table has no family with maxAgeSeconds: a check of existence alone then reads one cell.
        const families = run % 2 === 0 ? FAMILIES : FAMILIES.filter((spec) => spec.maxAgeSeconds === undefined);
        const ref: TableRef = { instance, table: `t${run++}` };
        const model = new ContractModel(store.capabilities);
        await store.createTable(ref, families, call());
        model.createTable(ref, families);
        try {
          for (const [index, op] of operations.entries()) {
            const [got, expected] = await Promise.all([
              answer(() => perform(store, ref, op, call())),
              answer(() => perform(model, ref, op, call())),
            ]);
            expect(got, `call ${index}`).to.deep.equal(expected);
            const stored = await store.readRows(ref, KEYS, { versions: 1 }, call());
            expect(stored.map((row) => showLatest(row)), `rows after call ${index}`).to.deep.equal(model.readRows(ref, KEYS, { versions: 1 }).map((row) => showLatest(row)));
          }
        } finally {
          await store.deleteTable(ref, call());
        }
      }),
      { numRuns: 60, seed: 20_261_201, endOnFailure: true },
    );
  });
});

describe('spanner: checks of existence that read one cell', () => {
  const side = spannerSide();
  const instance = `one${randomBytes(4).toString('hex')}`;
  let store: DataStore;
  const call = (): CallOptions => ({ deadline: Date.now() + 60_000 });

  before(async function () {
    store = await (await side.harness.make(this)).open([instance]);
  });
  after(async () => {
    await store.close();
    await side.close();
  });

  it('decides a family condition next to a row condition on the whole row, not on its first cell', async () => {
    const ref: TableRef = { instance, table: 'mixed' };
    await store.createTable(ref, [{ name: 'a' }, { name: 'b', maxVersions: 1 }], call());
    const key = Buffer.from('row');
    const set = (family: string, value: string): Mutation => ({ type: 'set', family, column: Buffer.from('x'), value: Buffer.from(value), timestampMicros: 1000n });
    await store.mutateRow(ref, key, [set('a', 'first'), set('b', 'second')], call());
    const check = (conditions: Condition[]) => store.checkAndMutateRow(ref, key, { conditions, mutations: [], otherwise: [set('a', 'first')] }, call());
    expect(await check([{ type: 'rowExists', exists: true }, { type: 'familyExists', family: 'b', exists: true }])).to.equal(true);
    expect(await check([{ type: 'rowExists', exists: true }, { type: 'familyExists', family: 'b', exists: false }])).to.equal(false);
    expect(await check([{ type: 'familyExists', family: 'a', exists: true }, { type: 'familyExists', family: 'b', exists: true }])).to.equal(true);
    expect(await check([{ type: 'familyExists', family: 'b', exists: true }])).to.equal(true);
    expect(await check([{ type: 'rowExists', exists: false }])).to.equal(false);
  });
});

interface Side {
  mutateRow(ref: TableRef, key: Buffer, mutations: readonly Mutation[], options: CallOptions): unknown;
  checkAndMutateRow(ref: TableRef, key: Buffer, check: { conditions: readonly Condition[]; mutations: readonly Mutation[]; otherwise: readonly Mutation[] }, options: CallOptions): unknown;
  readModifyWriteRow(ref: TableRef, key: Buffer, rules: readonly ModifyRule[], options: CallOptions): unknown;
}

function perform(side: Side, ref: TableRef, op: Operation, options: CallOptions): unknown {
  switch (op.kind) {
    case 'mutateRow':
      return side.mutateRow(ref, op.key, op.mutations, options);
    case 'checkAndMutateRow':
      // The contract holds no call with both branches empty.
      return side.checkAndMutateRow(ref, op.key, { conditions: op.conditions, mutations: op.mutations, otherwise: op.otherwise.length === 0 && op.mutations.length === 0 ? [{ type: 'deleteRow' }] : op.otherwise }, options);
    case 'readModifyWriteRow':
      return side.readModifyWriteRow(ref, op.key, op.rules, options);
  }
}

/** A row's cells by value; the timestamp only when it is one of the test's (not a clock's). */
function showLatest(row: Row | null): unknown {
  if (row === null) return null;
  return {
    key: row.key.toString('hex'),
    cells: row.cells.map((cell) => `${cell.family}:${cell.column.toString('hex')}=${cell.value.toString('hex')}${clockStamp(cell.timestampMicros) ? '' : `@${cell.timestampMicros}`}`),
  };
}

/** Within a minute of now: a counter's or an append's, taken from a clock. */
function clockStamp(timestamp: Micros): boolean {
  const now = BigInt(Date.now()) * 1000n;
  return timestamp > now - 60_000_000n;
}
