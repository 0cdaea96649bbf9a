import type { DatabaseSync, StatementSync } from 'node:sqlite';
import { type StoreError, familyNotFound, notACounter, tableExists, tableNotFound } from '../errors.ts';
import type { FamilyPolicy } from '../store.ts';
import { type Decoder, Encoder } from './codec.ts';
import { EMBEDDED_LIMITS } from './limits.ts';
import { ConditionType, Kind, MutationType, RuleType, decodePolicyBound, encodeError } from './protocol.ts';
import { toStoreError } from './sqlite-errors.ts';

interface TableEntry {
  readonly id: number;
  readonly families: ReadonlyMap<string, FamilyPolicy>;
}

/** One request of a batch, as the writer thread received it. */
export interface WriteRequest {
  readonly id: number;
  readonly kind: number;
  readonly decoder: Decoder;
  /** Why the request must not run (deadline passed, caller gone), checked when its turn comes. */
  readonly skip: () => StoreError | undefined;
}

/** What a request of the batch came to: its result's encoder, or its error. */
export type WriteOutcome = { readonly ok: true; readonly result: (encoder: Encoder) => void } | { readonly ok: false; readonly error: StoreError };

type DecodedMutation =
  | { readonly type: 1; readonly family: string; readonly column: Buffer; readonly value: Buffer; readonly timestamp: bigint }
  | { readonly type: 2; readonly family: string; readonly column: Buffer }
  | { readonly type: 3; readonly family: string }
  | { readonly type: 4 };

type DecodedCondition =
  | { readonly type: 1; readonly exists: boolean }
  | { readonly type: 2; readonly family: string; readonly exists: boolean }
  | { readonly type: 3; readonly family: string; readonly column: Buffer; readonly exists: boolean }
  | { readonly type: 4; readonly family: string; readonly column: Buffer; readonly value: Buffer };

type DecodedRule =
  | { readonly type: 1; readonly family: string; readonly column: Buffer; readonly amount: bigint }
  | { readonly type: 2; readonly family: string; readonly column: Buffer; readonly value: Buffer };

/** The latest live version of a column. */
interface Latest {
  readonly timestamp: bigint;
  readonly value: Uint8Array;
}

/** Below every timestamp (they run from 0 to 2^63 - 1): the cutoff of a family that keeps versions of any age. */
const NO_CUTOFF = -(2n ** 63n);

const NO_RESULT = (): void => {};

/** The change encoder's buffer; one grown past 16 times this (a tall write) is not kept. */
const CHANGE_ENCODER_BYTES = 4096;

/**
 * Writer runs every change of the embedded store on the one writing connection, in batches: all
 * the requests that reached the writer thread while it was busy share one transaction and so one
 * fsync (group commit). Each request runs in its own savepoint, and each entry of a mutateRows in
 * a savepoint inside it, so that a failing one is rolled back alone. No outcome is reported before
 * the COMMIT that made it durable; if the COMMIT fails, every request of the batch fails with it.
 *
 * Retention is enforced here, in the same transaction as the write that makes versions surplus or
 * expired: after a row's mutations, each column they set in a family with a policy keeps only its
 * newest maxVersions versions and none older than maxAgeSeconds.
 *
 * Every row write (a mutateRow, each entry of a mutateRows, the branch a checkAndMutateRow
 * applies when it has mutations, the sets of a readModifyWriteRow) records one change in the
 * changes table, in the same savepoint: a change is there exactly when its write committed.
 *
 * Conditional mutations and read-modify-writes read the row on this connection inside the
 * request's savepoint and write in it: nothing else writes in between, so each is atomic without
 * a retry. What they read is the row's live versions, retention applied as reads apply it.
 *
 * The catalog of tables and families is kept in memory: this connection is the only one that
 * changes it.
 */
export class Writer {
  readonly #db: DatabaseSync;
  readonly #catalog = new Map<string, TableEntry>();
  readonly #statements: Record<
    | 'upsert'
    | 'deleteColumn'
    | 'deleteFamily'
    | 'deleteRow'
    | 'keepNewest'
    | 'dropOlder'
    | 'insertTable'
    | 'insertFamily'
    | 'deleteCells'
    | 'deleteFamilies'
    | 'deleteTable'
    | 'latest'
    | 'familyLive'
    | 'insertChange'
    | 'oldestChanges'
    | 'trimChanges'
    | 'markTrimmed',
    StatementSync
  >;

