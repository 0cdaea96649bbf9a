import { hash } from 'node:crypto';
import { StoreError } from '../errors.ts';
import type { FamilyPolicy, Micros, RowMutations } from '../store.ts';
import type { Turns } from '../../lib/turns.ts';
import { BYTES_PER_COMMIT, MUTATIONS_PER_COMMIT } from './limits.ts';

/** A key range of kvcrud_cells, as the client's KeyRange takes it. */
export interface CellRange {
  readonly startClosed?: unknown[];
  readonly startOpen?: unknown[];
  readonly endClosed: unknown[];
}

export interface CellRecord {
  table_id: string;
  row_key: Buffer;
  family: string;
  col_hash: Buffer;
  ts: string;
  col: Buffer;
  value: Buffer;
}

/** One write to kvcrud_cells, in the order it must be applied. */
export type CellWrite =
  | { readonly kind: 'upsert'; readonly row: CellRecord }
  | { readonly kind: 'deleteRange'; readonly range: CellRange }
  | { readonly kind: 'deleteKey'; readonly key: unknown[] };

/** Columns of kvcrud_cells an upsert writes: each counts as one of Spanner's mutations. */
const COLUMNS_PER_CELL = 7;

/** A column of one row whose stored versions a write must know to enforce retention on it. */
export interface ColumnRef {
  readonly key: Buffer;
  readonly family: string;
  readonly hash: Buffer;
}

/** The key part a column is stored under (see schema.ts): its SHA-256, in one call rather than through a Hash object. */
export function columnHash(column: Buffer): Buffer {
  return hash('sha256', column, 'buffer');
}

export function columnId(key: Buffer, family: string, hash: Buffer): string {
  return `${key.toString('hex')}/${family}/${hash.toString('hex')}`;
}

/**
 * The columns whose stored versions planWrites needs: those a `set` writes in a family with a
 * retention policy. Every other write is blind.
 */
export async function columnsToRead(policies: ReadonlyMap<string, FamilyPolicy>, entries: readonly RowMutations[], slices: Turns): Promise<ColumnRef[]> {
  const columns = new Map<string, ColumnRef>();
  for (const entry of entries) {
    for (const mutation of entry.mutations) {
      if (slices.dueAfterItem()) await slices.next();
      if (mutation.type !== 'set' || !hasPolicy(policies.get(mutation.family))) continue;
      const hash = columnHash(mutation.column);
      columns.set(columnId(entry.key, mutation.family, hash), { key: entry.key, family: mutation.family, hash });
    }
  }
  return [...columns.values()];
}

/**
 * planWrites turns row mutations (their families checked) into writes of kvcrud_cells, in the
 * order Spanner applies a commit's mutations: the mutations themselves, then the trimming that
 * enforces retention on write. `stored` holds the timestamps already stored of every column
 * columnsToRead named (read in the same transaction). Reads apply the policies again, so a
 * version that expires between two writes is never read either.
 *
 * - maxVersions N: versions older than the N-th newest are deleted (one range), if there are any.
 * - maxAgeSeconds: versions older than now minus the age are deleted (one range), if there are any.
 * - Where that is a single version, it is deleted by its key instead: every version the range
 *   would reach is known (read in the same transaction, which keeps others from adding one, or
 *   written by it), and a key is half the message of a range, in a commit that is sent whole.
 *
 * Refuses with INVALID_ARGUMENT, before anything is written, a write that would not fit one
 * Spanner commit (80,000 mutations, 100 MiB), which the published limits keep all but
 * pathological writes within.
 */
