import type { DatabaseSync, StatementSync } from 'node:sqlite';
import type { FamilyPolicy } from '../store.ts';
import { type Answers, RowAnswer } from './answers.ts';
import type { Decoder } from './codec.ts';
import { StoreError, tableNotFound } from '../errors.ts';
import { EMBEDDED_LIMITS } from './limits.ts';
import { Kind, ScanFlag, StartType, Status, encodePolicyBound } from './protocol.ts';
import {
  type FamilyPolicies,
  type ReadPlan,
  decodeSelection,
  readPlan,
  sameBytes,
  selectorBefore,
  selectorColumn,
  selectorMatches,
} from './selection.ts';

/** Most changes in one answer to a feed, and the bytes after which it answers with fewer. */
const CHANGES_PER_ANSWER = 256;
const CHANGE_BYTES_PER_ANSWER = 4 * 1024 * 1024;

/** A scan answers after this many rows examined, even when none was selected, so reads queued behind it get their turn. */
const ROWS_EXAMINED_PER_CHUNK = 10_000;

type Cursor = Iterator<unknown[]>;
const COLUMNS = 'family, qualifier, ts, value';
const CELL_ORDER = 'ORDER BY family, qualifier, ts DESC';
const RANGE_COLUMNS = 'row_key, family, qualifier, ts, value';
const RANGE_ORDER = 'ORDER BY row_key, family, qualifier, ts DESC';

interface TableInfo {
  readonly id: number;
  readonly families: Map<string, FamilyPolicy>;
}

/**
 * Reader answers the read requests of one read-only connection. The requests of a batch (what
 * reached the thread together) share one read transaction, a snapshot of the database as of its
 * first statement, so a row is never seen half written.
 *
 * Reads seek rather than walk: cells are stored in (row, family, column, timestamp descending)
 * order, so the newest versions of a column come first; once a column has given what the read
 * keeps of it (the versions asked for, within the family's retention), the cursor restarts just
 * after that column instead of stepping over its older versions. A read's cost thus follows the
 * cells it returns, not the versions the row holds.
 */
export class Reader {
  readonly #begin: StatementSync;
  readonly #commit: StatementSync;
  readonly #table: StatementSync;
  readonly #tables: StatementSync;
  readonly #row: { readonly all: StatementSync; readonly from: StatementSync };
  readonly #range: { readonly all: StatementSync; readonly fromKey: StatementSync; readonly afterRow: StatementSync; readonly from: StatementSync };
  readonly #lastKey: StatementSync;
  readonly #keyBefore: StatementSync;

  readonly #feed: Record<'lastSeq' | 'trimmedThrough' | 'tableId' | 'changesAfter' | 'changeAtOrAfter' | 'nextChange', StatementSync>;

  readonly #db: DatabaseSync;
  /** Tables looked up in this batch's snapshot. */
  readonly #tablesSeen = new Map<string, TableInfo>();
  /** The time of this batch, for maxAgeSeconds. */
  #now = 0n;