  /** Encodes each change's mutations, reused (SQLite copies the BLOB it is bound to) unless a tall one grew it. */
  #changeEncoder = new Encoder(CHANGE_ENCODER_BYTES);
  /** The commit time of the last change recorded: the next one is never earlier. */
  #lastChangeMicros: bigint;

  readonly #control: Record<'begin' | 'commit' | 'savepoint' | 'release' | 'rollback' | 'savepointEntry' | 'releaseEntry' | 'rollbackEntry', StatementSync>;

  constructor(db: DatabaseSync) {
    this.#db = db;
    this.#control = {
      begin: db.prepare('BEGIN IMMEDIATE'),
      commit: db.prepare('COMMIT'),
      savepoint: db.prepare('SAVEPOINT request'),
      release: db.prepare('RELEASE request'),
      rollback: db.prepare('ROLLBACK TO request'),
      savepointEntry: db.prepare('SAVEPOINT entry'),
      releaseEntry: db.prepare('RELEASE entry'),
      rollbackEntry: db.prepare('ROLLBACK TO entry'),
    };
    const cell = 'table_id = ? AND row_key = ?';
    const column = `${cell} AND family = ? AND qualifier = ?`;
    this.#statements = {
      upsert: db.prepare(
        `INSERT INTO cells (table_id, row_key, family, qualifier, ts, value) VALUES (?, ?, ?, ?, ?, ?)
         ON CONFLICT DO UPDATE SET value = excluded.value`,
      ),
      deleteColumn: db.prepare(`DELETE FROM cells WHERE ${column}`),
      deleteFamily: db.prepare(`DELETE FROM cells WHERE ${cell} AND family = ?`),
      deleteRow: db.prepare(`DELETE FROM cells WHERE ${cell}`),
      // Versions older than the column's n-th newest (the OFFSET is n - 1); none when it has n or fewer.
      keepNewest: db.prepare(
        `DELETE FROM cells WHERE table_id = ?1 AND row_key = ?2 AND family = ?3 AND qualifier = ?4 AND ts <
           (SELECT ts FROM cells WHERE table_id = ?1 AND row_key = ?2 AND family = ?3 AND qualifier = ?4 ORDER BY ts DESC LIMIT 1 OFFSET ?5)`,
      ),
      dropOlder: db.prepare(`DELETE FROM cells WHERE ${column} AND ts < ?`),
      insertTable: db.prepare('INSERT INTO tables (instance, name) VALUES (?, ?) RETURNING id'),
      insertFamily: db.prepare('INSERT INTO families (table_id, name, max_versions, max_age_seconds) VALUES (?, ?, ?, ?)'),
      deleteCells: db.prepare('DELETE FROM cells WHERE table_id = ?'),
      deleteFamilies: db.prepare('DELETE FROM families WHERE table_id = ?'),
      deleteTable: db.prepare('DELETE FROM tables WHERE id = ?'),
      // A column's newest version: the first the primary key (ts descending) meets.
      latest: db.prepare(`SELECT ts, value FROM cells WHERE ${column} ORDER BY ts DESC LIMIT 1`),
      // Whether a family has a version at or after the cutoff in the row: then the latest version
      // of that version's column is at or after it too, so live.
      familyLive: db.prepare(`SELECT 1 FROM cells WHERE ${cell} AND family = ? AND ts >= ? LIMIT 1`),
      insertChange: db.prepare('INSERT INTO changes (table_id, commit_us, row_key, mutations) VALUES (?, ?, ?, ?)'),
      // The oldest changes, oldest first: commit_us never decreases with seq, so the ones to trim
      // are a prefix of these, and finding them costs what they are, never a walk of the rest.
      oldestChanges: db.prepare('SELECT seq, commit_us FROM changes ORDER BY seq LIMIT ?'),
      trimChanges: db.prepare('DELETE FROM changes WHERE seq <= ?'),
      markTrimmed: db.prepare('UPDATE change_trim SET through = max(through, ?)'),
    };
    // Timestamps up to 2^63 - 1 are read exactly.
    this.#statements.latest.setReadBigInts(true);
    this.#statements.oldestChanges.setReadBigInts(true);
    // The last change's (commit times follow seq): one seek, where max(commit_us) would read them all.
    const last = db.prepare('SELECT commit_us FROM changes ORDER BY seq DESC LIMIT 1').get() as { commit_us: number } | undefined;
    this.#lastChangeMicros = BigInt(last?.commit_us ?? 0);
    this.#loadCatalog();
  }

  /** Runs a batch in one transaction; returns each request's outcome, in order. */
  runBatch(requests: readonly WriteRequest[]): WriteOutcome[] {
    const outcomes: WriteOutcome[] = [];
    try {
      this.#control.begin.run();
      for (const request of requests) {
        const skipped = request.skip();
        if (skipped !== undefined) {
          outcomes.push({ ok: false, error: skipped });
          continue;
        }
        this.#control.savepoint.run();
        try {
          outcomes.push({ ok: true, result: this.#run(request.kind, request.decoder) });
          this.#control.release.run();
        } catch (error) {
          this.#control.rollback.run();
          this.#control.release.run();
          outcomes.push(error instanceof RolledBack ? { ok: true, result: error.result } : { ok: false, error: toStoreError(error, 'write') });
        }
      }
      this.#control.commit.run();
      return outcomes;
    } catch (error) {
      if (this.#db.isTransaction) this.#db.exec('ROLLBACK');
      // Changes of the batch to the catalog were rolled back with it.
      this.#loadCatalog();
      const failure = toStoreError(error, 'commit');
      return requests.map(() => ({ ok: false, error: failure }));
    }
  }

  /**
   * Deletes up to `limit` changes committed before `now` less the retention, oldest first, in a
   * transaction of its own; returns whether there may be more to trim. Run between batches (see
   * sqlite-thread.ts), never inside one, so a write waits for at most one such step.
   */
  trimChanges(limit: number, now = nowMicros(), retentionSeconds = EMBEDDED_LIMITS.changeRetentionSeconds): boolean {
    const cutoff = now - BigInt(retentionSeconds) * 1_000_000n;
    const oldest = this.#statements.oldestChanges.all(limit) as Array<{ seq: bigint; commit_us: bigint }>;
    let through: bigint | undefined;
    let count = 0;
    for (const change of oldest) {
      if (change.commit_us >= cutoff) break;
      through = change.seq;
      count++;
    }
    if (through === undefined) return false;
    this.#control.begin.run();
    try {
      this.#statements.trimChanges.run(through);
      this.#statements.markTrimmed.run(through);
      this.#control.commit.run();
    } catch (error) {
      if (this.#db.isTransaction) this.#db.exec('ROLLBACK');
      throw error;
    }
    return count === limit;
  }

  #run(kind: number, decoder: Decoder): (encoder: Encoder) => void {
    switch (kind) {
      case Kind.ping:
        return NO_RESULT;
      case Kind.createTable:
        this.#createTable(decoder);
        return NO_RESULT;
      case Kind.deleteTable:
        this.#deleteTable(decoder);
        return NO_RESULT;
      case Kind.mutate:
        return this.#mutate(decoder);
      case Kind.checkAndMutate:
        return this.#checkAndMutate(decoder);
      case Kind.readModifyWrite:
        return this.#readModifyWrite(decoder);
      default:
        throw new Error(`unknown write request kind ${kind}`);
    }
  }

  #createTable(decoder: Decoder): void {
    const instance = decoder.string();
    const name = decoder.string();
    const count = decoder.u32();
    if (this.#catalog.has(catalogKey(instance, name))) {
      throw tableExists({ instance, table: name });
    }
    const { id } = this.#statements.insertTable.get(instance, name) as { id: number };
    const families = new Map<string, FamilyPolicy>();
    for (let i = 0; i < count; i++) {
      const family = decoder.string();
      const maxVersions = decodePolicyBound(decoder);
      const maxAgeSeconds = decodePolicyBound(decoder);
      this.#statements.insertFamily.run(id, family, maxVersions ?? null, maxAgeSeconds ?? null);
      families.set(family, {
        ...(maxVersions === undefined ? {} : { maxVersions }),
        ...(maxAgeSeconds === undefined ? {} : { maxAgeSeconds }),
      });
    }
    this.#catalog.set(catalogKey(instance, name), { id, families });
  }

  #deleteTable(decoder: Decoder): void {
    const instance = decoder.string();
    const name = decoder.string();
    const { id } = this.#table(instance, name);
    this.#statements.deleteCells.run(id);
    this.#statements.deleteFamilies.run(id);
    this.#statements.deleteTable.run(id);
    this.#catalog.delete(catalogKey(instance, name));
  }

  /** Applies the entries of a mutateRow or mutateRows; the result lists each entry's outcome. */
  #mutate(decoder: Decoder): (encoder: Encoder) => void {
    const instance = decoder.string();
    const name = decoder.string();
    const table = this.#table(instance, name);
    const familyNames: string[] = [];
    for (let count = decoder.u32(), i = 0; i < count; i++) familyNames.push(decoder.string());
    const entries = decoder.u32();
    const errors: Array<StoreError | undefined> = [];
    for (let entry = 0; entry < entries; entry++) {
      const key = decoder.bytes();
      const mutations = decodeMutations(decoder, familyNames);
      const missing = missingFamily(mutations, table);
      if (missing !== undefined) {
        errors.push(familyNotFound(missing, { instance, table: name }));
        continue;
      }
      // A request of one entry (every mutateRow) has the request's savepoint: no second one.
      if (entries === 1) {
        try {
          this.#applyRow(table, key, mutations);
          errors.push(undefined);
        } catch (error) {
          throw new RolledBack(entryResults([toStoreError(error, 'write')]));
        }
        continue;
      }
      this.#control.savepointEntry.run();
      try {
        this.#applyRow(table, key, mutations);
        this.#control.releaseEntry.run();
        errors.push(undefined);
      } catch (error) {
        this.#control.rollbackEntry.run();
        this.#control.releaseEntry.run();
        errors.push(toStoreError(error, 'write'));
      }
    }
    return entryResults(errors);
  }

  /**
   * Evaluates the conditions on the row's live versions and applies the branch they choose, in
   * this request's savepoint of the batch's transaction: nothing else writes between the two.
   * Every family named is checked first (conditions, then mutations, then otherwise), so an
   * unknown one fails the call before anything is written.
   */
  #checkAndMutate(decoder: Decoder): (encoder: Encoder) => void {
    const instance = decoder.string();
    const name = decoder.string();
    const table = this.#table(instance, name);
    const key = decoder.bytes();
    const familyNames: string[] = [];
    for (let count = decoder.u32(), i = 0; i < count; i++) familyNames.push(decoder.string());
    const conditions = decodeConditions(decoder, familyNames);
    const mutations = decodeMutations(decoder, familyNames);
    const otherwise = decodeMutations(decoder, familyNames);
    for (const condition of conditions) {
      if (condition.type !== ConditionType.rowExists && !table.families.has(condition.family)) throw familyNotFound(condition.family, { instance, table: name });
    }
    const missing = missingFamily(mutations, table) ?? missingFamily(otherwise, table);
    if (missing !== undefined) throw familyNotFound(missing, { instance, table: name });
    const now = nowMicros();
    const matched = conditions.every((condition) => this.#holds(table, key, condition, now));
    const branch = matched ? mutations : otherwise;
    if (branch.length > 0) this.#applyRow(table, key, branch);
    return (encoder) => encoder.u8(matched ? 1 : 0);
  }

  /** Whether `condition` holds of the row's live versions at `now`. */
  #holds(table: TableEntry, key: Uint8Array, condition: DecodedCondition, now: bigint): boolean {
    switch (condition.type) {
      case ConditionType.rowExists:
        return [...table.families.keys()].some((family) => this.#familyLive(table, key, family, now)) === condition.exists;
      case ConditionType.familyExists:
        return this.#familyLive(table, key, condition.family, now) === condition.exists;
      case ConditionType.columnExists:
        return (this.#latest(table, key, condition.family, condition.column, now) !== undefined) === condition.exists;
      case ConditionType.columnEquals: {
        const latest = this.#latest(table, key, condition.family, condition.column, now);
        return latest !== undefined && Buffer.compare(latest.value, condition.value) === 0;
      }
    }
  }

  /**
   * Applies increments and appends in rule order, each to the column as the earlier rules left it,
   * then writes one new version per column touched, in this request's savepoint. Everything is
   * decided (families known, counters 8 bytes) before the first write.
   */
  #readModifyWrite(decoder: Decoder): (encoder: Encoder) => void {
    const instance = decoder.string();
    const name = decoder.string();
    const table = this.#table(instance, name);
    const key = decoder.bytes();
    const rules = decodeRules(decoder);
    for (const rule of rules) if (!table.families.has(rule.family)) throw familyNotFound(rule.family, { instance, table: name });
    // Milliseconds as microseconds: the store's clock at its granularity.
    const now = nowMicros();
    const touched = new Map<string, { readonly family: string; readonly column: Buffer; value: Buffer; readonly timestamp: bigint }>();
    for (const rule of rules) {
      const id = `${rule.family}\u0000${rule.column.toString('latin1')}`;
      let cell = touched.get(id);
      if (cell === undefined) {
        const before = this.#latest(table, key, rule.family, rule.column, now);
        // A missing or expired column counts from 0 and appends to nothing.
        const value = before !== undefined ? Buffer.from(before.value) : rule.type === RuleType.increment ? counterBytes(0n) : EMPTY;
        // Never older than the version it replaces; one at the same timestamp is replaced.
        const timestamp = before !== undefined && before.timestamp > now ? before.timestamp : now;
        cell = { family: rule.family, column: rule.column, value, timestamp };
        touched.set(id, cell);
      }
      if (rule.type === RuleType.append) {
        cell.value = Buffer.concat([cell.value, rule.value]);
      } else {
        if (cell.value.byteLength !== 8) throw notACounter(rule.family, cell.value.byteLength);
        cell.value = counterBytes(cell.value.readBigInt64BE() + rule.amount);
      }
    }
    const cells = [...touched.values()];
    this.#applyRow(
      table,
      key,
      cells.map((cell) => ({ type: MutationType.set, family: cell.family, column: cell.column, value: cell.value, timestamp: cell.timestamp })),
    );
    cells.sort((x, y) => (x.family === y.family ? Buffer.compare(x.column, y.column) : x.family < y.family ? -1 : 1));
    return (encoder) => {
      encoder.u32(cells.length);
      for (const cell of cells) {
        encoder.string(cell.family);
        encoder.bytes(cell.column);
        encoder.bytes(cell.value);
        encoder.i64(cell.timestamp);
      }
    };
  }

  /** A column's latest version if it is live at `now`: one older than the family's maxAgeSeconds is not. */
  #latest(table: TableEntry, key: Uint8Array, family: string, column: Uint8Array, now: bigint): Latest | undefined {
    const found = this.#statements.latest.get(table.id, key, family, column) as { ts: bigint; value: Uint8Array } | undefined;
    if (found === undefined || found.ts < cutoff(table, family, now)) return undefined;
    return { timestamp: found.ts, value: found.value };
  }

  /** Whether the family has a live version in the row at `now`. */
  #familyLive(table: TableEntry, key: Uint8Array, family: string, now: bigint): boolean {
    return this.#statements.familyLive.get(table.id, key, family, cutoff(table, family, now)) !== undefined;
  }

  #applyRow(table: TableEntry, key: Uint8Array, mutations: readonly DecodedMutation[]): void {
    const statements = this.#statements;
    this.#recordChange(table, key, mutations);
    // Columns set in families with a retention policy, to trim once the row's mutations are done.
    let touched: Map<string, { readonly family: string; readonly column: Uint8Array; readonly policy: FamilyPolicy }> | undefined;
    for (const mutation of mutations) {
      switch (mutation.type) {
        case MutationType.set: {
          statements.upsert.run(table.id, key, mutation.family, mutation.column, mutation.timestamp, mutation.value);
          const policy = table.families.get(mutation.family);
          if (policy !== undefined && (policy.maxVersions !== undefined || policy.maxAgeSeconds !== undefined)) {
            touched ??= new Map();
            touched.set(`${mutation.family}\u0000${mutation.column.toString('latin1')}`, {
              family: mutation.family,
              column: mutation.column,
              policy,
            });
          }
          break;
        }
        case MutationType.deleteColumn:
          statements.deleteColumn.run(table.id, key, mutation.family, mutation.column);
          break;
        case MutationType.deleteFamily:
          statements.deleteFamily.run(table.id, key, mutation.family);
          break;
        case MutationType.deleteRow:
          statements.deleteRow.run(table.id, key);
          break;
      }
    }
    if (touched === undefined) return;
    const now = nowMicros();
    for (const { family, column, policy } of touched.values()) {
      if (policy.maxVersions !== undefined) statements.keepNewest.run(table.id, key, family, column, policy.maxVersions - 1);
      if (policy.maxAgeSeconds !== undefined) {
        statements.dropOlder.run(table.id, key, family, column, now - BigInt(policy.maxAgeSeconds) * 1_000_000n);
      }
    }
  }

  /**
   * Records the row's change in the changes table, in the savepoint the mutations are applied in:
   * it commits with them or is rolled back with them. Its commit time is the clock's, or the last
   * change's when the clock went back, so that commit times follow seq.
   */
  #recordChange(table: TableEntry, key: Uint8Array, mutations: readonly DecodedMutation[]): void {
    const now = nowMicros();
    const commitMicros = now > this.#lastChangeMicros ? now : this.#lastChangeMicros;
    const encoder = this.#changeEncoder;
    encoder.truncate(0);
    encodeChangeMutations(encoder, mutations);
    this.#statements.insertChange.run(table.id, commitMicros, key, encoder.written());
    if (encoder.length > CHANGE_ENCODER_BYTES * 16) this.#changeEncoder = new Encoder(CHANGE_ENCODER_BYTES);
    this.#lastChangeMicros = commitMicros;
  }

  #table(instance: string, name: string): TableEntry {
    const table = this.#catalog.get(catalogKey(instance, name));
    if (table === undefined) throw tableNotFound({ instance, table: name });
    return table;
  }

  #loadCatalog(): void {
    this.#catalog.clear();
    const tables = this.#db.prepare('SELECT id, instance, name FROM tables').all() as Array<{ id: number; instance: string; name: string }>;
    const byId = new Map<number, Map<string, FamilyPolicy>>();
    for (const table of tables) {
      const families = new Map<string, FamilyPolicy>();
      byId.set(table.id, families);
      this.#catalog.set(catalogKey(table.instance, table.name), { id: table.id, families });
    }
    const families = this.#db.prepare('SELECT table_id, name, max_versions, max_age_seconds FROM families').all() as Array<{
      table_id: number;
      name: string;
      max_versions: number | null;
      max_age_seconds: number | null;
    }>;
    for (const family of families) {
      byId.get(family.table_id)?.set(family.name, {
        ...(family.max_versions === null ? {} : { maxVersions: family.max_versions }),
        ...(family.max_age_seconds === null ? {} : { maxAgeSeconds: family.max_age_seconds }),
      });
    }
  }
}

