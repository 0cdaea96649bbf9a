import { StoreError, type StoreErrorCode, type StoreFailedPrecondition, type StoreResource } from '../errors.ts';
import type { StoreCapabilities, StoreLimits } from '../store.ts';
import type { MessagePort } from 'node:worker_threads';
import { Decoder, type Encoder } from './codec.ts';

/**
 * What the embedded store's main thread and its SQLite threads say to each other.
 *
 * A message from the main thread is one ArrayBuffer holding one or more requests, each
 * `u32 id, u8 kind, f64 deadline, u32 length, payload` (writeHeader, requestsOf), perhaps followed
 * by zeros (Encoder.finishPadded). A message from a thread holds one or more answers,
 * each `u32 id, u8 status, payload`; a read may answer in several PART messages before its
 * last one, so that neither thread builds or decodes a huge result in one go.
 */
export const Kind = {
  ping: 1,
  close: 2,
  createTable: 3,
  deleteTable: 4,
  mutate: 5,
  listTables: 6,
  describeTable: 7,
  readRows: 8,
  scan: 9,
  checkAndMutate: 10,
  readModifyWrite: 11,
  changeStart: 12,
  changes: 13,
} as const;
export type Kind = (typeof Kind)[keyof typeof Kind];

export const Status = {
  /** The last answer to the request: its result follows. */
  done: 0,
  /** Part of the result; more follows. */
  part: 1,
  /** The request failed: an encoded StoreError follows. */
  failed: 2,
} as const;

export const MutationType = { set: 1, deleteColumn: 2, deleteFamily: 3, deleteRow: 4 } as const;

export const ConditionType = { rowExists: 1, familyExists: 2, columnExists: 3, columnEquals: 4 } as const;

export const RuleType = { increment: 1, append: 2 } as const;

/** How a change feed starts (Kind.changeStart). */
export const StartType = { now: 0, since: 1, after: 2 } as const;

/** Absent selection: every column. */
export const ALL_COLUMNS = 0xffff_ffff;

/** Scan flags. */
export const ScanFlag = { start: 1, end: 2, after: 4, reverse: 8 } as const;

/**
 * Cancellation: the main thread writes a request's id into slot `id % CANCEL_SLOTS` of a shared
 * Int32Array when its caller goes or its deadline passes; a thread skips a request whose slot
 * holds its id when its turn comes.
 */
export const CANCEL_SLOTS = 1 << 16;

/** What a thread is started with (workerData). */
export interface ThreadData {
  readonly role: 'writer' | 'reader';
  readonly databaseFile: string;
  readonly cancelled: SharedArrayBuffer;
  readonly port: MessagePort;
}

/** A policy bound absent on the wire. */
const NO_BOUND = 0;

export function encodePolicyBound(encoder: Encoder, value: number | undefined): void {
  encoder.f64(value ?? NO_BOUND);
}

export function decodePolicyBound(decoder: Decoder): number | undefined {
  const value = decoder.f64();
  return value === NO_BOUND ? undefined : value;
}

export function encodeError(encoder: Encoder, error: StoreError): void {
  encoder.string(error.code);
  encoder.string(error.message);
  encoder.string(error.resource ?? '');
  encoder.string(error.resourceName ?? '');
  encoder.string(error.limit ?? '');
  encoder.string(error.capability ?? '');
  encoder.string(error.reason ?? '');
}

export function decodeError(decoder: Decoder): StoreError {
  const code = decoder.string() as StoreErrorCode;
  const message = decoder.string();
  const resource = decoder.string();
  const name = decoder.string();
  const limit = decoder.string();
  const capability = decoder.string();
  const reason = decoder.string();
  return new StoreError(code, message, {
    ...(resource === '' ? {} : { resource: resource as StoreResource }),
    ...(name === '' ? {} : { name }),
    ...(limit === '' ? {} : { limit: limit as keyof StoreLimits }),
    ...(capability === '' ? {} : { capability: capability as keyof StoreCapabilities }),
    ...(reason === '' ? {} : { reason: reason as StoreFailedPrecondition }),
  });
}

/** A request as a thread reads it. */
export interface Request {
  readonly id: number;
  readonly kind: number;
  readonly deadline: number;
  readonly decoder: Decoder;
}

/** The bytes before a request's payload: `u32 id, u8 kind, f64 deadline, u32 length`. */
const REQUEST_HEADER_BYTES = 17;

/**
 * Writes a request's header, its payload's length still 0; returns where the length goes, to be
 * set once the payload has been written. Ids are never 0 (see requestsOf).
 */
export function writeHeader(encoder: Encoder, id: number, kind: number, deadline: number): number {
  encoder.u32(id);
  encoder.u8(kind);
  encoder.f64(deadline);
  const lengthAt = encoder.length;
  encoder.u32(0);
  return lengthAt;
}

/**
 * The requests of one message, up to its end or to the zeros the sender may leave after them
 * (Encoder.finishPadded): an id of 0, or too few bytes left for a header.
 */
export function requestsOf(buffer: ArrayBuffer): Request[] {
  const decoder = new Decoder(buffer);
  const requests: Request[] = [];
  while (decoder.remaining >= REQUEST_HEADER_BYTES) {
    const id = decoder.u32();
    if (id === 0) break;
    const kind = decoder.u8();
    const deadline = decoder.f64();
    requests.push({ id, kind, deadline, decoder: decoder.sub(decoder.u32()) });
  }
  return requests;
}
