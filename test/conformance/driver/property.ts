import { expect } from 'chai';
import fc from 'fast-check';
import { StoreError } from '../../../src/store/errors.ts';
import type {
  ColumnSelector,
  DataStore,
  FamilySpec,
  KeyRange,
  Micros,
  Mutation,
  ReadSelection,
  Row,
  RowMutations,
  ScanRequest,
  TableRef,
} from '../../../src/store/store.ts';
import type { DriverHarnessFactory } from '../../support/driver-harness.ts';
import { type Fixture, call, plainFamily, show, showRows, useFixture } from './fixtures.ts';
import { ContractModel } from './model.ts';

type Operation =
  | { readonly kind: 'mutateRow'; readonly key: Buffer; readonly mutations: readonly Mutation[] }
  | { readonly kind: 'mutateRows'; readonly entries: readonly RowMutations[] }
  | { readonly kind: 'readRows'; readonly keys: readonly Buffer[]; readonly selection: ReadSelection }
  /** `stopAfter`: the caller stops after that many rows (0: before the first next()). */
  | { readonly kind: 'scanRows'; readonly scan: ScanRequest; readonly stopAfter?: number };

const HOUR_SECONDS = 3600;
/** Families the table does not have. */
const MISSING_FAMILIES = ['x', 'y'];

/** Keys that are prefixes of each other, and bytes on both sides of 0x7F. */
const KEYS = [[0x00], 'a', 'a\u0000', 'ab', 'b', [0x80], [0xff], [0xff, 0xff]].map(toBytes);
/** Scan bounds: the keys, and bytes strings between them. */
const BOUNDS = [...KEYS, ...[[0x00, 0x00], 'a0', [0xff, 0x00]].map(toBytes)];
const COLUMNS = ['', 'x', 'y', [0xff], [0x00, 0x01]].map(toBytes);

function toBytes(value: string | number[]): Buffer {
  return typeof value === 'string' ? Buffer.from(value, 'latin1') : Buffer.from(value);
}

/** The table every run creates, within what the store publishes. */
function propertyFamilies(fixture: Fixture): FamilySpec[] {
  const { multipleVersions, maxAge } = fixture.store.capabilities;
  return [
    fixture.keepAll('a'),
    { name: 'b', maxVersions: 1 },
    ...(multipleVersions ? [{ name: 'c', maxVersions: 2 }] : []),
    ...(maxAge ? [{ name: 'd', maxAgeSeconds: HOUR_SECONDS, ...(multipleVersions ? {} : { maxVersions: 1 }) }] : []),
    ...(multipleVersions && maxAge ? [{ name: 'e', maxVersions: 2, maxAgeSeconds: HOUR_SECONDS }] : []),
  ];
}

/**
 * Timestamps for one run: a few near the epoch, a few two hours old (expired under maxAge), a
 * few ten minutes old (live under maxAge for the next fifty minutes) and two beyond what a double
 * holds: a run takes seconds, so no version changes sides while it runs, and store and model
 * agree whatever their clocks say.
 */
function propertyTimestamps(fixture: Fixture): Micros[] {
  const live = fixture.ago(10 * 60);
  const dead = fixture.ago(2 * HOUR_SECONDS);
  const granularity = BigInt(fixture.store.limits.timestampGranularityMicros);
  const far = [(2n ** 53n + 1n) * granularity, ((2n ** 63n - 1n) / granularity) * granularity];
  return [0n, fixture.at(1), fixture.at(2), ...[0, 1, 2].map((n) => dead + fixture.at(n)), ...[0, 1, 2, 3].map((n) => live + fixture.at(n)), ...far];
}

