import { createRequire } from 'node:module';
import type { protos } from '@google-cloud/bigtable';
import { Metadata, Server, ServerCredentials, type ServerWritableStream, type ServiceDefinition, status } from '@grpc/grpc-js';
import type { Mutation } from '../../src/store/store.ts';

// The message classes the Bigtable client itself uses (compiled from the google.bigtable.v2 protos
// it ships), from the package it depends on: its main module does not export them at run time.
const requireFromClient = createRequire(import.meta.resolve('@google-cloud/bigtable'));
const { protos: messages } = requireFromClient('@google-cloud/bigtable-api') as { protos: typeof protos };
const v2 = messages.google.bigtable.v2;

type ReadChangeStreamRequest = protos.google.bigtable.v2.ReadChangeStreamRequest;
type ReadChangeStreamResponse = protos.google.bigtable.v2.IReadChangeStreamResponse;

const GENERATE = '/google.bigtable.v2.Bigtable/GenerateInitialChangeStreamPartitions';
const READ = '/google.bigtable.v2.Bigtable/ReadChangeStream';
const DELETE_TABLE = '/google.bigtable.admin.v2.BigtableTableAdmin/DeleteTable';

/** A key range [start, end); an empty Buffer is the table's first (start) or past its last key (end). */
interface Range {
  readonly start: Buffer;
  readonly end: Buffer;
}

interface Partition extends Range {
  /** The last record (sequence number) of the partition, once it was split or merged. */
  closedAt?: number;
  successors?: Partition[];
}

interface LoggedChange {
  readonly seq: number;
  readonly key: Buffer;
  readonly commitMicros: bigint;
  readonly type: 'USER' | 'GARBAGE_COLLECTION';
  readonly mutations: protos.google.bigtable.v2.IMutation[];
  readonly chunkBytes: number;
}

interface Table {
  /** A new one for a table created again under the same name: its tokens are not the old one's. */
  readonly generation: number;
  readonly log: LoggedChange[];
  partitions: Partition[];
  /** Every partition the table has had, by range, for streams resumed on a closed one. */
  readonly history: Map<string, Partition>;
  readonly streams: Set<ServerWritableStream<Buffer, Buffer>>;
}

/** How the stand-in sends one change: a SetCell value in chunks of this many bytes, a message per chunk. */
export interface WriteOptions {
  readonly chunkBytes?: number;
  readonly type?: 'USER' | 'GARBAGE_COLLECTION';
}

/**
 * ChangeStreamStandIn is a gRPC server for the two change stream RPCs of google.bigtable.v2
 * (GenerateInitialChangeStreamPartitions and ReadChangeStream), which the Bigtable emulator does
 * not serve, as their documentation in bigtable.proto describes them: partitions, continuation
 * tokens, heartbeats with low watermarks, DataChanges split across messages with chunked SetCell
 * values, CloseStream with new partitions after a split or a merge. It also serves the admin
 * DeleteTable. The test feeds it the changes (`write`) and changes its partitions (`split`,
 * `merge`); it keeps everything in memory.
 *
 * A token is the stand-in's own: the table's generation and, per key range, the last record read.
 */
export class ChangeStreamStandIn {
  /** ReadChangeStream calls, in order (their partitions as `start..end` in latin1, and how they start). */
  readonly reads: string[] = [];
  /** ReadChangeStream calls the client cancelled. */
  cancelled = 0;
  readonly #server = new Server();
  readonly #tables = new Map<string, Table>();
  readonly #withoutChangeStream = new Set<string>();
  #generation = 0;
  #port = 0;

