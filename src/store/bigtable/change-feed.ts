import type { protos } from '@google-cloud/bigtable';
import { status as GrpcStatus } from '@grpc/grpc-js';
import { StoreError } from '../errors.ts';
import { type ChangeEvent, type ChangeStart, FEED_PROGRESS_MS, type Micros } from '../store.ts';
import { type BigtableStub, type ServerStream, routingHeader, streamOf, withRetry } from './calls.ts';
import { type Continuation, type FeedState, type KeySpan, type PartitionState, decodePosition, encodePosition, stateMicros, tableHash } from './change-positions.ts';
import { DataChangeAssembler, changeOf, timestampMicros, timestampOf } from './change-records.ts';
import { grpcCode, isTransient, toStoreError } from './grpc-errors.ts';

type ReadChangeStreamResponse = protos.google.bigtable.v2.IReadChangeStreamResponse;
type StreamPartition = protos.google.bigtable.v2.IStreamPartition;
type StreamContinuationToken = protos.google.bigtable.v2.IStreamContinuationToken;

/** An idle feed yields progress this often: within FEED_PROGRESS_MS with room to spare. */
const PROGRESS_EVERY_MS = FEED_PROGRESS_MS / 2;
/** Asked of Bigtable: a heartbeat (a newer token while idle) per partition this often. */
const HEARTBEAT_SECONDS = 1;
/** Events read ahead of the consumer before the partitions' streams are paused, and resumed. */
const READ_AHEAD_HIGH = 512;
const READ_AHEAD_LOW = 64;
const RESTART_MIN_MS = 50;
const RESTART_MAX_MS = 2000;
/** Deadline of each GenerateInitialChangeStreamPartitions, retried within it. */
const PARTITIONS_DEADLINE_MS = 30_000;

export interface ChangeFeedRequest {
  readonly stub: Promise<BigtableStub>;
  /** projects/…/instances/…/tables/… */
  readonly tableName: string;
  /** The table's name as the caller gave it, for NOT_FOUND. */
  readonly table: string;
  readonly start: ChangeStart;
  readonly signal: AbortSignal;
  readonly retentionSeconds: number;
}

/** A partition being read: its state (as the position records it) and its stream. */
interface Reader {
  span: KeySpan;
  continuations: Continuation[] | undefined;
  since: Micros | undefined;
  watermark: Micros;
  assembler: DataChangeAssembler;
  call: ServerStream<ReadChangeStreamResponse> | undefined;
  /** Set once the partition ended (CloseStream) or the feed stopped: its stream's end is expected. */
  closed: boolean;
  failures: number;
  restart: NodeJS.Timeout | undefined;
}

type Item = { readonly event: ChangeEvent } | { readonly error: StoreError };

/**
 * readChangeFeed follows a table's Bigtable change stream: GenerateInitialChangeStreamPartitions
 * for the partitions, then one ReadChangeStream per partition, from a commit time or from the
 * partition's continuation tokens. A CloseStream ends a partition and names its successors (a
 * split or a merge): each new partition is read once the tokens of every partition merged into
 * it have come. A stream that ends otherwise, or fails transiently, is read again from its last
 * token. The position of each event is every partition's token at that point (change-positions.ts),
 * so a feed resumed after it reads each partition on from there.
 *
 * Across keys, changes come in the order the partitions' streams deliver them, interleaved; a
 * row's changes (one row is in one partition at a time) in commit order.
 */
