import type { Mutation } from '../store.ts';
import { toProtoMutation } from './mutations.ts';
import { Turns } from './turns.ts';

/** Mutations encoded in one go: a few milliseconds of work. */
const MUTATIONS_PER_PIECE = 500;

/** The generated client's serializer of a MutateRowRequest (the stub method's requestSerialize). */
export type SerializeMutateRow = (request: object) => Buffer;

/**
 * encodeMutateRow serializes a MutateRowRequest with the client's own serializer, a piece of
 * mutations at a time, yielding to the event loop between slices: one MutateRow may carry 100,000
 * mutations, whose encoding in one go held the loop for hundreds of milliseconds. Protobuf merges
 * concatenated messages and appends repeated fields, so the pieces (the first with the table and
 * key) joined are the encoding of the whole request.
 */
export async function encodeMutateRow(serialize: SerializeMutateRow, tableName: string, rowKey: Buffer, mutations: readonly Mutation[]): Promise<Buffer> {
  const head = { tableName, rowKey, mutations: mutations.slice(0, MUTATIONS_PER_PIECE).map(toProtoMutation) };
  if (mutations.length <= MUTATIONS_PER_PIECE) return serialize(head);
  const pieces = [serialize(head)];
  const turns = new Turns();
  for (let start = MUTATIONS_PER_PIECE; start < mutations.length; start += MUTATIONS_PER_PIECE) {
    await turns.pause();
    pieces.push(serialize({ mutations: mutations.slice(start, start + MUTATIONS_PER_PIECE).map(toProtoMutation) }));
  }
  return Buffer.concat(pieces);
}