export async function planWrites(
  tableId: string,
  policies: ReadonlyMap<string, FamilyPolicy>,
  entries: readonly RowMutations[],
  stored: ReadonlyMap<string, readonly Micros[]>,
  nowMicros: Micros,
  slices: Turns,
): Promise<CellWrite[]> {
  const writes: CellWrite[] = [];
  // The versions each tracked column holds once the writes before the trims are applied.
  const versions = new Map<string, { ref: ColumnRef; timestamps: Set<Micros> }>();
  // What earlier mutations deleted: a column first tracked after that holds none of its stored versions.
  const deleted = new Set<string>();
  // Most writes delete nothing: they skip the lookups, and the row key's hex, for every column.
  const deletedBefore = (ref: ColumnRef, id: string) =>
    deleted.size > 0 &&
    (deleted.has(id) || deleted.has(`row ${ref.key.toString('hex')}`) || deleted.has(`family ${ref.key.toString('hex')} ${ref.family}`));
  const track = (ref: ColumnRef) => {
    const id = columnId(ref.key, ref.family, ref.hash);
    let tracked = versions.get(id);
    if (tracked === undefined) {
      tracked = { ref, timestamps: new Set(deletedBefore(ref, id) ? [] : (stored.get(id) ?? [])) };
      versions.set(id, tracked);
    }
    return tracked;
  };
  const prefix = (...parts: unknown[]) => [tableId, ...parts];
  const clear = (matches: (ref: ColumnRef) => boolean) => {
    for (const tracked of versions.values()) if (matches(tracked.ref)) tracked.timestamps.clear();
  };
  for (const entry of entries) {
    const key = entry.key;
    for (const mutation of entry.mutations) {
      if (slices.dueAfterItem()) await slices.next();
      switch (mutation.type) {
        case 'set': {
          const hash = columnHash(mutation.column);
          writes.push({
            kind: 'upsert',
            row: { table_id: tableId, row_key: key, family: mutation.family, col_hash: hash, ts: mutation.timestampMicros.toString(), col: mutation.column, value: mutation.value },
          });
          if (hasPolicy(policies.get(mutation.family))) track({ key, family: mutation.family, hash }).timestamps.add(mutation.timestampMicros);
          break;
        }
        case 'deleteColumn': {
          const hash = columnHash(mutation.column);
          writes.push({ kind: 'deleteRange', range: { startClosed: prefix(key, mutation.family, hash), endClosed: prefix(key, mutation.family, hash) } });
          clear((ref) => ref.key.equals(key) && ref.family === mutation.family && ref.hash.equals(hash));
          deleted.add(columnId(key, mutation.family, hash));
          break;
        }
        case 'deleteFamily':
          writes.push({ kind: 'deleteRange', range: { startClosed: prefix(key, mutation.family), endClosed: prefix(key, mutation.family) } });
          clear((ref) => ref.key.equals(key) && ref.family === mutation.family);
          deleted.add(`family ${key.toString('hex')} ${mutation.family}`);
          break;
        case 'deleteRow':
          writes.push({ kind: 'deleteRange', range: { startClosed: prefix(key), endClosed: prefix(key) } });
          clear((ref) => ref.key.equals(key));
          deleted.add(`row ${key.toString('hex')}`);
          break;
      }
    }
  }
  for (const { ref, timestamps } of versions.values()) {
    if (slices.dueAfterItem()) await slices.next();
    const policy = policies.get(ref.family) ?? {};
    const newest = [...timestamps].sort((x, y) => (x > y ? -1 : x < y ? 1 : 0));
    // ts is stored descending: versions older than a given one come after it in key order.
    const olderThan = (ts: Micros): CellWrite => ({
      kind: 'deleteRange',
      range: { startOpen: prefix(ref.key, ref.family, ref.hash, ts.toString()), endClosed: prefix(ref.key, ref.family, ref.hash) },
    });
    const keep = policy.maxVersions ?? Infinity;
    // Expired means older than the cutoff; a version exactly at it is still kept.
    const cutoff = policy.maxAgeSeconds === undefined ? undefined : nowMicros - BigInt(policy.maxAgeSeconds) * 1_000_000n;
    const firstExpired = cutoff === undefined ? -1 : newest.findIndex((ts) => ts < cutoff);
    const kept = Math.min(newest.length, keep, firstExpired === -1 ? Infinity : firstExpired);
    if (newest.length - kept === 1) {
      writes.push({ kind: 'deleteKey', key: prefix(ref.key, ref.family, ref.hash, (newest[kept] as Micros).toString()) });
      continue;
    }
    if (newest.length > keep) writes.push(olderThan(newest[keep - 1] as Micros));
    if (cutoff !== undefined) {
      const oldest = newest[Math.min(newest.length, keep) - 1];
      if (oldest !== undefined && oldest < cutoff) writes.push(olderThan(cutoff));
    }
  }
  checkCommit(writes);
  return writes;
}

function hasPolicy(policy: FamilyPolicy | undefined): boolean {
  return policy !== undefined && (policy.maxVersions !== undefined || policy.maxAgeSeconds !== undefined);
}

/**
 * Refuses writes that one Spanner commit cannot hold; `extra`: what else the commit writes (the
 * change feed's rows).
 */
export function checkCommit(writes: readonly CellWrite[], extra = { mutations: 0, bytes: 0 }): void {
  let mutations = extra.mutations;
  let bytes = extra.bytes;
  for (const write of writes) {
    if (write.kind === 'upsert') {
      const row = write.row;
      mutations += COLUMNS_PER_CELL;
      bytes += row.table_id.length + row.row_key.length + row.family.length + row.col_hash.length + 8 + row.col.length + row.value.length;
    } else {
      mutations += 1;
    }
  }
  if (mutations > MUTATIONS_PER_COMMIT) {
    throw new StoreError('INVALID_ARGUMENT', `spanner: the write needs ${mutations} mutations; one commit holds at most ${MUTATIONS_PER_COMMIT}`, { limit: 'mutationsPerRow' });
  }
  if (bytes > BYTES_PER_COMMIT) {
    throw new StoreError('INVALID_ARGUMENT', `spanner: the write holds ${bytes} bytes with its keys; one commit holds at most ${BYTES_PER_COMMIT}`, { limit: 'bytesPerRow' });
  }
}
