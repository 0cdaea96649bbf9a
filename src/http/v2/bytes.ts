import { isUtf8 } from 'node:buffer';
import { isLarge, mapInSlices, nextTurn } from '../../lib/slices.ts';
import type { Cell, ColumnSelector, Row } from '../../store/store.ts';
import { formatTimestamp } from '../../service/timestamps.ts';
import { JsonText, base64Value, markHoldsJsonText, markedFor, utf8Value } from '../json/json-answer.ts';

/**
 * How v2 carries bytes (keys, columns, values) in JSON and URLs.
 *
 * With `?encoding=base64` every key, column and value of the request and of the response is
 * base64: RFC 4648 base64 with padding in JSON bodies and answers, base64url (padding optional)
 * in the path and the query. Without it, they are UTF-8 text, except where an object says
 * `"encoding": "base64"`: then its own byte fields are base64 (a cell's or a set's column and
 * value, a batch entry's or a row's key). Answers mark that way every key, and every cell, that
 * is not valid UTF-8.
 */

/** Strict RFC 4648 base64url, padding optional. */
export const BASE64URL = /^(?:[A-Za-z0-9_-]{4})*(?:[A-Za-z0-9_-]{2}(?:==)?|[A-Za-z0-9_-]{3}=?)?$/;

export interface EncodingQuery {
  readonly encoding?: 'base64' | undefined;
}

/** Whether the request asks for base64 everywhere. */
export function inBase64(query: EncodingQuery | undefined): boolean {
  return query?.encoding === 'base64';
}

/** The bytes of a valid JSON body field: base64 when `base64`, else UTF-8. */
export function bodyBytes(text: string, base64: boolean): Buffer {
  return Buffer.from(text, base64 ? 'base64' : 'utf8');
}

/** The bytes of a valid path or query value: base64url when `base64`, else UTF-8. */
export function urlBytes(text: string, base64: boolean): Buffer {
  return Buffer.from(text, base64 ? 'base64url' : 'utf8');
}

/** A `family` or `family:column` selector of valid input; the column in base64 (or base64url in URLs) when `base64`. */
export function columnSelector(text: string, base64: boolean, inUrl: boolean): ColumnSelector {
  const colon = text.indexOf(':');
  if (colon === -1) return { family: text };
  const column = text.slice(colon + 1);
  return { family: text.slice(0, colon), column: inUrl ? urlBytes(column, base64) : bodyBytes(column, base64) };
}

/** A key in an answer: text, or base64 (marked on its object unless the whole answer is base64). */
export function renderKey(key: Buffer, base64: boolean): { key: string; encoding?: 'base64' } {
  if (base64) return { key: key.toString('base64') };
  return isUtf8(key) ? { key: key.toString('utf8') } : { key: key.toString('base64'), encoding: 'base64' };
}

export interface CellOutput {
  readonly family: string;
  readonly column: string;
  /** Text or base64; a large value stays bytes until sent (JsonText). */
  readonly value: string | JsonText;
  /** RFC 3339, UTC, with microseconds. */
  readonly timestamp: string;
  readonly encoding?: 'base64';
}

/** A stored cell version in an answer: column and value as text when both are UTF-8, else both base64 and marked. */
export function renderCell(cell: Cell, base64: boolean): CellOutput {
  const timestamp = formatTimestamp(cell.timestampMicros);
  if (!base64 && isUtf8(cell.column) && isUtf8(cell.value)) {
    const value = utf8Value(cell.value);
    return markedFor({ family: cell.family, column: cell.column.toString('utf8'), value, timestamp }, value);
  }
  const value = base64Value(cell.value);
  return markedFor({ family: cell.family, column: cell.column.toString('base64'), value, timestamp, ...(base64 ? {} : { encoding: 'base64' as const }) }, value);
}

export interface RowOutput {
  readonly key: string;
  readonly encoding?: 'base64';
  readonly cells: CellOutput[];
}

export function renderRow(row: Row, base64: boolean): RowOutput {
  return withCells({ ...renderKey(row.key, base64), cells: row.cells.map((cell) => renderCell(cell, base64)) });
}

/** An answer's object holding `cells`, marked as holding JsonText when one of them does. */
export function withCells<T extends { readonly cells: readonly CellOutput[] }>(output: T): T {
  return output.cells.some((cell) => cell.value instanceof JsonText) ? markHoldsJsonText(output) : output;
}

/** A row's cells as its answer holds them: a large row rendered a slice at a time, its answer then serialized after a yield. */
export async function renderCells(cells: readonly Cell[], base64: boolean): Promise<CellOutput[]> {
  const rendered = await mapInSlices(cells, (cell) => renderCell(cell, base64));
  if (isLarge(rendered.length)) await nextTurn();
  return rendered;
}
