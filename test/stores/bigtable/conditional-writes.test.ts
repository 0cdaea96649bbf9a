import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import fc from 'fast-check';
import { BigtableStore } from '../../../src/store/bigtable/bigtable-store.ts';
import { isStoreError } from '../../../src/store/errors.ts';
import type { Condition, Mutation, TableRef } from '../../../src/store/store.ts';
import { cbt, cbtBytes } from '../../support/cbt.ts';
import { emulatorHost } from '../../support/emulator.ts';
import { TEST_PROJECT } from '../../support/test-app.ts';
import { ContractModel } from '../../conformance/driver/model.ts';

const HOUR = 3600;

/**
 * What is particular to Bigtable in checkAndMutateRow and readModifyWriteRow: values compared as
 * raw bytes, Bigtable's bound on a predicate's size, and the expired versions an increment
 * removes first (Bigtable's GC being lazy). The behaviour every store shares is the driver
 * conformance suite's.
 */
describe('Bigtable store: conditional mutations and counters on the emulator', () => {
  let host: string;
  let instance: string;
  let store: BigtableStore;
  let tableCount = 0;

  const call = () => ({ deadline: Date.now() + 10_000 });
  const newTable = (): TableRef => ({ instance, table: `c${++tableCount}` });
  const set = (family: string, column: string, value: Buffer | string, timestampMicros: bigint): Mutation => ({
    type: 'set',
    family,
    column: Buffer.from(column),
    value: Buffer.from(value),
    timestampMicros,
  });
  const equals = (family: string, column: string, value: Buffer): Condition => ({ type: 'columnEquals', family, column: Buffer.from(column), value });

  before(function () {
    host = emulatorHost(this);
    instance = `cw-${randomBytes(4).toString('hex')}`;
    store = new BigtableStore({ projectId: TEST_PROJECT, instanceIds: [instance], emulatorHost: host });
  });
  after(async () => {
    await store?.close();
  });

  it('decides random conditions on random rows as the reference model does', async function () {
    this.timeout(120_000);
    const ref = newTable();
    const families = [{ name: 'all' }, { name: 'two', maxVersions: 2 }, { name: 'hour', maxVersions: 3, maxAgeSeconds: HOUR }];
    await store.createTable(ref, [...families, { name: 'probe' }], call());
    // The emulator may collect what a policy expires; with the rules relaxed behind the store's
    // cached schema, it keeps every version, as production Bigtable does until its GC runs.
    for (const { name } of families) await cbt(host, instance, 'setgcpolicy', ref.table, name, 'never');
    const model = new ContractModel(store.capabilities, Date.now, store.limits.timestampGranularityMicros);
    model.createTable(ref, [...families, { name: 'probe' }]);
    const ms = (ago: number) => BigInt(Math.floor((Date.now() - ago) / 1000) * 1000) * 1000n;
    // Minutes old, or hours old (expired in `hour`, live elsewhere).
    const timestamps = [ms(60_000), ms(120_000), ms(2 * HOUR * 1000), ms(3 * HOUR * 1000)];
    const family = fc.constantFrom('all', 'two', 'hour');
    const column = fc.constantFrom('x', 'y');
    const value = fc.constantFrom(Buffer.alloc(0), Buffer.from('v'), Buffer.from('w'), Buffer.from([0xff, 0x0a]));
    const cell = fc.record({ family, column, value, timestamp: fc.constantFrom(...timestamps) });
    const condition: fc.Arbitrary<Condition> = fc.oneof(
      fc.boolean().map((exists): Condition => ({ type: 'rowExists', exists })),
      fc.record({ family, exists: fc.boolean() }).map((c): Condition => ({ type: 'familyExists', ...c })),
      fc.record({ family, column, exists: fc.boolean() }).map((c): Condition => ({ type: 'columnExists', family: c.family, column: Buffer.from(c.column), exists: c.exists })),
      fc.record({ family, column, value }).map((c): Condition => ({ type: 'columnEquals', family: c.family, column: Buffer.from(c.column), value: c.value })),
    );
    let run = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(cell, { maxLength: 6 }), fc.array(condition, { minLength: 1, maxLength: 4 }), async (cells, conditions) => {
        const key = Buffer.from(`r${++run}`);
        const mutations = cells.map((c) => set(c.family, c.column, c.value, c.timestamp));
        if (mutations.length > 0) {
          await store.mutateRow(ref, key, mutations, call());
          model.mutateRow(ref, key, mutations);
        }
        const check = { conditions, mutations: [set('probe', 'p', 'held', ms(0))], otherwise: [set('probe', 'p', 'failed', ms(0))] };
        expect(await store.checkAndMutateRow(ref, key, check, call())).to.equal(model.checkAndMutateRow(ref, key, check));
      }),
      { numRuns: 150 },
    );
  });

  it('compares values as raw bytes: bytes above 0x7f, newlines and regular-expression characters match only themselves', async () => {
    const ref = newTable();
    await store.createTable(ref, [{ name: 'a' }], call());
    const value = Buffer.from([0xff, 0x0a, 0x2e, 0x2a, 0xc3, 0xa9, 0x00]);
    const key = Buffer.from('bytes');
    await store.mutateRow(ref, key, [set('a', 'v', value, 1000n)], call());
    const lookalikes = [
      Buffer.from([0xfe, 0x0a, 0x2e, 0x2a, 0xc3, 0xa9, 0x00]),
      Buffer.from([0xff, 0x0a, 0x41, 0x2a, 0xc3, 0xa9, 0x00]),
      Buffer.from([0xff, 0x0a, 0x2e, 0x2a, 0xc3, 0xa9]),
      Buffer.from('é'),
    ];
    for (const other of lookalikes) {
      expect(await store.checkAndMutateRow(ref, key, { conditions: [equals('a', 'v', other)], mutations: [set('a', 'w', 'x', 1000n)], otherwise: [] }, call())).to.equal(false);
    }
    expect(await store.checkAndMutateRow(ref, key, { conditions: [equals('a', 'v', value)], mutations: [set('a', 'w', 'x', 1000n)], otherwise: [] }, call())).to.equal(true);
  });

  it('refuses a predicate beyond Bigtable’s 20 KB bound with INVALID_ARGUMENT, writing nothing; one within it is decided', async () => {
    const ref = newTable();
    await store.createTable(ref, [{ name: 'a' }], call());
    const key = Buffer.from('long');
    // The value goes in the filter twice, as both ends of a value range.
    const long = Buffer.alloc(10_000, 'x');
    await store.mutateRow(ref, key, [set('a', 'v', long, 1000n)], call());
    expect(await store.checkAndMutateRow(ref, key, { conditions: [equals('a', 'v', long)], mutations: [set('a', 'w', 'ok', 1000n)], otherwise: [] }, call())).to.equal(true);

    const error = await store
      .checkAndMutateRow(ref, key, { conditions: [equals('a', 'v', Buffer.alloc(10_500, 'x'))], mutations: [], otherwise: [set('a', 'w', 'not written', 2000n)] }, call())
      .then(
        () => undefined,
        (failure: unknown) => failure,
      );
    expect(isStoreError(error, 'INVALID_ARGUMENT'), String(error)).to.equal(true);
    const [row] = await store.readRows(ref, [key], { versions: 1, columns: [{ family: 'a', column: Buffer.from('w') }] }, call());
    expect(row?.cells.map((cell) => cell.value.toString())).to.deep.equal(['ok']);
  });

  it('removes the expired versions of the columns an increment or append touches, and only those, as cbt then shows', async () => {
    const ref = newTable();
    await store.createTable(ref, [{ name: 'hour', maxAgeSeconds: HOUR }], call());
    // Relaxed behind the store's cached schema, so that the emulator's own GC removes nothing.
    await cbt(host, instance, 'setgcpolicy', ref.table, 'hour', 'never');
    const key = Buffer.from('aged');
    const stale = BigInt(Date.now() - 2 * HOUR * 1000) * 1000n;
    const live = BigInt(Date.now() - 60_000) * 1000n;
    const counter = (n: number) => Buffer.from([0, 0, 0, 0, 0, 0, 0, n]);
    await store.mutateRow(
      ref,
      key,
      [set('hour', 'n', counter(100), stale), set('hour', 'log', 'old', stale), set('hour', 'live', counter(5), live), set('hour', 'live', counter(99), stale), set('hour', 'untouched', 'kept', stale)],
      call(),
    );
    const row = await store.readModifyWriteRow(
      ref,
      key,
      [
        { type: 'increment', family: 'hour', column: Buffer.from('n'), amount: 1n },
        { type: 'append', family: 'hour', column: Buffer.from('log'), value: Buffer.from('new') },
        { type: 'increment', family: 'hour', column: Buffer.from('live'), amount: 1n },
      ],
      call(),
    );
    expect(row.cells.map((cell) => `${cell.column.toString()}=${cell.value.toString('hex')}`)).to.deep.equal([
      `live=${counter(6).toString('hex')}`,
      `log=${Buffer.from('new').toString('hex')}`,
      `n=${counter(1).toString('hex')}`,
    ]);
    // What Bigtable holds, expired versions included: the touched columns keep only what is live.
    const output = (await cbtBytes(host, instance, 'lookup', ref.table, 'aged')).toString('latin1');
    const versions = (column: string) => output.split(`hour:${column} `).length - 1;
    expect([versions('n'), versions('log'), versions('live'), versions('untouched')]).to.deep.equal([1, 1, 2, 1]);
    expect(output).to.contain('"kept"').and.not.contain('"old"');
  });
});