  constructor(db: DatabaseSync) {
    this.#db = db;
    const prepare = (sql: string) => {
      const statement = db.prepare(sql);
      statement.setReadBigInts(true);
      statement.setReturnArrays(true);
      return statement;
    };
    this.#begin = db.prepare('BEGIN');
    this.#commit = db.prepare('COMMIT');
    this.#table = prepare(
      `SELECT t.id, f.name, f.max_versions, f.max_age_seconds FROM tables t JOIN families f ON f.table_id = t.id
       WHERE t.instance = ? AND t.name = ? ORDER BY f.name`,
    );
    this.#tables = prepare('SELECT name FROM tables WHERE instance = ?');
    const row = (condition: string) => prepare(`SELECT ${COLUMNS} FROM cells WHERE table_id = ? AND row_key = ?${condition} ${CELL_ORDER}`);
    // Only >= on (family, qualifier): SQLite seeks straight to it, where > would step over every
    // version of the column it starts from. Positions "just after" are made by successor().
    this.#row = { all: row(''), from: row(' AND (family, qualifier) >= (?, ?)') };
    const range = (condition: string) => prepare(`SELECT ${RANGE_COLUMNS} FROM cells WHERE table_id = ?${condition} ${RANGE_ORDER}`);
    this.#range = {
      all: range(''),
      fromKey: range(' AND row_key >= ?'),
      afterRow: range(' AND row_key > ?'),
      from: range(' AND (row_key, family, qualifier) >= (?, ?, ?)'),
    };
    this.#lastKey = prepare('SELECT row_key FROM cells WHERE table_id = ? ORDER BY row_key DESC LIMIT 1');
    this.#keyBefore = prepare('SELECT row_key FROM cells WHERE table_id = ? AND row_key < ? ORDER BY row_key DESC LIMIT 1');
    this.#feed = {
      // The last seq ever given (AUTOINCREMENT keeps it even once its change is trimmed).
      lastSeq: prepare("SELECT seq FROM sqlite_sequence WHERE name = 'changes'"),
      trimmedThrough: prepare('SELECT through FROM change_trim'),
      tableId: prepare('SELECT id FROM tables WHERE instance = ? AND name = ?'),
      changesAfter: prepare('SELECT seq, commit_us, row_key, mutations FROM changes WHERE table_id = ? AND seq > ? ORDER BY seq'),
      changeAtOrAfter: prepare('SELECT seq, commit_us FROM changes WHERE seq >= ? ORDER BY seq LIMIT 1'),
      nextChange: prepare('SELECT commit_us FROM changes WHERE table_id = ? AND seq > ? ORDER BY seq LIMIT 1'),
    };
  }

  /**
   * Starts the read transaction that the requests of one batch share: one snapshot, taken after
   * every request of the batch was made, so each sees every write acknowledged before it was made.
   */
  begin(): void {
    this.#tablesSeen.clear();
    this.#now = nowMicros();
    this.#begin.run();
  }

  /** Ends the batch's read transaction. */
  end(): void {
    if (this.#db.isOpen && this.#db.isTransaction) this.#commit.run();
  }

  /** Runs one request of the batch and writes its answer; throws a StoreError (or SQLite's) when it fails. */
  run(id: number, kind: number, decoder: Decoder, answers: Answers): void {
    this.#dispatch(id, kind, decoder, answers);
  }

  #dispatch(id: number, kind: number, decoder: Decoder, answers: Answers): void {
    switch (kind) {
      case Kind.ping:
        this.#tables.all('');
        answers.answer(id, Status.done);
        return;
      case Kind.listTables: {
        const names = this.#tables.all(decoder.string()) as unknown as Array<[string]>;
        answers.answer(id, Status.done, (encoder) => {
          encoder.u32(names.length);
          for (const [name] of names) encoder.string(name);
        });
        return;
      }
      case Kind.describeTable: {
        const instance = decoder.string();
        const table = decoder.string();
        const info = this.#lookUp(instance, table);
        answers.answer(id, Status.done, (encoder) => {
          encoder.u32(info.families.size);
          for (const [name, policy] of info.families) {
            encoder.string(name);
            encodePolicyBound(encoder, policy.maxVersions);
            encodePolicyBound(encoder, policy.maxAgeSeconds);
          }
        });
        return;
      }
      case Kind.readRows:
        this.#readRows(id, decoder, answers);
        return;
      case Kind.scan:
        this.#scan(id, decoder, answers);
        return;
      case Kind.changeStart:
        this.#changeStart(id, decoder, answers);
        return;
      case Kind.changes:
        this.#changes(id, decoder, answers);
        return;
      default:
        throw new Error(`unknown read request kind ${kind}`);
    }
  }

  /**
   * Where a feed starts, as `u32 table id, i64 seq`: the last seq (now), the seq before the first
   * change at or after a time (since), or a position checked against what this store made and
   * still keeps (after). NOT_FOUND for a missing table; OUT_OF_RANGE for a start past the
   * retention (trimmed, or due to be); INVALID_ARGUMENT for a seq never given.
   */
  #changeStart(id: number, decoder: Decoder, answers: Answers): void {
    const instance = decoder.string();
    const table = decoder.string();
    const type = decoder.u8();
    const value = decoder.i64();
    const info = this.#lookUp(instance, table);
    const last = this.#lastSeq();
    const trimmed = (this.#feed.trimmedThrough.get() as unknown as [bigint])[0];
    const cutoff = this.#now - BigInt(EMBEDDED_LIMITS.changeRetentionSeconds) * 1_000_000n;
    let start: bigint;
    if (type === StartType.now) {
      start = last;
    } else if (type === StartType.since) {
      if (value < cutoff) throw new StoreError('OUT_OF_RANGE', 'the feed start time is older than the change retention');
      start = this.#seqBefore(value, trimmed + 1n, last + 1n);
    } else {
      if (value > last) throw new StoreError('INVALID_ARGUMENT', `feed position ${value} is beyond any change this store recorded`);
      const next = this.#feed.nextChange.get(info.id, value) as unknown as [bigint] | undefined;
      if (value < trimmed || (next !== undefined && next[0] < cutoff)) {
        throw new StoreError('OUT_OF_RANGE', 'the feed position is older than the change retention');
      }
      start = value;
    }
    answers.answer(id, Status.done, (encoder) => {
      encoder.u32(info.id);
      encoder.i64(start);
    });
  }

  /**
   * The seq just before the first change committed at or after `micros`, bisecting seqs in
   * [low, high): commit times never decrease with seq (Writer), so each probe is one seek.
   */
  #seqBefore(micros: bigint, low: bigint, high: bigint): bigint {
    let lo = low;
    let hi = high;
    while (lo < hi) {
      const mid = lo + (hi - lo) / 2n;
      const found = this.#feed.changeAtOrAfter.get(mid) as unknown as [bigint, bigint] | undefined;
      if (found === undefined || found[1] >= micros) hi = mid;
      else lo = found[0] + 1n;
    }
    return lo - 1n;
  }

  #lastSeq(): bigint {
    const row = this.#feed.lastSeq.get() as unknown as [bigint] | undefined;
    return row?.[0] ?? 0n;
  }

  /**
   * The table's changes after a seq, as `u8 table still there, u8 complete, i64 through, u32
   * count, (i64 seq, i64 commit_us, key, mutations)*`. `through` is the seq the feed has seen up
   * to: the last change's when the answer is full, else the last seq given (complete). The table
   * is there only when it has the id the feed started with: one deleted and created again is not.
   */
  #changes(id: number, decoder: Decoder, answers: Answers): void {
    const instance = decoder.string();
    const table = decoder.string();
    const tableId = decoder.u32();
    const after = decoder.i64();
    const current = this.#feed.tableId.get(instance, table) as unknown as [bigint] | undefined;
    const present = current !== undefined && Number(current[0]) === tableId;
    const changes: Array<[bigint, bigint, Uint8Array, Uint8Array]> = [];
    let bytes = 0;
    let complete = true;
    const cursor = this.#feed.changesAfter.iterate(tableId, after) as Cursor;
    try {
      for (let step = cursor.next(); step.done !== true; step = cursor.next()) {
        if (changes.length >= CHANGES_PER_ANSWER || bytes >= CHANGE_BYTES_PER_ANSWER) {
          complete = false;
          break;
        }
        const change = step.value as [bigint, bigint, Uint8Array, Uint8Array];
        changes.push(change);
        bytes += change[2].byteLength + change[3].byteLength;
      }
    } finally {
      cursor.return?.();
    }
    const through = complete ? this.#lastSeq() : (changes.at(-1) as [bigint, ...unknown[]])[0];
    answers.answer(id, Status.done, (encoder) => {
      encoder.u8(present ? 1 : 0);
      encoder.u8(complete ? 1 : 0);
      encoder.i64(through);
      encoder.u32(changes.length);
      for (const [seq, commitMicros, key, mutations] of changes) {
        encoder.i64(seq);
        encoder.i64(commitMicros);
        encoder.bytes(key);
        // A large one crosses to the main thread in its own buffer, as read from SQLite (Encoder.attach).
        encoder.attach(mutations);
      }
    });
  }

  #readRows(id: number, decoder: Decoder, answers: Answers): void {
    const instance = decoder.string();
    const table = decoder.string();
    const selection = decodeSelection(decoder);
    const count = decoder.u32();
    const info = this.#lookUp(instance, table);
    const plan = readPlan(selection, info.families, this.#now);
    const out = new RowAnswer(answers, id);
    for (let index = 0; index < count; index++) {
      const key = decoder.bytes();
      out.beginRow(index, key);
      this.#readRow(info.id, key, plan, out);
      out.endRow();
    }
    out.finish();
  }

  /** Writes the cells of one row that `plan` keeps. */
  #readRow(tableId: number, key: Uint8Array, plan: ReadPlan, out: RowAnswer): void {
    const statements = this.#row;
    let cursor: Cursor;
    if (plan.selectors === undefined) {
      cursor = statements.all.iterate(tableId, key) as Cursor;
    } else {
      const first = plan.selectors[0];
      if (first === undefined) return;
      cursor = statements.from.iterate(tableId, key, first.family, selectorColumn(first)) as Cursor;
    }
    const cells = new CellFilter(plan);
    try {
      for (;;) {
        const step = cursor.next();
        if (step.done === true) return;
        const [cellFamily, qualifier, timestamp, value] = step.value as [string, Uint8Array, bigint, Uint8Array];
        const verdict = cells.judge(cellFamily, qualifier, timestamp);
        if (verdict === Verdict.keep) {
          out.cell(cellFamily, qualifier, timestamp, value);
        } else if (verdict === Verdict.seek) {
          cursor.return?.();
          cursor = statements.from.iterate(tableId, key, cells.seekFamily, cells.seekColumn) as Cursor;
        } else {
          return;
        }
      }
    } finally {
      cursor.return?.();
    }
  }

  /**
   * One chunk of a scan: rows after `after` (or from the range's start) until the scan's limit,
   * a full message, or ROWS_EXAMINED_PER_CHUNK rows. The trailer says whether the range is
   * exhausted and, if not, the last key examined, from which the next chunk resumes.
   */
  #scan(id: number, decoder: Decoder, answers: Answers): void {
    const instance = decoder.string();
    const table = decoder.string();
    const expectedId = decoder.u32();
    const selection = decodeSelection(decoder);
    const flags = decoder.u8();
    const start = (flags & ScanFlag.start) !== 0 ? decoder.bytes() : undefined;
    const end = (flags & ScanFlag.end) !== 0 ? decoder.bytes() : undefined;
    const after = (flags & ScanFlag.after) !== 0 ? decoder.bytes() : undefined;
    const limit = decoder.u32();
    const info = this.#lookUp(instance, table);
    // The table was deleted (and maybe created again) since the scan's first chunk.
    if (expectedId !== 0 && info.id !== expectedId) throw tableNotFound({ instance, table });
    const plan = readPlan(selection, info.families, this.#now);
    const out = new RowAnswer(answers, id);
    const range = { start, end, after, limit };
    const last = (flags & ScanFlag.reverse) !== 0 ? this.#scanBackward(info.id, range, plan, out) : this.#scanForward(info.id, range, plan, out);
    out.finish((encoder) => {
      encoder.u32(info.id);
      if (last === undefined) {
        encoder.u8(1);
      } else {
        encoder.u8(0);
        encoder.bytes(last);
      }
    });
  }

  /** Returns the last key examined when the chunk ends before the range does. */
  #scanForward(tableId: number, range: ScanRange, plan: ReadPlan, out: RowAnswer): Uint8Array | undefined {
    const statements = this.#range;
    let cursor: Cursor =
      range.after !== undefined
        ? (statements.afterRow.iterate(tableId, range.after) as Cursor)
        : range.start !== undefined
          ? (statements.fromKey.iterate(tableId, range.start) as Cursor)
          : (statements.all.iterate(tableId) as Cursor);
    let rowKey: Uint8Array | undefined;
    let rows = 0;
    let examined = 0;
    const cells = new CellFilter(plan);
    try {
      for (;;) {
        const step = cursor.next();
        if (step.done === true) {
          if (rowKey !== undefined && out.endRow()) rows++;
          return undefined;
        }
        const [key, cellFamily, qualifier, timestamp, value] = step.value as [Uint8Array, string, Uint8Array, bigint, Uint8Array];
        if (rowKey === undefined || !sameBytes(key, rowKey)) {
          if (rowKey !== undefined) {
            if (out.endRow()) rows++;
            if (rows >= range.limit || out.full || examined >= ROWS_EXAMINED_PER_CHUNK) return rowKey;
          }
          if (range.end !== undefined && Buffer.compare(key, range.end) >= 0) return undefined;
          rowKey = key;
          examined++;
          out.beginRow(0, key);
          cells.startRow();
        }
        const verdict = cells.judge(cellFamily, qualifier, timestamp);
        if (verdict === Verdict.keep) {
          out.cell(cellFamily, qualifier, timestamp, value);
          continue;
        }
        cursor.return?.();
        cursor =
          verdict === Verdict.seek
            ? (statements.from.iterate(tableId, key, cells.seekFamily, cells.seekColumn) as Cursor)
            : (statements.afterRow.iterate(tableId, key) as Cursor);
      }
    } finally {
      cursor.return?.();
    }
  }

  #scanBackward(tableId: number, range: ScanRange, plan: ReadPlan, out: RowAnswer): Uint8Array | undefined {
    let bound = range.after ?? range.end;
    let rows = 0;
    for (let examined = 0; ; examined++) {
      const found = (bound === undefined ? this.#lastKey.get(tableId) : this.#keyBefore.get(tableId, bound)) as [Uint8Array] | undefined;
      const key = found?.[0];
      if (key === undefined || (range.start !== undefined && Buffer.compare(key, range.start) < 0)) return undefined;
      out.beginRow(0, key);
      this.#readRow(tableId, key, plan, out);
      if (out.endRow()) rows++;
      bound = key;
      if (rows >= range.limit || out.full || examined + 1 >= ROWS_EXAMINED_PER_CHUNK) return key;
    }
  }

  #lookUp(instance: string, table: string): TableInfo {
    const key = `${instance}/${table}`;
    const seen = this.#tablesSeen.get(key);
    if (seen !== undefined) return seen;
    const info = this.#lookUpNow(instance, table);
    this.#tablesSeen.set(key, info);
    return info;
  }

  #lookUpNow(instance: string, table: string): TableInfo {
    const rows = this.#table.all(instance, table) as unknown as Array<[bigint, string, bigint | null, bigint | null]>;
    const first = rows[0];
    if (first === undefined) throw tableNotFound({ instance, table });
    const families = new Map<string, FamilyPolicy>();
    for (const [, name, maxVersions, maxAgeSeconds] of rows) {
      families.set(name, {
        ...(maxVersions === null ? {} : { maxVersions: Number(maxVersions) }),
        ...(maxAgeSeconds === null ? {} : { maxAgeSeconds: Number(maxAgeSeconds) }),
      });
    }
    return { id: Number(first[0]), families };
  }
}

