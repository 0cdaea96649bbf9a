import { StoreError, type StoreErrorCode, type StoreResource } from '../errors.ts';
import type { StoreCapabilities, StoreLimits } from '../store.ts';
import type { MessagePort } from 'node:worker_threads';
import type { Decoder, Encoder } from './codec.ts';

/**
 * What the embedded store's main thread and its SQLite threads say to each other.
 *
 * A message from the main thread is one ArrayBuffer holding one or more requests, each
 * `u32 id, u8 kind, f64 deadline, payload`. A message from a thread holds one or more answers,
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
}

export function decodeError(decoder: Decoder): StoreError {
  const code = decoder.string() as StoreErrorCode;
  const message = decoder.string();
  const resource = decoder.string();
  const name = decoder.string();
  const limit = decoder.string();
  const capability = decoder.string();
  return new StoreError(code, message, {
    ...(resource === '' ? {} : { resource: resource as StoreResource }),
    ...(name === '' ? {} : { name }),
    ...(limit === '' ? {} : { limit: limit as keyof StoreLimits }),
    ...(capability === '' ? {} : { capability: capability as keyof StoreCapabilities }),
  });
}