const EMPTY = Buffer.alloc(0);

function nowMicros(): bigint {
  return BigInt(Date.now()) * 1000n;
}

/** Versions of `family` with a timestamp below this have expired at `now` (maxAgeSeconds). */
function cutoff(table: TableEntry, family: string, now: bigint): bigint {
  const maxAgeSeconds = table.families.get(family)?.maxAgeSeconds;
  return maxAgeSeconds === undefined ? NO_CUTOFF : now - BigInt(maxAgeSeconds) * 1_000_000n;
}

/** A counter's 8 bytes: `value` wrapped to a 64-bit two's-complement integer, big-endian. */
function counterBytes(value: bigint): Buffer {
  const bytes = Buffer.alloc(8);
  bytes.writeBigInt64BE(BigInt.asIntN(64, value));
  return bytes;
}

function catalogKey(instance: string, table: string): string {
  return `${instance}/${table}`;
}

/**
 * Thrown by a request that fails but has a result to report (a mutateRow's entry that failed):
 * its savepoint is rolled back, and the result goes to the caller.
 */
class RolledBack extends Error {
  readonly result: (encoder: Encoder) => void;

  constructor(result: (encoder: Encoder) => void) {
    super('rolled back');
    this.result = result;
  }
}

/** A mutate request's result: each entry's outcome, in order. */
function entryResults(errors: ReadonlyArray<StoreError | undefined>): (encoder: Encoder) => void {
  return (encoder) => {
    encoder.u32(errors.length);
    for (const error of errors) {
      if (error === undefined) {
        encoder.u8(1);
      } else {
        encoder.u8(0);
        encodeError(encoder, error);
      }
    }
  };
}

