import { expect } from 'chai';
import fc from 'fast-check';
import { pino } from 'pino';
import { createClient } from 'redis';
import { isStoreError } from '../../../src/store/errors.ts';
import { RedisStore } from '../../../src/store/redis/redis-store.ts';
import type { Condition, FamilySpec, ModifyRule, Mutation, Row } from '../../../src/store/store.ts';
import { ContractModel } from '../../conformance/driver/model.ts';
import { type RedisServer, requireRedis, spawnRedis } from '../../support/redis-server.ts';

/**
 * checkAndMutateRow and readModifyWriteRow on Redis against the contract's model, on random
 * sequences mixing them with mutateRow: keys and columns sit next to each other in byte order,
 * values are counters and not, versions are live, in the future, or expired by age. The row
 * script drops an expired version on write, so expired versions still stored (as time makes them)
 * are planted in the row's hash with a Redis client of the test's own, in the documented layout.
 *
 * Redis keeps the latest version of a column only: every family keeps one. Counters and appends
 * are written at the clock, and a timestamp near the clock reads as "now", so that the store and
 * the model, a millisecond apart, agree.
 */
const FAMILIES: readonly FamilySpec[] = [{ name: 'one', maxVersions: 1 }, { name: 'two', maxVersions: 1 }, { name: 'hour', maxVersions: 1, maxAgeSeconds: 3600 }];
const NEAR_CLOCK_MICROS = 600_000_000n;
const START_MS = BigInt(Date.now());
/** Two hours ago: expired in "hour". */
const EXPIRED = (START_MS - 7_200_000n) * 1000n;
/** In ten years: the latest version, whatever the clock writes. */
const FUTURE = (START_MS + 315_360_000_000n) * 1000n;

function counter(value: bigint): Buffer {
  const bytes = Buffer.alloc(8);
  bytes.writeBigInt64BE(BigInt.asIntN(64, value));
  return bytes;
}

// Bytes that need care in a Lua script and a Redis key: NUL, 0xff, and the separator ':'.
const BYTES = [[0x61], [0x61, 0x00], [0x61, 0xff], [0x61, 0x3a], [0x62]].map((bytes) => Buffer.from(bytes));
const key = fc.constantFrom(...BYTES);
const column = fc.constantFrom(Buffer.alloc(0), ...BYTES);
const family = fc.constantFrom('one', 'two', 'hour');
const someFamily = fc.oneof({ weight: 12, arbitrary: family }, { weight: 1, arbitrary: fc.constant('missing') });
const value = fc.constantFrom(Buffer.from('u'), Buffer.alloc(0), Buffer.from('seven-b'), Buffer.from('a:b'), counter(0n), counter(-1n), counter(2n ** 63n - 1n));
const timestamp = fc.constantFrom(1000n, 2000n, EXPIRED, FUTURE, FUTURE + 1000n);

const mutation: fc.Arbitrary<Mutation> = fc.oneof(
  { weight: 8, arbitrary: fc.record({ type: fc.constant('set' as const), family: someFamily, column, value, timestampMicros: timestamp }) },
  { weight: 1, arbitrary: fc.record({ type: fc.constant('deleteColumn' as const), family: someFamily, column }) },
  { weight: 1, arbitrary: fc.record({ type: fc.constant('deleteFamily' as const), family }) },
  { weight: 1, arbitrary: fc.constant({ type: 'deleteRow' as const }) },
);
const mutations = fc.array(mutation, { maxLength: 4 });
const condition: fc.Arbitrary<Condition> = fc.oneof(
  fc.record({ type: fc.constant('rowExists' as const), exists: fc.boolean() }),
  fc.record({ type: fc.constant('familyExists' as const), family: someFamily, exists: fc.boolean() }),
  fc.record({ type: fc.constant('columnExists' as const), family: someFamily, column, exists: fc.boolean() }),
  fc.record({ type: fc.constant('columnEquals' as const), family: someFamily, column, value }),
);
const rule: fc.Arbitrary<ModifyRule> = fc.oneof(
  fc.record({
    type: fc.constant('increment' as const),
    family: fc.constantFrom('one', 'hour', 'two', 'hour', 'missing'),
    column,
    amount: fc.constantFrom(1n, -1n, 2n ** 63n - 1n, -(2n ** 63n)),
  }),
  fc.record({ type: fc.constant('append' as const), family: someFamily, column, value }),
);

type Operation =
  | { readonly op: 'mutateRow'; readonly key: Buffer; readonly mutations: Mutation[] }
  | { readonly op: 'checkAndMutateRow'; readonly key: Buffer; readonly conditions: Condition[]; readonly mutations: Mutation[]; readonly otherwise: Mutation[] }
  | { readonly op: 'readModifyWriteRow'; readonly key: Buffer; readonly rules: ModifyRule[] }
  | { readonly op: 'plantExpired'; readonly key: Buffer; readonly column: Buffer; readonly value: Buffer };