  static async start(): Promise<ChangeStreamStandIn> {
    const standIn = new ChangeStreamStandIn();
    standIn.#server.addService(SERVICE, {
      [GENERATE]: (call: ServerWritableStream<Buffer, Buffer>) => standIn.#generate(call),
      [READ]: (call: ServerWritableStream<Buffer, Buffer>) => standIn.#read(call),
      [DELETE_TABLE]: (call: { request: Buffer }, callback: (error: { code: status; details: string } | null, response?: Buffer) => void) => {
        const { name } = messages.google.bigtable.admin.v2.DeleteTableRequest.decode(call.request);
        if (!standIn.#tables.has(name)) callback({ code: status.NOT_FOUND, details: `table ${name} not found` });
        else {
          standIn.deleteTable(name);
          callback(null, Buffer.alloc(0));
        }
      },
    });
    standIn.#port = await new Promise<number>((resolve, reject) =>
      standIn.#server.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (error, port) => (error ? reject(error) : resolve(port))),
    );
    return standIn;
  }

  get port(): number {
    return this.#port;
  }

  /**
   * Creates (or, after deleteTable, creates again) a table read in partitions split at `splits`;
   * without a change stream, the two RPCs answer FAILED_PRECONDITION for it.
   */
  createTable(name: string, splits: readonly Buffer[] = [], { changeStream = true } = {}): void {
    if (!changeStream) {
      this.#withoutChangeStream.add(name);
      return;
    }
    this.#withoutChangeStream.delete(name);
    const bounds = [Buffer.alloc(0), ...splits, Buffer.alloc(0)];
    const partitions = splits.length === 0 ? [{ start: Buffer.alloc(0), end: Buffer.alloc(0) }] : bounds.slice(1).map((end, index) => ({ start: bounds[index] as Buffer, end }));
    this.#generation += 1;
    this.#tables.set(name, { generation: this.#generation, log: [], partitions, history: new Map(partitions.map((p) => [rangeKey(p), p])), streams: new Set() });
  }

  hasTable(name: string): boolean {
    return this.#tables.has(name);
  }

  /** Deletes a table: its open streams end with NOT_FOUND. */
  deleteTable(name: string): void {
    const table = this.#tables.get(name);
    if (table === undefined) return;
    this.#tables.delete(name);
    for (const stream of table.streams) this.#end(table, stream, { code: status.NOT_FOUND, details: `table ${name} was deleted`, metadata: new Metadata() });
  }

  /** Ends every open stream of the table with UNAVAILABLE, as a broken connection would. */
  breakStreams(name: string): void {
    const table = this.#table(name);
    for (const stream of table.streams) this.#end(table, stream, { code: status.UNAVAILABLE, details: 'connection reset', metadata: new Metadata() });
  }

  /** Records a change committed now, as the table's change stream would: the store's mutations, or Bigtable's own. */
  write(name: string, key: Buffer, mutations: ReadonlyArray<Mutation | protos.google.bigtable.v2.IMutation>, options: WriteOptions = {}): void {
    const table = this.#table(name);
    const last = table.log.at(-1);
    const now = nowMicros();
    const commitMicros = last !== undefined && last.commitMicros >= now ? last.commitMicros + 1n : now;
    table.log.push({ seq: table.log.length + 1, key, commitMicros, type: options.type ?? 'USER', mutations: mutations.map((mutation) => ('type' in mutation ? protoMutation(mutation) : mutation)), chunkBytes: options.chunkBytes ?? 0 });
  }

  /** Splits the partition holding `at` in two there: its streams close with both halves as new partitions. */
  split(name: string, at: Buffer): void {
    const table = this.#table(name);
    const index = table.partitions.findIndex((p) => inRange(at, p) && Buffer.compare(p.start, at) !== 0);
    const old = table.partitions[index] as Partition;
    const halves = [
      { start: old.start, end: at },
      { start: at, end: old.end },
    ];
    old.closedAt = table.log.length;
    old.successors = halves;
    table.partitions.splice(index, 1, ...halves);
    for (const half of halves) table.history.set(rangeKey(half), half);
  }

  /** Merges the partition ending at `at` with the one starting there. */
  merge(name: string, at: Buffer): void {
    const table = this.#table(name);
    const index = table.partitions.findIndex((p) => p.end.length > 0 && Buffer.compare(p.end, at) === 0);
    const [left, right] = table.partitions.slice(index, index + 2) as [Partition, Partition];
    const merged = { start: left.start, end: right.end };
    for (const old of [left, right]) {
      old.closedAt = table.log.length;
      old.successors = [merged];
    }
    table.partitions.splice(index, 2, merged);
    table.history.set(rangeKey(merged), merged);
  }

  /** The table's partitions now, as `start..end` in latin1. */
  partitionsOf(name: string): string[] {
    return this.#table(name).partitions.map(showRange);
  }

  async close(): Promise<void> {
    this.#server.forceShutdown();
    return Promise.resolve();
  }

  #end(table: Table, stream: ServerWritableStream<Buffer, Buffer>, error: { code: status; details: string; metadata: Metadata }): void {
    table.streams.delete(stream);
    stream.emit('error', error);
  }

  #table(name: string): Table {
    const table = this.#tables.get(name);
    if (table === undefined) throw new Error(`no table ${name} in the stand-in`);
    return table;
  }

  #generate(call: ServerWritableStream<Buffer, Buffer>): void {
    const { tableName } = v2.GenerateInitialChangeStreamPartitionsRequest.decode(call.request);
    const table = this.#tables.get(tableName);
    if (this.#withoutChangeStream.has(tableName)) {
      call.emit('error', { code: status.FAILED_PRECONDITION, details: `change stream is not enabled for table ${tableName}`, metadata: new Metadata() });
      return;
    }
    if (table === undefined) {
      call.emit('error', { code: status.NOT_FOUND, details: `table ${tableName} not found`, metadata: new Metadata() });
      return;
    }
    for (const partition of table.partitions) call.write(Buffer.from(v2.GenerateInitialChangeStreamPartitionsResponse.encode({ partition: { rowRange: protoRange(partition) } }).finish()));
    call.end();
  }

  #read(call: ServerWritableStream<Buffer, Buffer>): void {
    const request: ReadChangeStreamRequest = v2.ReadChangeStreamRequest.decode(call.request);
    const fail = (code: status, details: string) => {
      call.emit('error', { code, details, metadata: new Metadata() });
    };
    const table = this.#tables.get(request.tableName);
    if (table === undefined) return fail(status.NOT_FOUND, `table ${request.tableName} not found`);
    const range = rangeOf(request.partition?.rowRange);
    const partition = table.history.get(rangeKey(range));
    if (partition === undefined) return fail(status.INVALID_ARGUMENT, `no partition ${showRange(range)}`);

    // Per key range, the last record already read.
    let floors: Array<Range & { seq: number }>;
    if (request.continuationTokens) {
      floors = [];
      for (const token of request.continuationTokens.tokens ?? []) {
        const decoded = decodeToken(token.token ?? '');
        if (decoded === undefined || decoded.generation !== table.generation) return fail(status.INVALID_ARGUMENT, 'not a continuation token of this table');
        floors.push(...decoded.floors);
      }
      this.reads.push(`${showRange(range)} from tokens`);
    } else {
      const since = timestampMicros(request.startTime);
      const seq = table.log.filter((change) => change.commitMicros < since).length;
      floors = [{ ...range, seq }];
      this.reads.push(`${showRange(range)} from ${since}`);
    }
    const floorOf = (key: Buffer) => floors.find((floor) => inRange(key, floor))?.seq ?? Number.POSITIVE_INFINITY;
    const heartbeatMs = Math.max(100, Number(request.heartbeatDuration?.seconds ?? 1) * 1000 + Math.floor((request.heartbeatDuration?.nanos ?? 0) / 1e6));
    const send = (response: ReadChangeStreamResponse) => call.write(Buffer.from(v2.ReadChangeStreamResponse.encode(response).finish()));
    const token = () => encodeToken(table.generation, floors);

    table.streams.add(call);
    let lastHeartbeat = Date.now();
    let closed = false;
    const tick = () => {
      if (closed || call.cancelled || !table.streams.has(call)) return;
      const limit = partition.closedAt ?? table.log.length;
      for (const change of table.log) {
        if (change.seq > limit) break;
        if (!inRange(change.key, partition) || change.seq <= floorOf(change.key)) continue;
        // Every record up to this one is read, in each of the partition's ranges.
        floors = floors.map((floor) => ({ ...floor, seq: Math.max(floor.seq, change.seq) }));
        for (const message of dataChangeMessages(change, token())) send(message);
      }
      if (partition.closedAt !== undefined) {
        floors = floors.map((floor) => ({ ...floor, seq: Math.max(floor.seq, limit) }));
        const successors = partition.successors ?? [];
        const continuationTokens = successors
          .map((successor) => intersect(successor, partition))
          .filter((part): part is Range => part !== undefined)
          .map((part) => ({ partition: { rowRange: protoRange(part) }, token: encodeToken(table.generation, [{ ...part, seq: limit }]) }));
        send({ closeStream: { status: { code: 0 }, continuationTokens, newPartitions: successors.map((successor) => ({ rowRange: protoRange(successor) })) } });
        closed = true;
        call.end();
        return;
      }
      if (Date.now() - lastHeartbeat >= heartbeatMs) {
        lastHeartbeat = Date.now();
        floors = floors.map((floor) => ({ ...floor, seq: Math.max(floor.seq, limit) }));
        send({ heartbeat: { continuationToken: { partition: { rowRange: protoRange(partition) }, token: token() }, estimatedLowWatermark: timestampOf(nowMicros()) } });
      }
      setTimeout(tick, 20);
    };
    call.on('cancelled', () => {
      this.cancelled += 1;
      closed = true;
      table.streams.delete(call);
    });
    call.on('finish', () => table.streams.delete(call));
    tick();
  }
}

