import { AssertionError, expect } from 'chai';
import { StoreError, type StoreErrorCode, type StoreResource } from '../../../src/store/errors.ts';
import type {
  CallOptions,
  Cell,
  DataStore,
  FamilySpec,
  Micros,
  Mutation,
  Row,
  RowMutations,
  ScanRequest,
  StoreCapabilities,
  TableRef,
} from '../../../src/store/store.ts';
import { type DriverHarnessFactory, type OpenedStore, useDriverStore } from '../../support/driver-harness.ts';

/** A deadline far enough away that no case on a loaded machine reaches it. */
export function call(): CallOptions {
  return { deadline: Date.now() + 60_000 };
}

/** Bytes of a UTF-8 string; bytes pass through unchanged. */
export function bytes(value: string | Buffer): Buffer {
  return typeof value === 'string' ? Buffer.from(value, 'utf8') : value;
}

export function set(family: string, column: string | Buffer, value: string | Buffer, timestampMicros: Micros): Mutation {
  return { type: 'set', family, column: bytes(column), value: bytes(value), timestampMicros };
}

export function deleteColumn(family: string, column: string | Buffer): Mutation {
  return { type: 'deleteColumn', family, column: bytes(column) };
}

export function deleteFamily(family: string): Mutation {
  return { type: 'deleteFamily', family };
}

export const deleteRow: Mutation = { type: 'deleteRow' };

/**
 * show renders bytes readably and injectively: printable ASCII as itself, every other byte and
 * the characters the renderings below use as separators as \xHH.
 */
export function show(value: Buffer): string {
  if (!Buffer.isBuffer(value)) throw new AssertionError(`expected a Buffer, got ${typeof value}: ${String(value)}`);
  let text = '';
  for (const byte of value) {
    const printable = byte >= 0x20 && byte < 0x7f && !':@=\\ '.includes(String.fromCharCode(byte));
    text += printable ? String.fromCharCode(byte) : `\\x${byte.toString(16).padStart(2, '0')}`;
  }
  return text;
}

/** A cell as `family:column@timestamp=value`, checking the types the contract promises. */
export function showCell(cell: Cell): string {
  if (typeof cell.family !== 'string') throw new AssertionError(`cell family is not a string: ${String(cell.family)}`);
  if (typeof cell.timestampMicros !== 'bigint') throw new AssertionError(`cell timestamp is not a bigint: ${String(cell.timestampMicros)}`);
  return `${cell.family}:${show(cell.column)}@${cell.timestampMicros}=${show(cell.value)}`;
}

export interface RowView {
  readonly key: string;
  readonly cells: string[];
}

/** A row as `{ key, cells }` of readable strings, so that a failure shows a short, exact diff. */
export function showRow(row: Row): RowView {
  if (!Array.isArray(row.cells)) throw new AssertionError('row.cells is not an array');
  return { key: show(row.key), cells: row.cells.map(showCell) };
}

export function showRows(rows: ReadonlyArray<Row | null>): Array<RowView | null> {
  return rows.map((row) => (row === null ? null : showRow(row)));
}

/**
 * Applies `entries` in as few mutateRows calls as the store's batch limits allow, and checks that
 * every entry was applied.
 */
export async function writeRows(store: DataStore, ref: TableRef, entries: readonly RowMutations[]): Promise<void> {
  const { entriesPerBatch, mutationsPerBatch } = store.limits;
  let batch: RowMutations[] = [];
  let mutations = 0;
  const flush = async () => {
    if (batch.length === 0) return;
    const results = await store.mutateRows(ref, batch, call());
    expect(results, 'mutateRows results').to.deep.equal(batch.map(() => undefined));
    batch = [];
    mutations = 0;
  };
  for (const entry of entries) {
    if (batch.length === entriesPerBatch || mutations + entry.mutations.length > mutationsPerBatch) await flush();
    batch.push(entry);
    mutations += entry.mutations.length;
  }
  await flush();
}

/** Every row a scan yields, rendered; the scan is run to its end. */
export async function scanAll(store: DataStore, ref: TableRef, scan: ScanRequest): Promise<RowView[]> {
  const rows: RowView[] = [];
  for await (const row of store.scanRows(ref, scan, call())) rows.push(showRow(row));
  return rows;
}