interface ScanRange {
  readonly start: Uint8Array | undefined;
  readonly end: Uint8Array | undefined;
  readonly after: Uint8Array | undefined;
  readonly limit: number;
}

const EMPTY = new Uint8Array(0);

/** What a CellFilter makes of one cell. */
const Verdict = {
  /** The read returns the cell. */
  keep: 0,
  /** Not the cell, nor any before the filter's seekFamily and seekColumn in the row: reopen the cursor there. */
  seek: 1,
  /** Nothing further in the row: the selectors are all behind it. */
  rowDone: 2,
} as const;
type Verdict = (typeof Verdict)[keyof typeof Verdict];

/**
 * CellFilter judges a row's cells, in stored order, against a read's plan: the selected columns,
 * the versions asked for and each family's retention. Reads of single rows and scans walk their
 * cursors differently but keep the same cells of each row.
 */
class CellFilter {
  /** Where the cursor reopens after a Verdict.seek. */
  seekFamily = '';
  seekColumn: Uint8Array = EMPTY;
  readonly #plan: ReadPlan;
  /** The first selector not yet behind the cells seen. */
  #next = 0;
  /** The column of the last cell kept or counted, and how many of its versions were kept. */
  #family = '';
  #column: Uint8Array | undefined;
  #count = 0;