function operations(fixture: Fixture, families: readonly FamilySpec[], timestamps: readonly Micros[]): fc.Arbitrary<Operation[]> {
  const { capabilities } = fixture.store;
  const names = families.map((family) => family.name);
  const key = fc.constantFrom(...KEYS);
  const column = fc.constantFrom(...COLUMNS);
  const family = fc.oneof({ weight: 19, arbitrary: fc.constantFrom(...names) }, { weight: 1, arbitrary: fc.constantFrom(...MISSING_FAMILIES) });
  const mutation: fc.Arbitrary<Mutation> = fc.oneof(
    {
      weight: 8,
      arbitrary: fc.record({ family, column, value: fc.uint8Array({ maxLength: 3 }), timestamp: fc.constantFrom(...timestamps) }).map(
        ({ family, column, value, timestamp }): Mutation => ({ type: 'set', family, column, value: Buffer.from(value), timestampMicros: timestamp }),
      ),
    },
    { weight: 1, arbitrary: fc.record({ family, column }).map(({ family, column }): Mutation => ({ type: 'deleteColumn', family, column })) },
    { weight: 1, arbitrary: family.map((name): Mutation => ({ type: 'deleteFamily', family: name })) },
    { weight: 1, arbitrary: fc.constant<Mutation>({ type: 'deleteRow' }) },
  );
  const mutations = fc.array(mutation, { minLength: 1, maxLength: 5 });
  const selector = fc
    .record({ family: fc.constantFrom(...names), column: fc.option(column, { nil: undefined }) })
    .map(({ family, column }): ColumnSelector => (column === undefined ? { family } : { family, column }));
  const selection = fc
    .record({
      columns: fc.option(fc.array(selector, { minLength: 1, maxLength: 3 }), { nil: undefined, freq: 2 }),
      versions: capabilities.multipleVersions ? fc.integer({ min: 1, max: 3 }) : fc.constant(1),
    })
    .map(({ columns, versions }): ReadSelection => (columns === undefined ? { versions } : { columns, versions }));
  const range = fc
    .record({ start: fc.option(fc.constantFrom(...BOUNDS), { nil: undefined }), end: fc.option(fc.constantFrom(...BOUNDS), { nil: undefined }) })
    .map(({ start, end }): KeyRange => ({ ...(start === undefined ? {} : { start }), ...(end === undefined ? {} : { end }) }));
  const scan = fc
    .record({
      range,
      reverse: capabilities.reverseScan ? fc.boolean() : fc.constant(false),
      limit: fc.oneof(fc.integer({ min: 1, max: 4 }), fc.constant(fixture.scanLimit)),
      selection,
      stopAfter: fc.option(fc.integer({ min: 0, max: 3 }), { nil: undefined, freq: 3 }),
    })
    .map(({ range, reverse, limit, selection, stopAfter }): Operation => ({
      kind: 'scanRows',
      scan: { range, reverse, limit, ...selection },
      ...(stopAfter === undefined ? {} : { stopAfter }),
    }));
  const operation: fc.Arbitrary<Operation> = fc.oneof(
    { weight: 4, arbitrary: fc.record({ key, mutations }).map(({ key, mutations }): Operation => ({ kind: 'mutateRow', key, mutations })) },
    {
      weight: 2,
      arbitrary: fc.array(fc.record({ key, mutations }), { minLength: 1, maxLength: 5 }).map((entries): Operation => ({ kind: 'mutateRows', entries })),
    },
    { weight: 2, arbitrary: fc.record({ keys: fc.array(key, { maxLength: 5 }), selection }).map(({ keys, selection }): Operation => ({ kind: 'readRows', keys, selection })) },
    { weight: 2, arbitrary: scan },
  );
  return fc.array(operation, { minLength: 1, maxLength: 20 });
}

/** What a call answered, in a form that compares exactly and reads well in a failure. */
function outcome(error: unknown): string {
  if (error instanceof StoreError) return `${error.code} ${error.resource ?? ''} ${error.resourceName ?? ''}`.trim();
  return `not a StoreError: ${error instanceof Error ? `${error.name}: ${error.message}` : String(error)}`;
}

async function onStore(store: DataStore, ref: TableRef, operation: Operation): Promise<unknown> {
  try {
    switch (operation.kind) {
      case 'mutateRow':
        await store.mutateRow(ref, operation.key, operation.mutations, call());
        return 'OK';
      case 'mutateRows':
        return (await store.mutateRows(ref, operation.entries, call())).map((result) => (result === undefined ? 'OK' : outcome(result)));
      case 'readRows':
        return showRows(await store.readRows(ref, operation.keys, operation.selection, call()));
      case 'scanRows': {
        const rows: Row[] = [];
        const iterator = store.scanRows(ref, operation.scan, call())[Symbol.asyncIterator]();
        try {
          while (operation.stopAfter === undefined || rows.length < operation.stopAfter) {
            const next = await iterator.next();
            if (next.done === true) break;
            rows.push(next.value);
          }
        } finally {
          if (operation.stopAfter !== undefined) await iterator.return?.();
        }
        return showRows(rows);
      }
    }
  } catch (error) {
    return outcome(error);
  }
}

