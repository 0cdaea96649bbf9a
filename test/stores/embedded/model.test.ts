import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import fc from 'fast-check';
import { isStoreError } from '../../../src/store/errors.ts';
import { EmbeddedStore } from '../../../src/store/embedded/embedded-store.ts';
import type { ColumnSelector, FamilySpec, Mutation, ReadSelection, Row, RowMutations } from '../../../src/store/store.ts';

/**
 * The store against a model of the contract written as plainly as possible: random sequences of
 * row mutations, reads and scans, with keys and columns chosen to sit next to each other in byte
 * order ("a", "a\0", "a\xff", "b"), where seeking past a column or a row could go wrong.
 */
const FAMILIES: readonly FamilySpec[] = [{ name: 'all' }, { name: 'one', maxVersions: 1 }, { name: 'two', maxVersions: 2 }];
const BYTES = [[0x00], [0x00, 0x00], [0x61], [0x61, 0x00], [0x61, 0x61], [0x61, 0xff], [0x62], [0xff], [0xff, 0xff]].map((bytes) => Buffer.from(bytes));
const COLUMNS = [Buffer.alloc(0), ...BYTES.slice(2, 7)];

const key = fc.constantFrom(...BYTES.slice(1, 8));
const column = fc.constantFrom(...COLUMNS);
const family = fc.constantFrom('all', 'one', 'two');
const mutation: fc.Arbitrary<Mutation> = fc.oneof(
  { weight: 16, arbitrary: fc.record({ type: fc.constant('set' as const), family, column, value: fc.constantFrom(...'uvwxyz').map((v) => Buffer.from(v)), timestampMicros: fc.integer({ min: 1, max: 6 }).map((t) => BigInt(t) * 1000n) }) },
  { weight: 1, arbitrary: fc.record({ type: fc.constant('deleteColumn' as const), family, column }) },
  { weight: 1, arbitrary: fc.record({ type: fc.constant('deleteFamily' as const), family }) },
  { weight: 1, arbitrary: fc.constant({ type: 'deleteRow' as const }) },
  { weight: 1, arbitrary: fc.record({ type: fc.constant('deleteFamily' as const), family: fc.constant('missing') }) },
);
const selection: fc.Arbitrary<ReadSelection> = fc.record(
  {
    versions: fc.integer({ min: 1, max: 4 }),
    columns: fc.array(fc.record({ family, column: column }, { requiredKeys: ['family'] }) as fc.Arbitrary<ColumnSelector>, { minLength: 1, maxLength: 3 }),
  },
  { requiredKeys: ['versions'] },
);
type Operation =
  | { readonly op: 'mutateRows'; readonly entries: RowMutations[] }
  | { readonly op: 'mutateRow'; readonly key: Buffer; readonly mutations: Mutation[] }
  | { readonly op: 'readRows'; readonly keys: Buffer[]; readonly selection: ReadSelection }
  | { readonly op: 'scan'; readonly start?: Buffer; readonly end?: Buffer; readonly reverse: boolean; readonly limit: number; readonly selection: ReadSelection };
const mutations = fc.array(mutation, { minLength: 1, maxLength: 6, size: 'max' });
const operation: fc.Arbitrary<Operation> = fc.oneof(
  { weight: 3, arbitrary: fc.record({ op: fc.constant('mutateRow' as const), key, mutations }) },
  { weight: 2, arbitrary: fc.record({ op: fc.constant('mutateRows' as const), entries: fc.array(fc.record({ key, mutations }), { minLength: 1, maxLength: 3 }) }) },
  { weight: 2, arbitrary: fc.record({ op: fc.constant('readRows' as const), keys: fc.array(key, { minLength: 1, maxLength: 3 }), selection }) },
  { weight: 2, arbitrary: fc.record(
    { op: fc.constant('scan' as const), start: key, end: key, reverse: fc.boolean(), limit: fc.integer({ min: 1, max: 5 }), selection },
    { requiredKeys: ['op', 'reverse', 'limit', 'selection'] },
  ) },
);

/** rows → family → column (latin1) → timestamp → value */
type ModelRow = Map<string, Map<string, Map<bigint, string>>>;

class Model {
  readonly rows = new Map<string, ModelRow>();

  /** Applies one entry; returns the missing family it failed on, as the store must. */
  apply(key: Buffer, entry: readonly Mutation[]): string | undefined {
    for (const m of entry) if (m.type !== 'deleteRow' && !FAMILIES.some((f) => f.name === m.family)) return m.family;
    const row: ModelRow = this.rows.get(key.toString('latin1')) ?? new Map();
    const touched: Array<[string, string]> = [];
    for (const m of entry) {
      if (m.type === 'set') {
        const columns = row.get(m.family) ?? new Map<string, Map<bigint, string>>();
        row.set(m.family, columns);
        const versions = columns.get(m.column.toString('latin1')) ?? new Map<bigint, string>();
        columns.set(m.column.toString('latin1'), versions);
        versions.set(m.timestampMicros, m.value.toString());
        touched.push([m.family, m.column.toString('latin1')]);
      } else if (m.type === 'deleteColumn') {
        row.get(m.family)?.delete(m.column.toString('latin1'));
      } else if (m.type === 'deleteFamily') {
        row.delete(m.family);
      } else {
        row.clear();
      }
    }
    for (const [name, col] of touched) {
      const max = FAMILIES.find((f) => f.name === name)?.maxVersions;
      const versions = row.get(name)?.get(col);
      if (max === undefined || versions === undefined) continue;
      for (const ts of [...versions.keys()].sort((a, b) => (a < b ? 1 : -1)).slice(max)) versions.delete(ts);
    }
    this.rows.set(key.toString('latin1'), row);
    return undefined;
  }

