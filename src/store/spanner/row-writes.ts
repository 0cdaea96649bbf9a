import type { FamilyPolicy, Micros, RowMutations } from '../store.ts';

/** A key range of kvcrud_cells, as the client's KeyRange takes it. */
export interface CellRange {
  readonly startClosed?: unknown[];
  readonly startOpen?: unknown[];
  readonly endClosed: unknown[];
}

/** One write to kvcrud_cells, in the order it must be applied. */
export type CellWrite =
  | { readonly kind: 'upsert'; readonly row: { table_id: string; row_key: Buffer; family: string; col: Buffer; ts: string; value: Buffer } }
  | { readonly kind: 'deleteRange'; readonly range: CellRange };

/** A column of one row whose stored versions a write must know to trim it to maxVersions. */
export interface ColumnRef {
  readonly key: Buffer;
  readonly family: string;
  readonly column: Buffer;
}

export function columnId(key: Buffer, family: string, column: Buffer): string {
  return `${key.toString('hex')}/${family}/${column.toString('hex')}`;
}

/**
 * The columns whose stored versions planWrites needs: those a `set` writes in a family with
 * maxVersions. Every other write is blind.
 */
export function columnsToRead(policies: ReadonlyMap<string, FamilyPolicy>, entries: readonly RowMutations[]): ColumnRef[] {
  const columns = new Map<string, ColumnRef>();
  for (const entry of entries) {
    for (const mutation of entry.mutations) {
      if (mutation.type !== 'set' || policies.get(mutation.family)?.maxVersions === undefined) continue;
      columns.set(columnId(entry.key, mutation.family, mutation.column), { key: entry.key, family: mutation.family, column: mutation.column });
    }
  }
  return [...columns.values()];
}

/**
 * planWrites turns row mutations (their families checked) into writes of kvcrud_cells, in the
 * order Spanner applies a commit's mutations: the mutations themselves, then the trimming that
 * enforces retention on write. `stored` holds the timestamps already stored of every column
 * columnsToRead named (read in the same transaction). Retention on write is what keeps a column
 * from growing without bound; reads apply the policies again, so a version that expires between
 * two writes is never read either.
 *
 * - maxVersions N: after the write, versions older than the N-th newest are deleted (one range).
 * - maxAgeSeconds: versions older than now minus the age are deleted (one range).
 */
export function planWrites(
  tableId: string,
  policies: ReadonlyMap<string, FamilyPolicy>,
  entries: readonly RowMutations[],
  stored: ReadonlyMap<string, readonly Micros[]>,
  nowMicros: Micros,
): CellWrite[] {
  const writes: CellWrite[] = [];
  // The versions each tracked column will hold once the writes before the trims are applied.
  const versions = new Map<string, { ref: ColumnRef; timestamps: Set<Micros> }>();
  for (const [id, timestamps] of stored) versions.set(id, { ref: refOf(id), timestamps: new Set(timestamps) });
  const aged = new Map<string, ColumnRef>();
  const prefix = (...parts: unknown[]) => [tableId, ...parts];
  for (const entry of entries) {
    const key = entry.key;
    for (const mutation of entry.mutations) {
      switch (mutation.type) {
        case 'set': {
          writes.push({
            kind: 'upsert',
            row: { table_id: tableId, row_key: key, family: mutation.family, col: mutation.column, ts: mutation.timestampMicros.toString(), value: mutation.value },
          });
          const id = columnId(key, mutation.family, mutation.column);
          const policy = policies.get(mutation.family);
          if (policy?.maxVersions !== undefined) {
            const tracked = versions.get(id) ?? { ref: { key, family: mutation.family, column: mutation.column }, timestamps: new Set<Micros>() };
            tracked.timestamps.add(mutation.timestampMicros);
            versions.set(id, tracked);
          }
          if (policy?.maxAgeSeconds !== undefined) aged.set(id, { key, family: mutation.family, column: mutation.column });
          break;
        }
        case 'deleteColumn': {
          writes.push({ kind: 'deleteRange', range: { startClosed: prefix(key, mutation.family, mutation.column), endClosed: prefix(key, mutation.family, mutation.column) } });
          versions.get(columnId(key, mutation.family, mutation.column))?.timestamps.clear();
          break;
        }
        case 'deleteFamily': {
          writes.push({ kind: 'deleteRange', range: { startClosed: prefix(key, mutation.family), endClosed: prefix(key, mutation.family) } });
          for (const tracked of versions.values()) if (tracked.ref.key.equals(key) && tracked.ref.family === mutation.family) tracked.timestamps.clear();
          break;
        }
        case 'deleteRow': {
          writes.push({ kind: 'deleteRange', range: { startClosed: prefix(key), endClosed: prefix(key) } });
          for (const tracked of versions.values()) if (tracked.ref.key.equals(key)) tracked.timestamps.clear();
          break;
        }
      }
    }
  }
  for (const { ref, timestamps } of versions.values()) {
    const keep = policies.get(ref.family)?.maxVersions ?? Infinity;
    if (timestamps.size <= keep) continue;
    const newest = [...timestamps].sort((x, y) => (x > y ? -1 : x < y ? 1 : 0));
    const oldestKept = newest[keep - 1] as Micros;
    // ts is stored descending: the versions older than the oldest kept come after it.
    writes.push({ kind: 'deleteRange', range: { startOpen: prefix(ref.key, ref.family, ref.column, oldestKept.toString()), endClosed: prefix(ref.key, ref.family, ref.column) } });
  }
  for (const ref of aged.values()) {
    const maxAge = BigInt(policies.get(ref.family)?.maxAgeSeconds ?? 0) * 1_000_000n;
    const cutoff = nowMicros - maxAge;
    // Expired means older than the cutoff; a version exactly at it is still kept.
    if (cutoff <= 0n) continue;
    writes.push({ kind: 'deleteRange', range: { startOpen: prefix(ref.key, ref.family, ref.column, cutoff.toString()), endClosed: prefix(ref.key, ref.family, ref.column) } });
  }
  return writes;
}

function refOf(id: string): ColumnRef {
  const [key = '', family = '', column = ''] = id.split('/');
  return { key: Buffer.from(key, 'hex'), family, column: Buffer.from(column, 'hex') };
}