export async function* readChangeFeed(request: ChangeFeedRequest): AsyncGenerator<ChangeEvent> {
  const { tableName, table, start, signal } = request;
  const notFound = (cause?: unknown) => new StoreError('NOT_FOUND', `bigtable change stream: table ${tableName} not found`, { resource: 'table', name: table, cause });
  const hash = tableHash(tableName);
  const oldest = BigInt(Date.now() - request.retentionSeconds * 1000) * 1000n;
  let initial: FeedState;
  if (start.type === 'after') {
    initial = decodePosition(start.position, hash);
    if (stateMicros(initial) < oldest) throw new StoreError('OUT_OF_RANGE', 'bigtable change feed: the position is older than the change stream retention');
  } else {
    // In microseconds, as precise as commit times: a change committed earlier in the same millisecond is not after the start.
    const since = start.type === 'now' ? BigInt(Math.floor((performance.timeOrigin + performance.now()) * 1000)) : start.sinceMicros;
    if (since < oldest) throw new StoreError('OUT_OF_RANGE', 'bigtable change feed: since is older than the change stream retention');
    initial = { h: hash, since: String(since), u: [], w: [] };
  }
  const stub = await request.stub;

  // Also the check that the table exists (and has a change stream) before the first event.
  const partitions = await withRetry({ deadline: Date.now() + PARTITIONS_DEADLINE_MS, signal }, 'generateInitialChangeStreamPartitions', { resource: 'table', name: table }, async () => {
    const found: KeySpan[] = [];
    const method = stub.generateInitialChangeStreamPartitions;
    const call = () =>
      stub.makeServerStreamRequest(method.path, method.requestSerialize, method.responseDeserialize, { tableName }, routingHeader(tableName), { deadline: Date.now() + PARTITIONS_DEADLINE_MS });
    for await (const response of streamOf(call, { deadline: Number.POSITIVE_INFINITY, signal })) found.push(spanOf(response.partition));
    return found;
  }).catch((error: unknown) => {
    if (signal.aborted) return undefined;
    throw feedError(error, 'generateInitialChangeStreamPartitions', notFound);
  });
  // Stopped before it started: nothing to release.
  if (partitions === undefined) return;

  const readers = new Map<string, Reader>();
  const waiting = new Map<string, { span: KeySpan; continuations: Continuation[]; watermark: Micros }>();
  const newReader = (span: KeySpan, continuations: Continuation[] | undefined, since: Micros | undefined, watermark: Micros): Reader => ({
    span,
    continuations,
    since,
    watermark,
    assembler: new DataChangeAssembler(),
    call: undefined,
    closed: false,
    failures: 0,
    restart: undefined,
  });
  if (initial.u.length === 0) {
    const since = BigInt(initial.since ?? '0');
    for (const span of partitions) readers.set(spanKey(span), newReader(span, undefined, since, since));
  } else {
    for (const unit of initial.u) readers.set(spanKey(unit), newReader({ s: unit.s, e: unit.e }, unit.k?.map(copyContinuation), unit.since === undefined ? undefined : BigInt(unit.since), BigInt(unit.m)));
    for (const entry of initial.w) waiting.set(spanKey(entry), { span: { s: entry.s, e: entry.e }, continuations: entry.k.map(copyContinuation), watermark: stateMicros(initial) });
  }

  const snapshot = (): FeedState => ({
    h: hash,
    u: [...readers.values()].map((reader): PartitionState => ({
      s: reader.span.s,
      e: reader.span.e,
      ...(reader.continuations === undefined ? { since: String(reader.since ?? 0n) } : { k: reader.continuations }),
      m: String(reader.watermark),
    })),
    w: [...waiting.values()].map((entry) => ({ s: entry.span.s, e: entry.span.e, k: entry.continuations })),
  });

  const queue: Item[] = [];
  let wake: (() => void) | undefined;
  let failed = false;
  let paused = false;
  const notify = () => {
    wake?.();
    wake = undefined;
  };
  const push = (item: Item) => {
    queue.push(item);
    if (queue.length >= READ_AHEAD_HIGH && !paused) {
      paused = true;
      for (const reader of readers.values()) reader.call?.pause();
    }
    notify();
  };
  const stopReader = (reader: Reader) => {
    reader.closed = true;
    clearTimeout(reader.restart);
    reader.call?.cancel();
  };
  const fail = (error: StoreError) => {
    if (failed) return;
    failed = true;
    for (const reader of readers.values()) stopReader(reader);
    push({ error });
  };

  const startReader = (reader: Reader) => {
    const method = stub.readChangeStream;
    const partition = { rowRange: rowRangeOf(reader.span) };
    const from =
      reader.continuations === undefined
        ? { startTime: timestampOf(reader.since ?? 0n) }
        : { continuationTokens: { tokens: reader.continuations.map((token) => ({ partition: { rowRange: rowRangeOf(token) }, token: token.t })) } };
    const call = stub.makeServerStreamRequest(
      method.path,
      method.requestSerialize,
      method.responseDeserialize,
      { tableName, partition, ...from, heartbeatDuration: { seconds: HEARTBEAT_SECONDS } },
      routingHeader(tableName),
      { deadline: Number.POSITIVE_INFINITY },
    );
    reader.call = call;
    if (paused) call.pause();
    call.on('data', (response: ReadChangeStreamResponse) => {
      if (reader.closed || failed) return;
      reader.failures = 0;
      try {
        take(reader, response);
      } catch (error) {
        fail(error instanceof StoreError ? error : new StoreError('INTERNAL', `bigtable readChangeStream: ${(error as Error).message}`, { cause: error }));
      }
    });
    call.on('error', (error: Error) => ended(reader, call, error));
    call.on('end', () => ended(reader, call, undefined));
  };

  const ended = (reader: Reader, call: ServerStream<ReadChangeStreamResponse>, error: Error | undefined) => {
    if (reader.call !== call) return;
    reader.call = undefined;
    if (reader.closed || failed || signal.aborted) return;
    if (error !== undefined && !isTransient(error) && grpcCode(error) !== GrpcStatus.DEADLINE_EXCEEDED) {
      fail(feedError(error, 'readChangeStream', notFound));
      return;
    }
    // Bigtable ends a stream now and then (or it broke): read on from the partition's last token.
    reader.assembler.reset();
    const delay = Math.min(RESTART_MAX_MS, RESTART_MIN_MS * 2 ** reader.failures);
    reader.failures += 1;
    reader.restart = setTimeout(() => {
      if (!reader.closed && !failed) startReader(reader);
    }, delay);
  };

  const take = (reader: Reader, response: ReadChangeStreamResponse) => {
    if (response.dataChange) {
      const whole = reader.assembler.take(response.dataChange);
      if (whole === undefined) return;
      const last = response.dataChange;
      if (last.token) reader.continuations = [{ ...reader.span, t: last.token }];
      reader.since = undefined;
      if (last.estimatedLowWatermark) reader.watermark = timestampMicros(last.estimatedLowWatermark);
      const change = changeOf(whole.first, whole.mutations);
      if (change !== undefined) push({ event: { type: 'change', change, position: encodePosition(snapshot()) } });
    } else if (response.heartbeat) {
      const token = response.heartbeat.continuationToken;
      if (token?.token) reader.continuations = [continuationOf(token, reader.span)];
      reader.since = undefined;
      if (response.heartbeat.estimatedLowWatermark) reader.watermark = timestampMicros(response.heartbeat.estimatedLowWatermark);
    } else if (response.closeStream) {
      close(reader, response.closeStream);
    }
  };

  const close = (reader: Reader, record: protos.google.bigtable.v2.ReadChangeStreamResponse.ICloseStream) => {
    const tokens = record.continuationTokens ?? [];
    const successors = record.newPartitions ?? [];
    const code = record.status?.code ?? 0;
    if (code !== 0 && tokens.length === 0) {
      fail(feedError(Object.assign(new Error(record.status?.message ?? 'CloseStream'), { code }), 'readChangeStream', notFound));
      return;
    }
    stopReader(reader);
    readers.delete(spanKey(reader.span));
    for (const partition of successors) {
      const span = spanOf(partition);
      const key = spanKey(span);
      const entry = waiting.get(key) ?? { span, continuations: [], watermark: reader.watermark };
      if (reader.watermark < entry.watermark) entry.watermark = reader.watermark;
      for (const token of tokens) {
        const continuation = continuationOf(token, reader.span);
        if (within(continuation, span) && !entry.continuations.some((known) => spanKey(known) === spanKey(continuation))) entry.continuations.push(continuation);
      }
      if (covers(entry.continuations, span)) {
        waiting.delete(key);
        const successor = newReader(span, entry.continuations, undefined, entry.watermark);
        readers.set(key, successor);
        startReader(successor);
      } else waiting.set(key, entry);
    }
  };

  const onAbort = () => notify();
  signal.addEventListener('abort', onAbort, { once: true });
  try {
    yield { type: 'progress', position: encodePosition(initial.u.length === 0 ? initial : snapshot()) };
    for (const reader of readers.values()) startReader(reader);
    let lastEvent = Date.now();
    while (!signal.aborted) {
      const item = queue.shift();
      if (item !== undefined) {
        if (paused && queue.length <= READ_AHEAD_LOW) {
          paused = false;
          for (const reader of readers.values()) reader.call?.resume();
        }
        if ('error' in item) throw item.error;
        yield item.event;
        lastEvent = Date.now();
        continue;
      }
      const idle = PROGRESS_EVERY_MS - (Date.now() - lastEvent);
      if (idle <= 0) {
        // The queue is empty: the partitions' state is that of the last event yielded, or newer.
        yield { type: 'progress', position: encodePosition(snapshot()) };
        lastEvent = Date.now();
        continue;
      }
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, idle);
        wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
    }
  } finally {
    signal.removeEventListener('abort', onAbort);
    failed = true;
    for (const reader of readers.values()) stopReader(reader);
  }
}