  read(key: string, selection: ReadSelection): string[] | null {
    const row = this.rows.get(key);
    const cells: string[] = [];
    for (const name of [...(row?.keys() ?? [])].sort()) {
      const max = Math.min(selection.versions, FAMILIES.find((f) => f.name === name)?.maxVersions ?? Infinity);
      const columns = row?.get(name) ?? new Map<string, Map<bigint, string>>();
      for (const col of [...columns.keys()].sort((a, b) => Buffer.compare(Buffer.from(a, 'latin1'), Buffer.from(b, 'latin1')))) {
        const selected =
          selection.columns === undefined ||
          selection.columns.some((s) => s.family === name && (s.column === undefined || s.column.toString('latin1') === col));
        if (!selected) continue;
        const versions = [...(columns.get(col)?.entries() ?? [])].sort(([a], [b]) => (a < b ? 1 : -1)).slice(0, max);
        for (const [ts, value] of versions) cells.push(`${name}:${Buffer.from(col, 'latin1').toString('hex')}@${ts}=${value}`);
      }
    }
    return cells.length === 0 ? null : cells;
  }
}

function describeRow(row: Row | null | undefined): string[] | null {
  if (row === null || row === undefined) return null;
  return row.cells.map((cell) => `${cell.family}:${cell.column.toString('hex')}@${cell.timestampMicros}=${cell.value.toString()}`);
}

describe('embedded store: against a model of the contract', function () {
  this.timeout(300_000);
  let dataDir: string;
  let store: EmbeddedStore;
  let tables = 0;
  const options = () => ({ deadline: Date.now() + 30_000 });

  before(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'kvcrud-model-'));
    store = await EmbeddedStore.open({ dataDir });
  });
  after(async () => {
    await store.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('gives the answers of the model for any sequence of mutations, reads and scans', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(operation, { minLength: 10, maxLength: 40, size: 'max' }), async (operations) => {
        const ref = { instance: 'local', table: `model-${tables++}` };
        await store.createTable(ref, FAMILIES, options());
        const model = new Model();
        for (const step of operations) {
          switch (step.op) {
            case 'mutateRow': {
              const missing = model.apply(step.key, step.mutations);
              try {
                await store.mutateRow(ref, step.key, step.mutations, options());
                expect(missing).to.equal(undefined);
              } catch (error) {
                expect(isStoreError(error, 'NOT_FOUND') && error.resource === 'columnFamily' && error.resourceName, String(error)).to.equal(missing);
              }
              break;
            }
            case 'mutateRows': {
              const expected = step.entries.map((entry) => model.apply(entry.key, entry.mutations));
              const results = await store.mutateRows(ref, step.entries, options());
              expect(results.map((result) => (result === undefined ? undefined : result.resourceName))).to.deep.equal(expected);
              break;
            }
            case 'readRows': {
              const rows = await store.readRows(ref, step.keys, step.selection, options());
              expect(rows.map(describeRow)).to.deep.equal(step.keys.map((k) => model.read(k.toString('latin1'), step.selection)));
              expect(rows.map((row) => row?.key.toString('hex') ?? null)).to.deep.equal(
                step.keys.map((k) => (model.read(k.toString('latin1'), step.selection) === null ? null : k.toString('hex'))),
              );
              break;
            }
            case 'scan': {
              const range = { ...(step.start === undefined ? {} : { start: step.start }), ...(step.end === undefined ? {} : { end: step.end }) };
              const scanned: Array<[string, string[] | null]> = [];
              for await (const row of store.scanRows(ref, { range, reverse: step.reverse, limit: step.limit, ...step.selection }, options())) {
                scanned.push([row.key.toString('hex'), describeRow(row)]);
              }
              const keys = [...model.rows.keys()]
                .map((k) => Buffer.from(k, 'latin1'))
                .filter((k) => (step.start === undefined || Buffer.compare(k, step.start) >= 0) && (step.end === undefined || Buffer.compare(k, step.end) < 0))
                .sort((a, b) => Buffer.compare(a, b));
              if (step.reverse) keys.reverse();
              const expected = keys
                .map((k): [string, string[] | null] => [k.toString('hex'), model.read(k.toString('latin1'), step.selection)])
                .filter(([, cells]) => cells !== null)
                .slice(0, step.limit);
              expect(scanned).to.deep.equal(expected);
              break;
            }
          }
        }
      }),
      { numRuns: 60 },
    );
  });
});