/**
 * The messages of one change: complete mutations in the first, each SetCell value longer than
 * the change's chunkBytes in chunks, one message per chunk (later messages typed CONTINUATION), the last
 * `done` with the token and a low watermark.
 */
function dataChangeMessages(change: LoggedChange, token: string): ReadChangeStreamResponse[] {
  const { chunkBytes } = change;
  const messagesOut: Array<protos.google.bigtable.v2.ReadChangeStreamResponse.IMutationChunk[]> = [[]];
  for (const mutation of change.mutations) {
    const value = mutation.setCell?.value as Buffer | undefined;
    if (chunkBytes === 0 || value === undefined || value.length <= chunkBytes) {
      (messagesOut.at(-1) as protos.google.bigtable.v2.ReadChangeStreamResponse.IMutationChunk[]).push({ mutation });
      continue;
    }
    for (let offset = 0; offset < value.length; offset += chunkBytes) {
      const part = value.subarray(offset, offset + chunkBytes);
      const setCell = offset === 0 ? { ...mutation.setCell, value: part } : { value: part };
      messagesOut.push([{ chunkInfo: { chunkedValueSize: value.length, chunkedValueOffset: offset, lastChunk: offset + chunkBytes >= value.length }, mutation: { setCell } }]);
    }
  }
  const parts = messagesOut.filter((chunks, index) => index === 0 || chunks.length > 0);
  return parts.map((chunks, index) => {
    const first = index === 0;
    const last = index === parts.length - 1;
    return {
      dataChange: {
        type: first ? DATA_CHANGE_TYPES[change.type] : DATA_CHANGE_TYPES.CONTINUATION,
        chunks,
        ...(first
          ? {
              rowKey: change.key,
              commitTimestamp: timestampOf(change.commitMicros),
              tiebreaker: 0,
              ...(change.type === 'USER' ? { sourceClusterId: 'stand-in-c1' } : {}),
            }
          : {}),
        ...(last ? { done: true, token, estimatedLowWatermark: timestampOf(change.commitMicros) } : {}),
      },
    };
  });
}