/** The StoreError of a change stream call that failed for good. */
function feedError(failure: unknown, operation: string, notFound: (cause: unknown) => StoreError): StoreError {
  // withRetry's StoreError keeps the backend's own error as its cause.
  const error = failure instanceof StoreError && grpcCode(failure.cause) !== undefined ? failure.cause : failure;
  if (error instanceof StoreError) return error;
  const text = `bigtable ${operation}: ${error instanceof Error ? error.message : String(error)}`;
  switch (grpcCode(error)) {
    case GrpcStatus.NOT_FOUND:
      return notFound(error);
    case GrpcStatus.OUT_OF_RANGE:
      return new StoreError('OUT_OF_RANGE', text, { cause: error });
    case GrpcStatus.FAILED_PRECONDITION:
      // A table created without a change stream (before the store enabled one at creation).
      return new StoreError('UNIMPLEMENTED', text, { capability: 'changeFeed', cause: error });
    default:
      return toStoreError(error, operation);
  }
}

const b64 = (bytes: Uint8Array | string | null | undefined) => Buffer.from(bytes ?? Buffer.alloc(0)).toString('base64url');

function spanOf(partition: StreamPartition | null | undefined): KeySpan {
  const range = partition?.rowRange;
  return { s: b64(range?.startKeyClosed), e: b64(range?.endKeyOpen) };
}

