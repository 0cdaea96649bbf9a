import { createHash } from 'node:crypto';
import { FEED_POSITION_CHARS } from '../store/store.ts';
import { ApiError } from './errors.ts';
import type { TableTarget } from './tables.ts';

/**
 * Feed cursors: where a change feed resumes, held by the caller, so that any replica resumes it
 * after any restart and the service keeps nothing per caller.
 *
 * A cursor is base64url (no padding) of: version (1 byte) | the store's position (ASCII) | tag
 * (12 bytes), the tag being the first 12 bytes of SHA-256 over the store, instance and table and
 * the rest of the cursor. A cursor of another table, or an altered one, fails the tag and is
 * refused with 400 INVALID_CURSOR, never read as a position of this table. It is no signature: a
 * caller who forges one can only name a position the store then refuses or one it could have
 * been given.
 */

const VERSION = 1;
const TAG_BYTES = 12;

/** Longest cursor, in characters. */
export const MAX_CURSOR_CHARS = Math.ceil(((1 + FEED_POSITION_CHARS + TAG_BYTES) * 4) / 3);

export function encodeCursor(target: TableTarget, position: string): string {
  const body = Buffer.concat([Buffer.from([VERSION]), Buffer.from(position, 'latin1')]);
  return Buffer.concat([body, tag(target, body)]).toString('base64url');
}

/** The store's position in `cursor`, or INVALID_CURSOR (naming `field`) for one not made for this table. */
export function decodeCursor(target: TableTarget, cursor: string, field: string): string {
  if (cursor.length > MAX_CURSOR_CHARS || !/^[A-Za-z0-9_-]+$/.test(cursor)) throw invalidCursor(field);
  const bytes = Buffer.from(cursor, 'base64url');
  if (bytes.toString('base64url') !== cursor || bytes.length < 1 + TAG_BYTES) throw invalidCursor(field);
  const body = bytes.subarray(0, bytes.length - TAG_BYTES);
  if (body[0] !== VERSION || !tag(target, body).equals(bytes.subarray(bytes.length - TAG_BYTES))) throw invalidCursor(field);
  return body.subarray(1).toString('latin1');
}

export function invalidCursor(field: string): ApiError {
  return new ApiError('INVALID_CURSOR', `${field} is not a cursor of this table's feed: send one the feed gave (an event's id, or the answer's cursor), or none to start from now.`, {
    errors: [{ path: field, message: `${field} does not belong to this table's feed` }],
  });
}

function tag(target: TableTarget, body: Buffer): Buffer {
  return createHash('sha256').update(`${target.store}\0${target.instance}\0${target.table}\0`).update(body).digest().subarray(0, TAG_BYTES);
}
