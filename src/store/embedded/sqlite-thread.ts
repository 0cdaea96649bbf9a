/**
 * The entry point of the embedded store's SQLite threads (worker_threads): one writer holding the
 * only writing connection, and readers each holding a read-only one. The main thread never runs
 * SQLite, so no query, however large, holds up its event loop.
 */
import { performance } from 'node:perf_hooks';
import { DatabaseSync } from 'node:sqlite';
import { receiveMessageOnPort, workerData } from 'node:worker_threads';
import { StoreError, callerGone } from '../errors.ts';
import { Answers } from './answers.ts';
import { CANCEL_SLOTS, Kind, type Request, Status, type ThreadData, requestsOf } from './protocol.ts';
import { Reader } from './reader.ts';
import { toStoreError } from './sqlite-errors.ts';
import { Writer } from './writer.ts';

/** Past this, the WAL file is truncated after a checkpoint rather than kept at its largest size. */
const WAL_SIZE_LIMIT_BYTES = 64 * 1024 * 1024;
/** A reader posts the answers it has after this long into a batch, not only at its end. */
const FLUSH_AFTER_MS = 2;
/** How often the writer trims changes past the feed's retention. */
const TRIM_EVERY_MS = 60_000;
/** Changes trimmed in one transaction: a write arriving meanwhile waits for one such step only. */
const TRIM_STEP_CHANGES = 1000;

/** How long a connection waits for a lock held by the store's other connections (WAL recovery, checkpoints). */
const BUSY_TIMEOUT_MS = 5000;

const { role, databaseFile, cancelled: cancelledBuffer, port } = workerData as ThreadData;
const cancelled = new Int32Array(cancelledBuffer);
const db = new DatabaseSync(databaseFile, { timeout: BUSY_TIMEOUT_MS });
const answers = new Answers((buffer, attachments) => {
  if (attachments.length === 0) port.postMessage(buffer, [buffer]);
  else port.postMessage([buffer, ...attachments], [buffer, ...attachments]);
});

if (role === 'writer') {
  db.exec(`PRAGMA synchronous = FULL; PRAGMA journal_size_limit = ${WAL_SIZE_LIMIT_BYTES}`);
  const writer = new Writer(db);
  // Trimming runs between batches, a step at a time, each step its own short transaction: never
  // inside a write's transaction, so no write pays for more than one step's wait.
  let trimming = false;
  const trimStep = () => {
    if (!db.isOpen) return;
    let more = false;
    try {
      more = writer.trimChanges(TRIM_STEP_CHANGES);
    } catch {
      // Busy (a checkpoint) or failing: the next round tries again.
    }
    if (more) setImmediate(trimStep).unref();
    else trimming = false;
  };
  const trim = () => {
    if (trimming) return;
    trimming = true;
    trimStep();
  };
  setInterval(trim, TRIM_EVERY_MS).unref();
  setImmediate(trim).unref();
  port.on('message', (first: ArrayBuffer) => {
    // Everything that queued up while the last batch committed joins this one.
    const requests = requestsOf(first);
    for (let more = receiveMessageOnPort(port); more !== undefined; more = receiveMessageOnPort(port)) {
      requests.push(...requestsOf(more.message as ArrayBuffer));
    }
    const closeAt = requests.findIndex((request) => request.kind === Kind.close);
    const batch = closeAt < 0 ? requests : requests.slice(0, closeAt);
    const outcomes = writer.runBatch(batch.map((request) => ({ ...request, skip: () => skipReason(request) })));
    batch.forEach((request, index) => {
      const outcome = outcomes[index];
      if (outcome?.ok === true) answers.answer(request.id, Status.done, outcome.result);
      else answers.failed(request.id, outcome?.error ?? new StoreError('INTERNAL', 'no outcome'));
    });
    if (closeAt >= 0) close(requests.slice(closeAt));
    else answers.flush();
  });
} else {
  db.exec('PRAGMA query_only = 1');
  const reader = new Reader(db);
  port.on('message', (first: ArrayBuffer) => {
    const requests = requestsOf(first);
    for (let more = receiveMessageOnPort(port); more !== undefined; more = receiveMessageOnPort(port)) {
      requests.push(...requestsOf(more.message as ArrayBuffer));
    }
    reader.begin();
    let lastFlush = performance.now();
    try {
      for (const [index, request] of requests.entries()) {
        if (request.kind === Kind.close) {
          reader.end();
          close(requests.slice(index));
          return;
        }
        const skipped = skipReason(request);
        if (skipped !== undefined) {
          answers.failed(request.id, skipped);
          continue;
        }
        const mark = answers.mark();
        try {
          reader.run(request.id, request.kind, request.decoder, answers);
        } catch (error) {
          answers.rewind(mark);
          answers.failed(request.id, toStoreError(error, 'read'));
          // SQLite may have ended the transaction with its error: the rest get a fresh one.
          if (!(error instanceof StoreError)) {
            reader.end();
            reader.begin();
          }
        }
        // Answers ready go out when the message is full, or when the batch has taken a while, so
        // that a short read is not held back by a long one after it.
        if (answers.full || performance.now() - lastFlush > FLUSH_AFTER_MS) {
          answers.flush();
          lastFlush = performance.now();
        }
      }
    } finally {
      reader.end();
    }
    answers.flush();
  });
}

/** Answers the close request (the first of `requests`), refuses the rest, and lets the thread end. */
function close(requests: readonly Request[]): void {
  const [closing, ...after] = requests;
  for (const request of after) answers.failed(request.id, new StoreError('UNAVAILABLE', 'the embedded store is closed'));
  try {
    db.close();
    if (closing !== undefined) answers.answer(closing.id, Status.done);
  } catch (error) {
    if (closing !== undefined) answers.failed(closing.id, toStoreError(error, 'close'));
  }
  answers.flush();
  port.close();
}

/** Why a request must not start: its caller went, or its deadline passed while it queued. */
function skipReason(request: Request): StoreError | undefined {
  if (Atomics.load(cancelled, request.id % CANCEL_SLOTS) === request.id) return callerGone();
  if (Date.now() >= request.deadline) return new StoreError('DEADLINE_EXCEEDED', 'deadline passed before the store was called');
  return undefined;
}