const operation: fc.Arbitrary<Operation> = fc.oneof(
  { weight: 3, arbitrary: fc.record({ op: fc.constant('mutateRow' as const), key, mutations: fc.array(mutation, { minLength: 1, maxLength: 4 }) }) },
  {
    weight: 3,
    arbitrary: fc
      .record({ op: fc.constant('checkAndMutateRow' as const), key, conditions: fc.array(condition, { minLength: 1, maxLength: 3 }), mutations, otherwise: mutations })
      .filter((step) => step.mutations.length + step.otherwise.length > 0),
  },
  { weight: 3, arbitrary: fc.record({ op: fc.constant('readModifyWriteRow' as const), key, rules: fc.array(rule, { minLength: 1, maxLength: 4 }) }) },
  { weight: 2, arbitrary: fc.record({ op: fc.constant('plantExpired' as const), key, column, value }) },
);

/** A timestamp near the clock reads as "now". */
function shownTimestamp(micros: bigint): string {
  const now = BigInt(Date.now()) * 1000n;
  return micros > now - NEAR_CLOCK_MICROS && micros < now + NEAR_CLOCK_MICROS ? 'now' : String(micros);
}

function describeRow(row: Row | null | undefined): string[] | null {
  if (row === null || row === undefined) return null;
  return row.cells.map((cell) => `${cell.family}:${cell.column.toString('hex')}@${shownTimestamp(cell.timestampMicros)}=${cell.value.toString('hex')}`);
}

/** What a call came to: its result, or its error's code and what it names. */
async function outcome<T>(call: () => T | Promise<T>, show: (result: T) => unknown): Promise<unknown> {
  try {
    return show(await call());
  } catch (error) {
    if (!isStoreError(error)) throw error;
    return `${error.code} ${error.resourceName ?? error.reason ?? ''}`;
  }
}

describe('redis store: conditions and counters against the contract model', function () {
  this.timeout(300_000);
  let server: RedisServer;
  let store: RedisStore;
  let planter: ReturnType<typeof createClient>;
  let tables = 0;
  const options = () => ({ deadline: Date.now() + 30_000 });

  before(async function () {
    requireRedis(this);
    server = await spawnRedis();
    store = RedisStore.open({ url: server.url, instances: ['local'], logger: pino({ level: 'silent' }) });
    planter = createClient({ url: server.url });
    await planter.connect();
  });
  after(async () => {
    await planter?.close();
    await store?.close();
    await server?.stop();
  });

  it('gives the answers of the model for any sequence of conditional mutations, counters, appends and mutations', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(operation, { minLength: 5, maxLength: 30 }), async (operations) => {
        const ref = { instance: 'local', table: `coordination-${tables++}` };
        await store.createTable(ref, FAMILIES, options());
        const model = new ContractModel(store.capabilities, Date.now, store.limits.timestampGranularityMicros);
        model.createTable(ref, FAMILIES);
        const tag = `kvcrud:{${ref.instance}/${ref.table}}`;
        const generation = await planter.hGet(`${tag}:table`, 'generation');
        expect(generation, 'the table record names its generation').to.be.a('string');
        for (const step of operations) {
          let answers: [unknown, unknown];
          switch (step.op) {
            case 'plantExpired':
              // The column's one stored version becomes one its family has expired.
              await planter.sendCommand([
                'HSET',
                Buffer.concat([Buffer.from(`${tag}:${generation}:r:`), step.key]),
                Buffer.concat([Buffer.from('hour:'), step.column]),
                Buffer.concat([Buffer.from(`${EXPIRED}:`), step.value]),
              ]);
              await planter.sendCommand(['ZADD', `${tag}:${generation}:rows`, '0', step.key]);
              model.mutateRow(ref, step.key, [
                { type: 'deleteColumn', family: 'hour', column: step.column },
                { type: 'set', family: 'hour', column: step.column, value: step.value, timestampMicros: EXPIRED },
              ]);
              answers = ['ok', 'ok'];
              break;
            case 'mutateRow':
              answers = [
                await outcome(() => store.mutateRow(ref, step.key, step.mutations, options()), () => 'ok'),
                await outcome(() => model.mutateRow(ref, step.key, step.mutations), () => 'ok'),
              ];
              break;
            case 'checkAndMutateRow':
              answers = [
                await outcome(() => store.checkAndMutateRow(ref, step.key, step, options()), (matched) => matched),
                await outcome(() => model.checkAndMutateRow(ref, step.key, step), (matched) => matched),
              ];
              break;
            case 'readModifyWriteRow':
              answers = [
                await outcome(() => store.readModifyWriteRow(ref, step.key, step.rules, options()), describeRow),
                await outcome(() => model.readModifyWriteRow(ref, step.key, step.rules), describeRow),
              ];
              break;
          }
          expect(answers[0], step.op).to.deep.equal(answers[1]);
          const [stored] = await store.readRows(ref, [step.key], { versions: 1 }, options());
          const [modelled] = model.readRows(ref, [step.key], { versions: 1 });
          expect(describeRow(stored), `the row after ${step.op}`).to.deep.equal(describeRow(modelled));
        }
        // Scanned whole, the table holds the same rows: a row left with expired cells only is not one.
        const scan = { range: {}, reverse: false, limit: 100, versions: 1 };
        const scanned: Row[] = [];
        for await (const row of store.scanRows(ref, scan, options())) scanned.push(row);
        expect(scanned.map((row) => [row.key.toString('hex'), describeRow(row)]), 'the table scanned').to.deep.equal(
          model.scanRows(ref, scan).map((row) => [row.key.toString('hex'), describeRow(row)]),
        );
      }),
      { numRuns: 60 },
    );
  });
});
