import type { protos } from '@google-cloud/bigtable';
import type { Cell } from '../legacy-store.ts';

type CellChunk = protos.google.bigtable.v2.ReadRowsResponse.ICellChunk;
type Bytes = Uint8Array | string | null | undefined;

/**
 * mergeRowChunks reassembles the cells of one row from a ReadRows response stream.
 *
 * ReadRows sends a row as a sequence of chunks: family and qualifier are repeated only when they
 * change, a large value is split over several chunks (valueSize > 0 on all but the last), resetRow
 * discards what was sent of the row so far, and commitRow ends it. The client library's own
 * merger turns qualifiers into object keys, which mangles bytes that are not UTF-8, so the
 * adapter merges chunks itself and keeps qualifiers and values as Buffers.
 *
 * Returns the committed row's cells in stream order, or null when no row was sent. Throws on a
 * stream that breaks the protocol.
 */
export function mergeRowChunks(chunks: Iterable<CellChunk>): Cell[] | null {
  let committed: Cell[] | null = null;
  let row: Cell[] = [];
  let family: string | undefined;
  let qualifier: Buffer | undefined;
  let partial: { timestampMicros: bigint; parts: Buffer[] } | undefined;

  for (const chunk of chunks) {
    if (committed !== null) {
      throw new Error('ReadRows sent more than the one row asked for');
    }
    if (chunk.resetRow) {
      row = [];
      family = undefined;
      qualifier = undefined;
      partial = undefined;
      continue;
    }
    if (chunk.familyName) {
      family = chunk.familyName.value ?? '';
      qualifier = undefined;
    }
    if (chunk.qualifier) {
      qualifier = toBuffer(chunk.qualifier.value);
    }
    if (family === undefined || qualifier === undefined) {
      throw new Error('ReadRows sent a cell without family or qualifier');
    }
    partial ??= { timestampMicros: toBigInt(chunk.timestampMicros), parts: [] };
    partial.parts.push(toBuffer(chunk.value));
    if (!chunk.valueSize) {
      row.push({ family, qualifier, value: Buffer.concat(partial.parts), timestampMicros: partial.timestampMicros });
      partial = undefined;
    }
    if (chunk.commitRow) {
      if (partial) throw new Error('ReadRows committed a row in the middle of a split value');
      committed = row;
    }
  }
  if (committed === null && (row.length > 0 || partial)) {
    throw new Error('ReadRows ended in the middle of a row');
  }
  return committed;
}

function toBuffer(bytes: Bytes): Buffer {
  if (bytes === null || bytes === undefined) return Buffer.alloc(0);
  if (typeof bytes === 'string') return Buffer.from(bytes, 'base64');
  return Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

function toBigInt(value: CellChunk['timestampMicros']): bigint {
  if (value === null || value === undefined) return 0n;
  return BigInt(typeof value === 'object' ? value.toString() : value);
}