/** DataChange.Type's numbers: the encoder takes an enum's number, not its name. */
const DATA_CHANGE_TYPES = { USER: 1, GARBAGE_COLLECTION: 2, CONTINUATION: 3 } as const;

/** Now, in microseconds: commit times as precise as Bigtable's. */
export function nowMicros(): bigint {
  return BigInt(Math.floor((performance.timeOrigin + performance.now()) * 1000));
}

function protoMutation(mutation: Mutation): protos.google.bigtable.v2.IMutation {
  switch (mutation.type) {
    case 'set':
      return { setCell: { familyName: mutation.family, columnQualifier: mutation.column, timestampMicros: String(mutation.timestampMicros), value: mutation.value } };
    case 'deleteColumn':
      return { deleteFromColumn: { familyName: mutation.family, columnQualifier: mutation.column } };
    case 'deleteFamily':
      return { deleteFromFamily: { familyName: mutation.family } };
    case 'deleteRow':
      return { deleteFromRow: {} };
  }
}

function encodeToken(generation: number, floors: ReadonlyArray<Range & { seq: number }>): string {
  return Buffer.from(JSON.stringify({ g: generation, f: floors.map((floor) => [floor.start.toString('base64'), floor.end.toString('base64'), floor.seq]) })).toString('base64');
}

