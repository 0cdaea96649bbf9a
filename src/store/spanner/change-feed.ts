import { type Database, type Session, Spanner } from '@google-cloud/spanner';
import { status as GrpcStatus } from '@grpc/grpc-js';
import { StoreError } from '../errors.ts';
import type { ChangeEvent } from '../store.ts';
import { FEED_PROGRESS_MS } from '../store.ts';
import { readChanges } from './changes.ts';
import { FEED_STREAM } from './schema.ts';
import { grpcCode, toStoreError } from './spanner-errors.ts';

/**
 * Where a feed is: every change of table `tableId` committed at or before `nanos` (a commit
 * timestamp, in nanoseconds) has been delivered, except, when `seen` is set, the changes at
 * exactly `nanos` after the first `seen` of them in the feed's order there (row key, then entry).
 * Printed as `s1.<tableId>.<nanos>[.<seen>]`.
 */
export interface FeedPosition {
  readonly tableId: string;
  readonly nanos: bigint;
  readonly seen?: number;
}

const POSITION = /^s1\.([0-9a-f]{32})\.(0|[1-9][0-9]{0,20})(?:\.(0|[1-9][0-9]{0,8}))?$/;

export function encodePosition(position: FeedPosition): string {
  return `s1.${position.tableId}.${position.nanos}${position.seen === undefined ? '' : `.${position.seen}`}`;
}

export function decodePosition(text: string): FeedPosition | undefined {
  const match = POSITION.exec(text);
  if (match === null) return undefined;
  return { tableId: match[1] as string, nanos: BigInt(match[2] as string), ...(match[3] === undefined ? {} : { seen: Number(match[3]) }) };
}

/**
 * How often each partition of the change stream reports progress when it has no change: the
 * least Spanner takes (1 second to 5 minutes). A change waits up to that long for every partition
 * to pass it.
 */
const HEARTBEAT_MS = 1000;

/** A change buffered until every partition has passed its commit timestamp. */
interface Pending {
  readonly nanos: bigint;
  readonly key: Buffer;
  /** One part of the kvcrud_changes row's `changes` (changes.ts). */
  readonly part: number;
  readonly changes: Buffer;
}

/** One query of READ_kvcrud_feed: the initial one (no token) or one partition's. */
interface Partition {
  /** Every record of this partition committed at or before this has been handled. */
  complete: bigint;
  stop(): void;
}

interface ChildPartition {
  readonly token: string;
  readonly start: bigint;
  readonly parents: readonly string[];
}

interface StreamRecord {
  data_change_record?: DataChangeRecord[];
  heartbeat_record?: Array<{ timestamp: unknown }>;
  child_partitions_record?: Array<{ start_timestamp: unknown; child_partitions: Array<{ token: string; parent_partition_tokens: string[] }> }>;
}

interface DataChangeRecord {
  commit_timestamp: unknown;
  table_name: string;
  mod_type: string;
  mods: Array<{ keys: unknown; new_values: unknown }>;
}

export interface FeedTarget {
  readonly database: Database;
  /** The kvcrud table's name, whose catalog row's deletion ends the feed. */
  readonly name: string;
  readonly tableId: string;
  /** When the catalog did not hold this table at the start: the read timestamp that found it so. */
  readonly goneBy?: bigint;
}

/**
 * follow reads the change stream from `start` and yields the target table's changes in commit
 * timestamp order (across keys too: a change is yielded once every partition has passed its
 * commit timestamp), a commit's changes in row key order. It reads every partition of the stream,
 * starting child partitions once their parents are done (a split or a merge), and ends with
 * NOT_FOUND at the commit that deleted the table's catalog row, after every change before it.
 */
