import { isUtf8 } from 'node:buffer';
import { isLarge, mapInSlices, nextTurn } from '../../lib/slices.ts';
import type { MutationInput } from '../../service/rows.ts';
import { formatTimestamp } from '../../service/timestamps.ts';
import type { Cell } from '../../store/store.ts';
import { type JsonText, base64Value, markedFor, utf8Value } from '../json/json-answer.ts';
import { type TextEncoding, tallTextBytes } from '../json/tall-text.ts';

/**
 * The API's cell shape. Column names and values are UTF-8 text, or, when `encoding` is "base64",
 * both are base64 of arbitrary bytes. readCellData answers in the same shape insertData accepts.
 */
export interface CellInput {
  readonly columnFamily: string;
  readonly columnName: string;
  readonly columnValue: string;
  readonly encoding?: 'base64';
}

export interface CellOutput extends Omit<CellInput, 'columnValue'> {
  /** Text or base64; a large value stays bytes until sent (JsonText). */
  readonly columnValue: string | JsonText;
  /** RFC 3339, UTC, with microseconds. */
  readonly timestamp: string;
}

/** How a cell carries its column name and value: base64 when it says so, else text. */
export function cellEncoding(cell: CellInput): TextEncoding {
  return cell.encoding === 'base64' ? 'base64' : 'utf8';
}

/**
 * The bytes a cell's column name and value stand for; the value's come from `tallValue` when given
 * (tall-text.ts). Input must have passed validation.
 */
export function cellBytes(cell: CellInput, tallValue?: Buffer): { column: Buffer; value: Buffer } {
  const encoding = cellEncoding(cell);
  return { column: Buffer.from(cell.columnName, encoding), value: tallValue ?? Buffer.from(cell.columnValue, encoding) };
}

/**
 * toCellOutput renders a stored cell. Text is returned as is when both column name and value are
 * valid UTF-8; otherwise both are returned as base64 and the cell is marked, so no byte is lost.
 */
export function toCellOutput(cell: Cell): CellOutput {
  const timestamp = formatTimestamp(cell.timestampMicros);
  if (isUtf8(cell.column) && isUtf8(cell.value)) {
    const columnValue = utf8Value(cell.value);
    return markedFor({ columnFamily: cell.family, columnName: cell.column.toString('utf8'), columnValue, timestamp }, columnValue);
  }
  const columnValue = base64Value(cell.value);
  return markedFor({ columnFamily: cell.family, columnName: cell.column.toString('base64'), columnValue, encoding: 'base64' as const, timestamp }, columnValue);
}

/** insertData's cells as set mutations: tall values made into bytes and a large write mapped a slice at a time. */
export async function cellSets(cells: readonly CellInput[]): Promise<MutationInput[]> {
  const tall = await tallTextBytes(cells, (cell) => cell.columnValue, cellEncoding);
  return mapInSlices(cells, (cell): MutationInput => ({ type: 'set', family: cell.columnFamily, ...cellBytes(cell, tall.get(cell)) }));
}

/** A row's cells as readCellData answers them: a large row rendered a slice at a time, its answer then serialized after a yield. */
export async function cellOutputs(cells: readonly Cell[]): Promise<CellOutput[]> {
  const data = await mapInSlices(cells, (cell) => toCellOutput(cell));
  if (isLarge(data.length)) await nextTurn();
  return data;
}