/** A change's mutations as the changes table stores them (decodeChangeMutations, changes.ts). */
function encodeChangeMutations(encoder: Encoder, mutations: readonly DecodedMutation[]): void {
  encoder.u32(mutations.length);
  for (const mutation of mutations) {
    encoder.u8(mutation.type);
    switch (mutation.type) {
      case MutationType.set:
        encoder.string(mutation.family);
        encoder.bytes(mutation.column);
        encoder.bytes(mutation.value);
        encoder.i64(mutation.timestamp);
        break;
      case MutationType.deleteColumn:
        encoder.string(mutation.family);
        encoder.bytes(mutation.column);
        break;
      case MutationType.deleteFamily:
        encoder.string(mutation.family);
        break;
      case MutationType.deleteRow:
        break;
    }
  }
}

/** The first family, in mutation order, that the table does not have. */
function missingFamily(mutations: readonly DecodedMutation[], table: TableEntry): string | undefined {
  for (const mutation of mutations) {
    if (mutation.type !== MutationType.deleteRow && !table.families.has(mutation.family)) return mutation.family;
  }
  return undefined;
}

/** Reads a family given by its index in the request's list of family names. */
function familyOf(decoder: Decoder, familyNames: readonly string[]): () => string {
  return () => {
    const index = decoder.u32();
    const name = familyNames[index];
    if (name === undefined) throw new Error(`family index ${index} out of range`);
    return name;
  };
}

