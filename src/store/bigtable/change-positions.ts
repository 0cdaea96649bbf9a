import { deflateRawSync, inflateRawSync } from 'node:zlib';
import { StoreError } from '../errors.ts';
import { FEED_POSITION_CHARS, type Micros } from '../store.ts';

/**
 * A key range of the table, as Bigtable's StreamPartition gives it: [start, end), base64url
 * bytes, the empty string meaning the table's first (start) or last (end) key.
 */
export interface KeySpan {
  readonly s: string;
  readonly e: string;
}

/** A StreamContinuationToken: where reading a partition (the span) goes on. */
export interface Continuation extends KeySpan {
  readonly t: string;
}

/**
 * One partition being read: from its continuation tokens (`k`, one per span that together cover
 * it), or, before it has given any, from a commit time (`since`). `m` is its latest estimated low
 * watermark, in microseconds.
 */
export interface PartitionState extends KeySpan {
  readonly k?: readonly Continuation[];
  readonly since?: string;
  readonly m: string;
}

/**
 * What a feed position holds: the table's name hashed (a position of another table is one this
 * store never made for it), the partitions read, and the new partitions of a merge still waiting
 * for the tokens of every partition merged into them. `since` alone: the partitions are not yet
 * known, every one is read from that commit time.
 */
export interface FeedState {
  readonly h: string;
  readonly since?: string;
  readonly u: readonly PartitionState[];
  readonly w: ReadonlyArray<KeySpan & { readonly k: readonly Continuation[] }>;
}

const PREFIX = 'b1.';
/** Most bytes a position inflates to: far more than FEED_POSITION_CHARS of deflated JSON can honestly hold. */
const MAX_STATE_BYTES = 1024 * 1024;

/**
 * encodePosition writes a state as printable ASCII: `b1.` and the base64url of its JSON, deflated
 * (a token whose span is its partition's is written without the span). A state too large for
 * FEED_POSITION_CHARS (a table read in many partitions) fails the feed INTERNAL rather than yield
 * a position no caller could hand back.
 */
export function encodePosition(state: FeedState): string {
  const compact = {
    ...state,
    u: state.u.map((unit) => (unit.k === undefined ? unit : { ...unit, k: unit.k.map((token) => (token.s === unit.s && token.e === unit.e ? { t: token.t } : token)) })),
  };
  const position = PREFIX + deflateRawSync(JSON.stringify(compact)).toString('base64url');
  if (position.length > FEED_POSITION_CHARS) {
    throw new StoreError('INTERNAL', `bigtable change feed: the position of ${state.u.length} partitions is ${position.length} characters, over ${FEED_POSITION_CHARS}`);
  }
  return position;
}

/** decodePosition reads a position encodePosition made for the table hashed `tableHash`; INVALID_ARGUMENT otherwise. */
export function decodePosition(position: string, tableHash: string): FeedState {
  const invalid = () => new StoreError('INVALID_ARGUMENT', 'bigtable change feed: not a position of this table');
  if (!position.startsWith(PREFIX) || !/^[A-Za-z0-9_-]*$/.test(position.slice(PREFIX.length))) throw invalid();
  let state: unknown;
  try {
    state = JSON.parse(inflateRawSync(Buffer.from(position.slice(PREFIX.length), 'base64url'), { maxOutputLength: MAX_STATE_BYTES }).toString('utf8'));
    const units = (state as { u?: unknown }).u;
    if (Array.isArray(units)) {
      for (const unit of units as Array<{ s?: unknown; e?: unknown; k?: unknown }>) {
        if (Array.isArray(unit.k)) unit.k = (unit.k as Array<Record<string, unknown>>).map((token) => ('s' in token ? token : { s: unit.s, e: unit.e, ...token }));
      }
    }
  } catch {
    throw invalid();
  }
  if (!isFeedState(state) || state.h !== tableHash) throw invalid();
  return state;
}

/** The oldest commit time a state still reads from: its partitions' least low watermark. */
export function stateMicros(state: FeedState): Micros {
  if (state.u.length === 0) return BigInt(state.since ?? '0');
  return state.u.reduce((least, unit) => (BigInt(unit.m) < least ? BigInt(unit.m) : least), BigInt((state.u[0] as PartitionState).m));
}

/** A short hash of the table's full name (FNV-1a, 32 bits), to tell one table's positions from another's. */
export function tableHash(tableName: string): string {
  let hash = 0x811c9dc5;
  for (const byte of Buffer.from(tableName)) hash = Math.imul(hash ^ byte, 0x01000193) >>> 0;
  return hash.toString(36);
}

const isString = (value: unknown): value is string => typeof value === 'string';
const isMicros = (value: unknown): value is string => isString(value) && /^\d{1,20}$/.test(value);
const isSpan = (value: unknown): value is KeySpan => typeof value === 'object' && value !== null && isString((value as KeySpan).s) && isString((value as KeySpan).e);
const isContinuations = (value: unknown): value is Continuation[] => Array.isArray(value) && value.length > 0 && value.every((item) => isSpan(item) && isString((item as Continuation).t));

function isFeedState(value: unknown): value is FeedState {
  if (typeof value !== 'object' || value === null) return false;
  const state = value as Partial<FeedState>;
  if (!isString(state.h) || !Array.isArray(state.u) || !Array.isArray(state.w)) return false;
  if (state.since !== undefined && !isMicros(state.since)) return false;
  if (state.u.length === 0 && state.since === undefined) return false;
  const unitsOk = state.u.every(
    (unit: PartitionState) => isSpan(unit) && isMicros(unit.m) && (unit.k === undefined ? isMicros(unit.since) : isContinuations(unit.k) && unit.since === undefined),
  );
  return unitsOk && state.w.every((waiting: unknown) => isSpan(waiting) && isContinuations((waiting as { k?: unknown }).k));
}