export interface ExpectedStoreError {
  readonly code: StoreErrorCode;
  readonly resource?: StoreResource;
  readonly name?: string;
}

/** Checks that `error` is a StoreError with the given code and, when given, resource and name. */
export function expectStoreError(error: unknown, expected: ExpectedStoreError): StoreError {
  if (!(error instanceof StoreError)) {
    throw new AssertionError(`expected a StoreError ${expected.code}, got ${error instanceof Error ? `${error.name}: ${error.message}` : String(error)}`);
  }
  expect({ code: error.code, resource: error.resource, name: error.resourceName }).to.deep.equal({
    code: expected.code,
    resource: expected.resource,
    name: expected.name,
  });
  return error;
}

/** Awaits `promise` and checks that it fails as `expected`. */
export async function expectRejection(promise: Promise<unknown>, expected: ExpectedStoreError): Promise<StoreError> {
  let result: unknown;
  try {
    result = await promise;
  } catch (error) {
    return expectStoreError(error, expected);
  }
  throw new AssertionError(`expected a StoreError ${expected.code}, but the call resolved to ${String(result)}`);
}

/** Removes absent optional fields, so that `{ name }` and `{ name, maxVersions: undefined }` compare equal. */
export function plainFamily(family: FamilySpec): FamilySpec {
  return {
    name: family.name,
    ...(family.maxVersions === undefined ? {} : { maxVersions: family.maxVersions }),
    ...(family.maxAgeSeconds === undefined ? {} : { maxAgeSeconds: family.maxAgeSeconds }),
  };
}

/** Skips the calling case when the store does not publish `capability`: it must not be asked for it. */
export function requireCapability(context: Mocha.Context, fixture: Fixture, capability: keyof StoreCapabilities): void {
  if (!fixture.store.capabilities[capability]) context.skip();
}

/**
 * Fixture is what each case works with: a store opened for its describe block, and helpers that
 * keep every request within what the store publishes.
 */
export interface Fixture extends OpenedStore {
  /** A new table in `instance` (the first served one by default), with the given families. */
  readonly table: (families: readonly FamilySpec[], instance?: string) => Promise<TableRef>;
  /**
   * A family that keeps every version where the store can (no policy), and only the latest
   * where it cannot (maxVersions 1: a store without multipleVersions is never asked for more).
   */
  readonly keepAll: (name: string) => FamilySpec;
  /** The n-th timestamp step: n times the store's timestamp granularity. */
  readonly at: (n: number | bigint) => Micros;
  /** `secondsAgo` before now, at the store's granularity. */
  readonly ago: (secondsAgo: number) => Micros;
  /** The most versions a read may ask of this store: all it keeps, within its limit. */
  readonly allVersions: number;
  /** The largest scan limit the store accepts. */
  readonly scanLimit: number;
}

/**
 * useFixture opens a fresh store through `factory` for the calling describe block. Every table
 * the fixture creates has a new name, so the cases of one block never see each other's data.
 */
export function useFixture(factory: DriverHarnessFactory, options: { instanceCount?: number } = {}): () => Fixture {
  const opened = useDriverStore(factory, options);
  let tables = 0;
  return () => {
    const base = opened();
    const granularity = BigInt(base.store.limits.timestampGranularityMicros);
    return {
      ...base,
      table: async (families, instance = base.instance) => {
        tables += 1;
        const ref = { instance, table: `t${tables}-${Date.now().toString(36)}` };
        await base.store.createTable(ref, families, call());
        return ref;
      },
      keepAll: (name) => (base.store.capabilities.multipleVersions ? { name } : { name, maxVersions: 1 }),
      at: (n) => BigInt(n) * granularity,
      ago: (secondsAgo) => {
        const micros = BigInt(Date.now() - Math.round(secondsAgo * 1000)) * 1000n;
        return (micros / granularity) * granularity;
      },
      allVersions: base.store.capabilities.multipleVersions ? Math.min(base.store.limits.versionsPerRead, 1000) : 1,
      scanLimit: base.store.limits.rowsPerPage + 1,
    };
  };
}