export async function* follow(target: FeedTarget, start: FeedPosition, signal: AbortSignal): AsyncGenerator<ChangeEvent> {
  const partitions = new Map<string, Partition>();
  const children = new Map<string, ChildPartition>();
  const known = new Set<string>();
  let pending: Pending[] = [];
  let deletedAt: bigint | undefined;
  let failure: unknown;
  let wake: (() => void) | undefined;
  const notify = () => {
    const woken = wake;
    wake = undefined;
    woken?.();
  };

  const onRecord = (partition: Partition, token: string | null, record: StreamRecord) => {
    for (const data of record.data_change_record ?? []) {
      const nanos = timestampNanos(data.commit_timestamp);
      if (data.table_name === 'kvcrud_changes' && data.mod_type === 'INSERT') {
        for (const mod of data.mods) {
          const keys = jsonObject(mod.keys);
          if (keys['table_id'] !== target.tableId) continue;
          const values = jsonObject(mod.new_values);
          const part = Number(keys['part']);
          if (typeof values['changes'] !== 'string' || typeof keys['row_key'] !== 'string' || !Number.isSafeInteger(part)) {
            throw new StoreError('INTERNAL', 'spanner: a kvcrud_changes row this store cannot read');
          }
          pending.push({ nanos, key: Buffer.from(keys['row_key'], 'base64'), part, changes: Buffer.from(values['changes'], 'base64') });
        }
      } else if (data.table_name === 'kvcrud_tables' && data.mod_type === 'DELETE') {
        if (data.mods.some((mod) => jsonObject(mod.keys)['name'] === target.name) && (deletedAt === undefined || nanos < deletedAt)) deletedAt = nanos;
      }
      if (nanos - 1n > partition.complete) partition.complete = nanos - 1n;
    }
    for (const heartbeat of record.heartbeat_record ?? []) {
      const nanos = timestampNanos(heartbeat.timestamp);
      if (nanos > partition.complete) partition.complete = nanos;
    }
    for (const split of record.child_partitions_record ?? []) {
      const begins = timestampNanos(split.start_timestamp);
      if (begins - 1n > partition.complete) partition.complete = begins - 1n;
      for (const child of split.child_partitions) {
        if (known.has(child.token)) continue;
        known.add(child.token);
        children.set(child.token, { token: child.token, start: begins, parents: token === null ? [] : child.parent_partition_tokens });
      }
    }
  };

  const startReady = () => {
    for (const child of [...children.values()]) {
      if (child.parents.some((parent) => partitions.has(parent))) continue;
      children.delete(child.token);
      open(child.token, child.start);
    }
  };

  const open = (token: string | null, from: bigint) => {
    const key = token ?? '';
    let stopped = false;
    let session: Session | undefined;
    let stream: (NodeJS.ReadableStream & { destroy(error?: Error): void }) | undefined;
    const partition: Partition = {
      complete: from - 1n,
      stop: () => {
        stopped = true;
        stream?.destroy();
        if (session !== undefined) void session.delete().catch(() => undefined);
      },
    };
    partitions.set(key, partition);
    void (async () => {
      try {
        [session] = await target.database.createSession({});
        if (stopped) {
          void session.delete().catch(() => undefined);
          return;
        }
        stream = session.snapshot({ strong: true }).runStream({
          sql: `SELECT ChangeRecord FROM READ_${FEED_STREAM}(start_timestamp => @start, end_timestamp => NULL, partition_token => @token, heartbeat_milliseconds => @heartbeat)`,
          params: { start: nanosTimestamp(from), token, heartbeat: HEARTBEAT_MS },
          types: { start: 'timestamp', token: 'string', heartbeat: 'int64' },
          json: true,
        });
        stream.on('data', (row: { ChangeRecord: StreamRecord[] }) => {
          try {
            for (const record of row.ChangeRecord) onRecord(partition, token, record);
          } catch (error) {
            failure ??= error;
          }
          startReady();
          notify();
        });
        stream.on('error', (error: unknown) => {
          if (!stopped) failure ??= error;
          notify();
        });
        stream.on('end', () => {
          partitions.delete(key);
          if (session !== undefined) void session.delete().catch(() => undefined);
          startReady();
          notify();
        });
      } catch (error) {
        if (!stopped) failure ??= error;
        notify();
      }
    })();
  };

  /** Every partition has handled all records committed at or before this. */
  const watermark = (): bigint => {
    let low: bigint | undefined;
    for (const partition of partitions.values()) if (low === undefined || partition.complete < low) low = partition.complete;
    for (const child of children.values()) if (low === undefined || child.start - 1n < low) low = child.start - 1n;
    return low ?? start.nanos;
  };

  const onAbort = () => notify();
  signal.addEventListener('abort', onAbort);
  let nanos = start.nanos;
  let seen = start.seen;
  try {
    open(null, start.seen === undefined ? start.nanos + 1n : start.nanos);
    yield { type: 'progress', position: encodePosition({ tableId: target.tableId, nanos, ...(seen === undefined ? {} : { seen }) }) };
    let lastEvent = Date.now();
    while (!signal.aborted) {
      if (failure !== undefined) throw feedError(failure);
      const through = watermark();
      const ready = pending.filter((change) => change.nanos <= through && (deletedAt === undefined || change.nanos < deletedAt));
      if (ready.length > 0) {
        pending = pending.filter((change) => change.nanos > through);
        ready.sort((a, b) => (a.nanos !== b.nanos ? (a.nanos < b.nanos ? -1 : 1) : Buffer.compare(a.key, b.key) || a.part - b.part));
        // A row's parts, joined: they are adjacent once sorted.
        const rows: Array<{ nanos: bigint; key: Buffer; parts: Buffer[] }> = [];
        for (const part of ready) {
          const last = rows.at(-1);
          if (last !== undefined && last.nanos === part.nanos && last.key.equals(part.key)) last.parts.push(part.changes);
          else rows.push({ nanos: part.nanos, key: part.key, parts: [part.changes] });
        }
        const expanded = rows.flatMap((row) => {
          const lists = readChanges(Buffer.concat(row.parts));
          if (lists === undefined) throw new StoreError('INTERNAL', 'spanner: a kvcrud_changes row this store cannot read');
          return lists.map((mutations) => ({ nanos: row.nanos, key: row.key, mutations }));
        });
        let at: bigint | undefined;
        let ordinal = 0;
        for (const change of expanded) {
          ordinal = change.nanos === at ? ordinal + 1 : 0;
          at = change.nanos;
          // Delivered already: before the start, or at it among the first `seen`.
          if (change.nanos < nanos || (change.nanos === nanos && (seen === undefined || ordinal < seen))) continue;
          nanos = change.nanos;
          seen = ordinal + 1;
          yield {
            type: 'change',
            change: { key: change.key, commitMicros: change.nanos / 1000n, mutations: change.mutations },
            position: encodePosition({ tableId: target.tableId, nanos, seen }),
          };
          lastEvent = Date.now();
          if (signal.aborted) return;
        }
        continue;
      }
      if ((deletedAt !== undefined && through >= deletedAt) || (target.goneBy !== undefined && through >= target.goneBy)) {
        throw new StoreError('NOT_FOUND', `table ${target.name} was deleted`, { resource: 'table', name: target.name });
      }
      const waitMs = Math.max(0, lastEvent + FEED_PROGRESS_MS / 2 - Date.now());
      if (waitMs === 0) {
        if (through > nanos) {
          nanos = through;
          seen = undefined;
        }
        yield { type: 'progress', position: encodePosition({ tableId: target.tableId, nanos, ...(seen === undefined ? {} : { seen }) }) };
        lastEvent = Date.now();
        continue;
      }
      await new Promise<void>((resolve) => {
        const timer = setTimeout(() => {
          wake = undefined;
          resolve();
        }, waitMs);
        wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
    }
  } finally {
    signal.removeEventListener('abort', onAbort);
    for (const partition of partitions.values()) partition.stop();
    partitions.clear();
    children.clear();
  }
}

function feedError(error: unknown): StoreError {
  if (grpcCode(error) === GrpcStatus.OUT_OF_RANGE) return new StoreError('OUT_OF_RANGE', 'spanner readChanges: the start is older than the change stream keeps', { cause: error });
  return toStoreError(error, 'readChanges');
}

/** A Spanner TIMESTAMP as the client gives it (a PreciseDate, or its RFC 3339 text) in nanoseconds. */
export function timestampNanos(value: unknown): bigint {
  const precise = value as { getFullTimeString?: () => string } | null;
  if (typeof precise?.getFullTimeString === 'function') return BigInt(precise.getFullTimeString());
  const match = /^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?(Z|[+-]\d\d:\d\d)$/.exec(String(value));
  if (match === null) throw new StoreError('INTERNAL', `spanner: a timestamp this store cannot read: ${String(value).slice(0, 40)}`);
  const millis = Date.parse(`${match[1] as string}${match[3] as string}`);
  return BigInt(millis) * 1_000_000n + BigInt((match[2] ?? '').padEnd(9, '0'));
}

/** Nanoseconds as a TIMESTAMP parameter. */
export function nanosTimestamp(nanos: bigint): unknown {
  return Spanner.timestamp({ seconds: Number(nanos / 1_000_000_000n), nanos: Number(nanos % 1_000_000_000n) });
}

function jsonObject(value: unknown): Record<string, unknown> {
  const parsed: unknown = typeof value === 'string' ? JSON.parse(value) : value;
  return typeof parsed === 'object' && parsed !== null ? (parsed as Record<string, unknown>) : {};
}