function rowRangeOf(span: KeySpan) {
  return {
    ...(span.s === '' ? {} : { startKeyClosed: Buffer.from(span.s, 'base64url') }),
    ...(span.e === '' ? {} : { endKeyOpen: Buffer.from(span.e, 'base64url') }),
  };
}

function continuationOf(token: StreamContinuationToken, fallback: KeySpan): Continuation {
  const span = token.partition ? spanOf(token.partition) : fallback;
  return { s: span.s, e: span.e, t: token.token ?? '' };
}

function copyContinuation(token: Continuation): Continuation {
  return { s: token.s, e: token.e, t: token.t };
}

function spanKey(span: KeySpan): string {
  return `${span.s}/${span.e}`;
}

/** Orders start keys ('' first) and end keys ('' last) of spans. */
function compareBound(a: string, b: string, end: boolean): number {
  if (a === b) return 0;
  if (a === '') return end ? 1 : -1;
  if (b === '') return end ? -1 : 1;
  return Buffer.compare(Buffer.from(a, 'base64url'), Buffer.from(b, 'base64url'));
}

function within(inner: KeySpan, outer: KeySpan): boolean {
  return compareBound(inner.s, outer.s, false) >= 0 && compareBound(inner.e, outer.e, true) <= 0;
}

/** Whether the spans together cover `span` without a gap. */
function covers(spans: readonly KeySpan[], span: KeySpan): boolean {
  // The first key not yet covered, as a start key.
  let reached = span.s;
  for (const part of [...spans].sort((a, b) => compareBound(a.s, b.s, false))) {
    if (compareBound(part.s, reached, false) > 0) return false;
    if (part.e === '') return true;
    if (compareBound(part.e, reached, false) > 0) reached = part.e;
    if (span.e !== '' && compareBound(reached, span.e, false) >= 0) return true;
  }
  return false;
}