function onModel(model: ContractModel, ref: TableRef, operation: Operation): unknown {
  try {
    switch (operation.kind) {
      case 'mutateRow':
        model.mutateRow(ref, operation.key, operation.mutations);
        return 'OK';
      case 'mutateRows':
        return model.mutateRows(ref, operation.entries).map((result) => (result === undefined ? 'OK' : outcome(result)));
      case 'readRows':
        return showRows(model.readRows(ref, operation.keys, operation.selection));
      case 'scanRows':
        return showRows(model.scanRows(ref, operation.scan).slice(0, operation.stopAfter));
    }
  } catch (error) {
    return outcome(error);
  }
}

function describeMutation(mutation: Mutation): string {
  switch (mutation.type) {
    case 'set':
      return `set ${mutation.family}:${show(mutation.column)}@${mutation.timestampMicros}=${show(mutation.value)}`;
    case 'deleteColumn':
      return `deleteColumn ${mutation.family}:${show(mutation.column)}`;
    case 'deleteFamily':
      return `deleteFamily ${mutation.family}`;
    case 'deleteRow':
      return 'deleteRow';
  }
}

function describeSelection(selection: ReadSelection): string {
  const columns = selection.columns?.map((selector) => (selector.column === undefined ? selector.family : `${selector.family}:${show(selector.column)}`));
  return `versions ${selection.versions}${columns === undefined ? '' : ` columns [${columns.join(', ')}]`}`;
}

/** One line per operation, for the counterexample fast-check reports. */
function describeOperation(operation: Operation): string {
  switch (operation.kind) {
    case 'mutateRow':
      return `mutateRow ${show(operation.key)} [${operation.mutations.map(describeMutation).join(', ')}]`;
    case 'mutateRows':
      return `mutateRows ${operation.entries.map((entry) => `${show(entry.key)} [${entry.mutations.map(describeMutation).join(', ')}]`).join('; ')}`;
    case 'readRows':
      return `readRows [${operation.keys.map(show).join(', ')}] ${describeSelection(operation.selection)}`;
    case 'scanRows': {
      const { range, reverse, limit } = operation.scan;
      const bounds = `[${range.start === undefined ? '' : show(range.start)}, ${range.end === undefined ? '' : show(range.end)})`;
      const stop = operation.stopAfter === undefined ? '' : ` stop after ${operation.stopAfter}`;
      return `scanRows ${bounds}${reverse ? ' reverse' : ''} limit ${limit} ${describeSelection(operation.scan)}${stop}`;
    }
  }
}

/**
 * The model-based property: random sequences of mutations, batches, reads and scans (stopped
 * early or not), each run on a new table, give the same answers from the store as from the
 * reference model (model.ts). Timestamps are chosen by the caller, so answers are deterministic.
 * Runs are scaled by the harness's propertyRuns trait.
 */
export function propertyCases(factory: DriverHarnessFactory): void {
  describe('agreement with the reference model', () => {
    const fixture = useFixture(factory);

    it('answers random sequences of mutations, batches, reads and scans as the model does', async function () {
      this.timeout(600_000);
      const current = fixture();
      const families = propertyFamilies(current);
      const timestamps = propertyTimestamps(current);
      const everything: ScanRequest = { range: {}, reverse: false, limit: current.scanLimit, versions: current.allVersions };
      const sequence = operations(current, families, timestamps).map((list) => Object.assign(list, { [fc.toStringMethod]: () => `\n${list.map(describeOperation).join('\n')}` }));
      await fc.assert(
        fc.asyncProperty(sequence, async (list) => {
          const ref = await current.table(families);
          const model = new ContractModel(current.store.capabilities, Date.now, current.store.limits.timestampGranularityMicros);
          model.createTable(ref, families);
          const schema = await current.store.describeTable(ref, call());
          expect({ ...schema, families: schema.families.map(plainFamily) }, 'describeTable').to.deep.equal(model.describeTable(ref));
          for (const [index, operation] of list.entries()) {
            const expected = onModel(model, ref, operation);
            const actual = await onStore(current.store, ref, operation);
            expect(actual, `step ${index + 1}: ${describeOperation(operation)}`).to.deep.equal(expected);
          }
          const actual = await onStore(current.store, ref, { kind: 'scanRows', scan: everything });
          expect(actual, 'the whole table at the end').to.deep.equal(onModel(model, ref, { kind: 'scanRows', scan: everything }));
          await current.store.deleteTable(ref, call());
        }),
        { numRuns: current.harness.traits.propertyRuns },
      );
    });
  });
}
