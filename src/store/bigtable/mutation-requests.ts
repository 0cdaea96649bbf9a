import type { Mutation, RowMutations } from '../store.ts';
import { toProtoMutation } from './mutations.ts';
import { Turns } from '../../lib/turns.ts';
import { readVarint, varintOf } from './wire.ts';

/** Mutations encoded in one go: a few milliseconds of work. */
const MUTATIONS_PER_PIECE = 500;

/** A generated client's serializer of a request (a stub method's requestSerialize). */
export type Serialize = (request: object) => Buffer;

/*
 * One MutateRow, or one MutateRows, may carry 100,000 mutations, whose encoding in one go held the
 * event loop for hundreds of milliseconds. So requests are serialized with the client's own
 * serializer a piece of mutations at a time, pausing between slices: protobuf merges
 * concatenated messages and appends to repeated fields, so the pieces joined are the encoding of
 * the whole request.
 */

/** encodeMutateRow serializes a MutateRowRequest in pieces, the first with the table and key. */
export async function encodeMutateRow(serialize: Serialize, tableName: string, rowKey: Buffer, mutations: readonly Mutation[]): Promise<Buffer> {
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

/**
 * encodeCheckAndMutateRow serializes a CheckAndMutateRowRequest in pieces as encodeMutateRow does:
 * the first with the table, key, predicate and first mutations of each branch, then the rest of
 * the true mutations, then of the false ones (each repeated field keeps its order).
 */
export async function encodeCheckAndMutateRow(
  serialize: Serialize,
  head: { tableName: string; rowKey: Buffer; predicateFilter: object },
  trueMutations: readonly Mutation[],
  falseMutations: readonly Mutation[],
): Promise<Buffer> {
  const first = {
    ...head,
    trueMutations: trueMutations.slice(0, MUTATIONS_PER_PIECE).map(toProtoMutation),
    falseMutations: falseMutations.slice(0, MUTATIONS_PER_PIECE).map(toProtoMutation),
  };
  if (trueMutations.length <= MUTATIONS_PER_PIECE && falseMutations.length <= MUTATIONS_PER_PIECE) return serialize(first);
  const pieces = [serialize(first)];
  const turns = new Turns();
  for (const [field, mutations] of [
    ['trueMutations', trueMutations],
    ['falseMutations', falseMutations],
  ] as const) {
    for (let start = MUTATIONS_PER_PIECE; start < mutations.length; start += MUTATIONS_PER_PIECE) {
      await turns.pause();
      pieces.push(serialize({ [field]: mutations.slice(start, start + MUTATIONS_PER_PIECE).map(toProtoMutation) }));
    }
  }
  return Buffer.concat(pieces);
}

/**
 * encodeMutateRows serializes the MutateRowsRequest of the entries at `indexes` of `entries`, in
 * that order, pausing between slices. Each attempt encodes what it sends: a retry of a few entries
 * encodes those again.
 */
export async function encodeMutateRows(serialize: Serialize, tableName: string, entries: readonly RowMutations[], indexes: readonly number[]): Promise<Buffer> {
  const pieces = [serialize({ tableName })];
  const turns = new Turns();
  for (const index of indexes) {
    await turns.pause();
    pieces.push(await encodeEntry(serialize, entries[index] as RowMutations, turns));
  }
  return Buffer.concat(pieces);
}

/**
 * One entry as an element of MutateRowsRequest.entries. A wide entry is serialized as one-entry
 * requests of a piece of its mutations each; their entries' contents go under one field header.
 */
async function encodeEntry(serialize: Serialize, entry: RowMutations, turns: Turns): Promise<Buffer> {
  const head = { rowKey: entry.key, mutations: entry.mutations.slice(0, MUTATIONS_PER_PIECE).map(toProtoMutation) };
  if (entry.mutations.length <= MUTATIONS_PER_PIECE) return serialize({ entries: [head] });
  let tag: Buffer | undefined;
  const contents: Buffer[] = [];
  let length = 0;
  for (let start = 0; start < entry.mutations.length; start += MUTATIONS_PER_PIECE) {
    await turns.pause();
    const piece = serialize({ entries: [start === 0 ? head : { mutations: entry.mutations.slice(start, start + MUTATIONS_PER_PIECE).map(toProtoMutation) }] });
    const [, afterTag] = readVarint(piece, 0, 'MutateRows entry');
    const [, afterLength] = readVarint(piece, afterTag, 'MutateRows entry');
    tag ??= piece.subarray(0, afterTag);
    contents.push(piece.subarray(afterLength));
    length += piece.length - afterLength;
  }
  return Buffer.concat([tag as Buffer, varintOf(length), ...contents]);
}