function decodeMutations(decoder: Decoder, familyNames: readonly string[]): DecodedMutation[] {
  const mutations: DecodedMutation[] = [];
  const family = familyOf(decoder, familyNames);
  for (let count = decoder.u32(), i = 0; i < count; i++) {
    const type = decoder.u8();
    switch (type) {
      case MutationType.set: {
        const name = family();
        const column = decoder.bytes();
        const value = decoder.bytes();
        mutations.push({ type, family: name, column, value, timestamp: decoder.i64() });
        break;
      }
      case MutationType.deleteColumn: {
        const name = family();
        mutations.push({ type, family: name, column: decoder.bytes() });
        break;
      }
      case MutationType.deleteFamily:
        mutations.push({ type, family: family() });
        break;
      case MutationType.deleteRow:
        mutations.push({ type });
        break;
      default:
        throw new Error(`unknown mutation type ${type}`);
    }
  }
  return mutations;
}

function decodeConditions(decoder: Decoder, familyNames: readonly string[]): DecodedCondition[] {
  const conditions: DecodedCondition[] = [];
  const family = familyOf(decoder, familyNames);
  for (let count = decoder.u32(), i = 0; i < count; i++) {
    const type = decoder.u8();
    switch (type) {
      case ConditionType.rowExists:
        conditions.push({ type, exists: decoder.u8() === 1 });
        break;
      case ConditionType.familyExists:
        conditions.push({ type, family: family(), exists: decoder.u8() === 1 });
        break;
      case ConditionType.columnExists: {
        const name = family();
        const column = decoder.bytes();
        conditions.push({ type, family: name, column, exists: decoder.u8() === 1 });
        break;
      }
      case ConditionType.columnEquals: {
        const name = family();
        const column = decoder.bytes();
        conditions.push({ type, family: name, column, value: decoder.bytes() });
        break;
      }
      default:
        throw new Error(`unknown condition type ${type}`);
    }
  }
  return conditions;
}

function decodeRules(decoder: Decoder): DecodedRule[] {
  const rules: DecodedRule[] = [];
  for (let count = decoder.u32(), i = 0; i < count; i++) {
    const type = decoder.u8();
    const family = decoder.string();
    const column = decoder.bytes();
    switch (type) {
      case RuleType.increment:
        rules.push({ type, family, column, amount: decoder.i64() });
        break;
      case RuleType.append:
        rules.push({ type, family, column, value: decoder.bytes() });
        break;
      default:
        throw new Error(`unknown rule type ${type}`);
    }
  }
  return rules;
}