  constructor(plan: ReadPlan) {
    this.#plan = plan;
  }

  /** The cursor has moved on to another row. */
  startRow(): void {
    this.#next = 0;
    this.#column = undefined;
  }

  judge(cellFamily: string, qualifier: Uint8Array, timestamp: bigint): Verdict {
    const { selectors, rules } = this.#plan;
    if (selectors !== undefined) {
      while (this.#next < selectors.length && selectorBefore(selectors[this.#next] as (typeof selectors)[number], cellFamily, qualifier)) this.#next++;
      const selector = selectors[this.#next];
      if (selector === undefined) return Verdict.rowDone;
      if (!selectorMatches(selector, cellFamily, qualifier)) return this.#seek(selector.family, selectorColumn(selector));
    }
    const rule = rules.get(cellFamily);
    // A family the table no longer has: nothing of it is readable.
    if (rule === undefined) return this.#seek(`${cellFamily}\u0000`, EMPTY);
    if (cellFamily !== this.#family || this.#column === undefined || !sameBytes(qualifier, this.#column)) {
      this.#family = cellFamily;
      this.#column = qualifier;
      this.#count = 0;
    }
    // The column has given what the read keeps of it: skip its older versions at once.
    if (this.#count >= rule.limit || (rule.cutoff !== undefined && timestamp < rule.cutoff)) return this.#seek(cellFamily, successor(qualifier));
    this.#count++;
    return Verdict.keep;
  }

  #seek(family: string, column: Uint8Array): Verdict {
    this.seekFamily = family;
    this.seekColumn = column;
    return Verdict.seek;
  }
}

/**
 * The smallest byte string after `bytes` (itself followed by a zero byte): seeking to it skips
 * every version of a column at once. A family's successor is likewise its name followed by NUL,
 * a character family names never hold.
 */
function successor(bytes: Uint8Array): Uint8Array {
  const next = new Uint8Array(bytes.byteLength + 1);
  next.set(bytes);
  return next;
}

function nowMicros(): bigint {
  return BigInt(Date.now()) * 1000n;
}

export type { FamilyPolicies };
