import type { protos } from '@google-cloud/bigtable';
import type { Change, Micros, Mutation } from '../store.ts';

type DataChange = protos.google.bigtable.v2.ReadChangeStreamResponse.IDataChange;
type ProtoMutation = protos.google.bigtable.v2.IMutation;
type Timestamp = protos.google.protobuf.ITimestamp;

/** A protobuf Timestamp (seconds as a decimal string or number, nanos) in microseconds. */
export function timestampMicros(timestamp: Timestamp | null | undefined): Micros {
  if (timestamp === null || timestamp === undefined) return 0n;
  return BigInt(String(timestamp.seconds ?? 0)) * 1_000_000n + BigInt(Math.floor(Number(timestamp.nanos ?? 0) / 1000));
}

/** Microseconds as a protobuf Timestamp. */
export function timestampOf(micros: Micros): { seconds: string; nanos: number } {
  return { seconds: String(micros / 1_000_000n), nanos: Number(micros % 1_000_000n) * 1000 };
}

/**
 * DataChangeAssembler joins the messages of one partition's stream into whole changes: a
 * DataChange may come in several messages (the later ones typed CONTINUATION, the last `done`),
 * and a SetCell's value in chunks (chunk_info), which are concatenated.
 */
export class DataChangeAssembler {
  #first: DataChange | undefined;
  #mutations: ProtoMutation[] = [];
  /** The SetCell whose value is still coming in chunks. */
  #chunked: { mutation: ProtoMutation; parts: Buffer[]; size: number } | undefined;

  /** Takes one DataChange message; returns the whole change once its last message came. */
  take(message: DataChange): { first: DataChange; mutations: ProtoMutation[] } | undefined {
    this.#first ??= message;
    for (const chunk of message.chunks ?? []) {
      const info = chunk.chunkInfo;
      const mutation = chunk.mutation ?? {};
      if (info === null || info === undefined || !(Number(info.chunkedValueSize ?? 0) > 0)) {
        this.#mutations.push(mutation);
        continue;
      }
      const value = Buffer.from(mutation.setCell?.value ?? Buffer.alloc(0));
      if (Number(info.chunkedValueOffset ?? 0) === 0 || this.#chunked === undefined) this.#chunked = { mutation, parts: [], size: Number(info.chunkedValueSize) };
      this.#chunked.parts.push(value);
      if (info.lastChunk === true) {
        const whole = Buffer.concat(this.#chunked.parts);
        if (whole.length !== this.#chunked.size) throw new Error(`a chunked SetCell of ${this.#chunked.size} bytes came with ${whole.length}`);
        const setCell = this.#chunked.mutation.setCell ?? {};
        this.#mutations.push({ setCell: { ...setCell, value: whole } });
        this.#chunked = undefined;
      }
    }
    if (message.done !== true) return undefined;
    const whole = { first: this.#first, mutations: this.#mutations };
    this.reset();
    return whole;
  }

  /** Forgets a change half read: its stream broke, and is read again from the last token. */
  reset(): void {
    this.#first = undefined;
    this.#mutations = [];
    this.#chunked = undefined;
  }
}

/**
 * The Change of a user's DataChange, or undefined for one that changes nothing a reader sees:
 * garbage collection, and the time-ranged DeleteFromColumn this store writes only to remove
 * versions already expired (before a readModifyWrite). Mutations of other kinds (AddToCell,
 * MergeToCell: aggregate families, which this store does not create) are not represented.
 */
export function changeOf(first: DataChange, mutations: readonly ProtoMutation[]): Change | undefined {
  if (first.type === 'GARBAGE_COLLECTION' || (first.type as unknown) === 2) return undefined;
  const applied: Mutation[] = [];
  for (const mutation of mutations) {
    if (mutation.setCell) {
      const cell = mutation.setCell;
      applied.push({
        type: 'set',
        family: cell.familyName ?? '',
        column: Buffer.from(cell.columnQualifier ?? Buffer.alloc(0)),
        value: Buffer.from(cell.value ?? Buffer.alloc(0)),
        timestampMicros: BigInt(String(cell.timestampMicros ?? 0)),
      });
    } else if (mutation.deleteFromColumn) {
      const range = mutation.deleteFromColumn.timeRange;
      const ranged = range !== null && range !== undefined && (BigInt(String(range.startTimestampMicros ?? 0)) > 0n || BigInt(String(range.endTimestampMicros ?? 0)) > 0n);
      if (!ranged) applied.push({ type: 'deleteColumn', family: mutation.deleteFromColumn.familyName ?? '', column: Buffer.from(mutation.deleteFromColumn.columnQualifier ?? Buffer.alloc(0)) });
    } else if (mutation.deleteFromFamily) {
      applied.push({ type: 'deleteFamily', family: mutation.deleteFromFamily.familyName ?? '' });
    } else if (mutation.deleteFromRow) {
      applied.push({ type: 'deleteRow' });
    }
  }
  if (applied.length === 0) return undefined;
  return { key: Buffer.from(first.rowKey ?? Buffer.alloc(0)), commitMicros: timestampMicros(first.commitTimestamp), mutations: applied };
}