function decodeToken(token: string): { generation: number; floors: Array<Range & { seq: number }> } | undefined {
  try {
    const parsed = JSON.parse(Buffer.from(token, 'base64').toString('utf8')) as { g: number; f: Array<[string, string, number]> };
    return { generation: parsed.g, floors: parsed.f.map(([start, end, seq]) => ({ start: Buffer.from(start, 'base64'), end: Buffer.from(end, 'base64'), seq })) };
  } catch {
    return undefined;
  }
}

function timestampOf(micros: bigint) {
  return { seconds: Number(micros / 1_000_000n), nanos: Number(micros % 1_000_000n) * 1000 };
}

function timestampMicros(timestamp: protos.google.protobuf.ITimestamp | null | undefined): bigint {
  if (!timestamp) return 0n;
  return BigInt(String(timestamp.seconds ?? 0)) * 1_000_000n + BigInt(Math.floor((timestamp.nanos ?? 0) / 1000));
}

function rangeOf(range: protos.google.bigtable.v2.IRowRange | null | undefined): Range {
  return { start: Buffer.from(range?.startKeyClosed ?? Buffer.alloc(0)), end: Buffer.from(range?.endKeyOpen ?? Buffer.alloc(0)) };
}

function protoRange(range: Range): protos.google.bigtable.v2.IRowRange {
  return { ...(range.start.length > 0 ? { startKeyClosed: range.start } : {}), ...(range.end.length > 0 ? { endKeyOpen: range.end } : {}) };
}

function rangeKey(range: Range): string {
  return `${range.start.toString('hex')}/${range.end.toString('hex')}`;
}

function showRange(range: Range): string {
  return `${range.start.toString('latin1')}..${range.end.toString('latin1')}`;
}

function inRange(key: Buffer, range: Range): boolean {
  return Buffer.compare(key, range.start) >= 0 && (range.end.length === 0 || Buffer.compare(key, range.end) < 0);
}

/** The part two ranges share, if any. */
function intersect(a: Range, b: Range): Range | undefined {
  const start = Buffer.compare(a.start, b.start) >= 0 ? a.start : b.start;
  const end = a.end.length === 0 ? b.end : b.end.length === 0 ? a.end : Buffer.compare(a.end, b.end) <= 0 ? a.end : b.end;
  if (end.length > 0 && Buffer.compare(start, end) >= 0) return undefined;
  return { start, end };
}

const same = (message: Buffer) => message;

const SERVICE: ServiceDefinition = Object.fromEntries(
  (
    [
      [GENERATE, true],
      [READ, true],
      [DELETE_TABLE, false],
    ] as const
  ).map(([path, responseStream]) => [
    path,
    { path, requestStream: false, responseStream, requestSerialize: same, requestDeserialize: same, responseSerialize: same, responseDeserialize: same },
  ]),
);
