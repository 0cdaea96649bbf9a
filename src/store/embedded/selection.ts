import type { Decoder, Encoder } from './codec.ts';
import { ALL_COLUMNS } from './protocol.ts';
import type { FamilyPolicy, ReadSelection } from '../store.ts';

const EMPTY = new Uint8Array(0);

/** A selected family (column null) or column, as the read threads use it. */
export interface Selector {
  readonly family: string;
  readonly column: Uint8Array | null;
}

/** What one read keeps of each family: the newest `limit` versions no older than `cutoff`. */
export interface FamilyRule {
  readonly limit: number;
  /** Versions with a timestamp below this (microseconds) have expired. */
  readonly cutoff: bigint | undefined;
}

export interface ReadPlan {
  /** Sorted by family then column, a family absorbing its columns; undefined: every column. */
  readonly selectors: readonly Selector[] | undefined;
  readonly rules: ReadonlyMap<string, FamilyRule>;
}

export function encodeSelection(encoder: Encoder, selection: ReadSelection): void {
  encoder.u32(selection.versions);
  const columns = selection.columns;
  if (columns === undefined) {
    encoder.u32(ALL_COLUMNS);
    return;
  }
  encoder.u32(columns.length);
  for (const selector of columns) {
    encoder.string(selector.family);
    if (selector.column === undefined) {
      encoder.u8(0);
    } else {
      encoder.u8(1);
      encoder.bytes(selector.column);
    }
  }
}

export interface DecodedSelection {
  readonly versions: number;
  readonly selectors: readonly Selector[] | undefined;
}

export function decodeSelection(decoder: Decoder): DecodedSelection {
  const versions = decoder.u32();
  const count = decoder.u32();
  if (count === ALL_COLUMNS) return { versions, selectors: undefined };
  const selectors: Selector[] = [];
  for (let i = 0; i < count; i++) {
    const family = decoder.string();
    selectors.push({ family, column: decoder.u8() === 1 ? decoder.bytes() : null });
  }
  return { versions, selectors: normalize(selectors) };
}

/** The table's families with their retention policies, as the read threads look them up. */
export type FamilyPolicies = ReadonlyMap<string, FamilyPolicy>;

/** Combines what the caller asks for with each family's retention policy, at `nowMicros`. */
export function readPlan(selection: DecodedSelection, families: FamilyPolicies, nowMicros: bigint): ReadPlan {
  const rules = new Map<string, FamilyRule>();
  for (const [name, policy] of families) {
    rules.set(name, {
      limit: Math.min(selection.versions, policy.maxVersions ?? Number.POSITIVE_INFINITY),
      cutoff: policy.maxAgeSeconds === undefined ? undefined : nowMicros - BigInt(policy.maxAgeSeconds) * 1_000_000n,
    });
  }
  return { selectors: selection.selectors, rules };
}

/** Sorts selectors in key order and drops columns of a family that is selected whole, and repeats. */
function normalize(selectors: readonly Selector[]): Selector[] {
  const wholeFamilies = new Set(selectors.filter((s) => s.column === null).map((s) => s.family));
  const sorted = selectors
    .filter((s) => s.column === null || !wholeFamilies.has(s.family))
    .toSorted((a, b) => compareSelectors(a, b));
  return sorted.filter((s, i) => i === 0 || compareSelectors(sorted[i - 1] as Selector, s) !== 0);
}

function compareSelectors(a: Selector, b: Selector): number {
  if (a.family !== b.family) return a.family < b.family ? -1 : 1;
  return Buffer.compare(a.column ?? EMPTY, b.column ?? EMPTY);
}

/** The position to seek to for a selector: a family starts at its empty column. */
export function selectorColumn(selector: Selector): Uint8Array {
  return selector.column ?? EMPTY;
}

/** Whether `selector` lies wholly before the cell (family, column) in key order. */
export function selectorBefore(selector: Selector, family: string, column: Uint8Array): boolean {
  if (selector.family !== family) return selector.family < family;
  return selector.column !== null && Buffer.compare(selector.column, column) < 0;
}

export function selectorMatches(selector: Selector, family: string, column: Uint8Array): boolean {
  return selector.family === family && (selector.column === null || sameBytes(selector.column, column));
}

export function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  const length = a.byteLength;
  if (length !== b.byteLength) return false;
  if (length > 32) return Buffer.compare(a, b) === 0;
  for (let i = 0; i < length; i++) if (a[i] !== b[i]) return false;
  return true;
}
