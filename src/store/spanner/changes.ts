import { Spanner } from '@google-cloud/spanner';
import type { Mutation, RowMutations } from '../store.ts';

/**
 * What a commit did to one row, as kvcrud_changes holds it (schema.ts): the mutation lists of the
 * row's entries in the commit, in order (a mutateRows may name a key twice), as applied. JSON, with
 * bytes as base64 and timestamps as decimal strings, so that any SQL reader can read it.
 */
export type StoredMutation =
  | { readonly t: 'set'; readonly f: string; readonly c: string; readonly v: string; readonly ts: string }
  | { readonly t: 'deleteColumn'; readonly f: string; readonly c: string }
  | { readonly t: 'deleteFamily'; readonly f: string }
  | { readonly t: 'deleteRow' };

export interface ChangeRow {
  table_id: string;
  row_key: Buffer;
  committed: unknown;
  part: string;
  changes: Buffer;
}

/** Bytes of one part of a row's changes: Spanner holds at most 10 MiB in a BYTES value. */
export const CHANGE_PART_BYTES = 8 * 1024 * 1024;

/** The kvcrud_changes rows recording `entries`, one per row key, to commit with them. */
export function changeRows(tableId: string, entries: readonly RowMutations[]): ChangeRow[] {
  const byKey = new Map<string, { key: Buffer; lists: StoredMutation[][] }>();
  for (const entry of entries) {
    const id = entry.key.toString('hex');
    let row = byKey.get(id);
    if (row === undefined) {
      row = { key: entry.key, lists: [] };
      byKey.set(id, row);
    }
    row.lists.push(
      entry.mutations.map((mutation): StoredMutation => {
        switch (mutation.type) {
          case 'set':
            return { t: 'set', f: mutation.family, c: mutation.column.toString('base64'), v: mutation.value.toString('base64'), ts: mutation.timestampMicros.toString() };
          case 'deleteColumn':
            return { t: 'deleteColumn', f: mutation.family, c: mutation.column.toString('base64') };
          case 'deleteFamily':
            return { t: 'deleteFamily', f: mutation.family };
          case 'deleteRow':
            return { t: 'deleteRow' };
        }
      }),
    );
  }
  return [...byKey.values()].flatMap((row) => {
    const changes = Buffer.from(JSON.stringify(row.lists));
    const parts = Math.max(1, Math.ceil(changes.length / CHANGE_PART_BYTES));
    return Array.from({ length: parts }, (_, part) => ({
      table_id: tableId,
      row_key: row.key,
      committed: Spanner.COMMIT_TIMESTAMP,
      part: String(part),
      changes: changes.subarray(part * CHANGE_PART_BYTES, (part + 1) * CHANGE_PART_BYTES),
    }));
  });
}

/** What the change rows add to a commit: Spanner's mutations (one per column) and bytes. */
export function changeRowCost(rows: readonly ChangeRow[]): { mutations: number; bytes: number } {
  return { mutations: rows.length * 5, bytes: rows.reduce((sum, row) => sum + row.table_id.length + row.row_key.length + 20 + row.changes.length, 0) };
}

/** The mutation lists of a row's kvcrud_changes parts, joined; undefined when they are not what this store writes. */
export function readChanges(bytes: Buffer): Mutation[][] | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(bytes.toString('utf8'));
  } catch {
    return undefined;
  }
  if (!Array.isArray(parsed)) return undefined;
  const lists: Mutation[][] = [];
  for (const list of parsed as unknown[]) {
    if (!Array.isArray(list)) return undefined;
    const mutations: Mutation[] = [];
    for (const item of list as StoredMutation[]) {
      switch (item.t) {
        case 'set':
          mutations.push({ type: 'set', family: item.f, column: Buffer.from(item.c, 'base64'), value: Buffer.from(item.v, 'base64'), timestampMicros: BigInt(item.ts) });
          break;
        case 'deleteColumn':
          mutations.push({ type: 'deleteColumn', family: item.f, column: Buffer.from(item.c, 'base64') });
          break;
        case 'deleteFamily':
          mutations.push({ type: 'deleteFamily', family: item.f });
          break;
        case 'deleteRow':
          mutations.push({ type: 'deleteRow' });
          break;
        default:
          return undefined;
      }
    }
    lists.push(mutations);
  }
  return lists;
}
