import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { DATABASE_FILE, EmbeddedStore } from '../../../src/store/embedded/embedded-store.ts';
import { Writer } from '../../../src/store/embedded/writer.ts';
import { isStoreError } from '../../../src/store/errors.ts';
import { type ChangeEvent, type ChangeStart, FEED_PROGRESS_MS, type Mutation, type TableRef } from '../../../src/store/store.ts';

const run = promisify(execFile);

const set = (family: string, column: string, value: string, timestampMicros: bigint): Mutation => ({
  type: 'set',
  family,
  column: Buffer.from(column),
  value: Buffer.from(value),
  timestampMicros,
});

/** Reads a feed in the background until stopped or it ends. */
class Feed {
  readonly events: ChangeEvent[] = [];
  readonly #abort = new AbortController();
  readonly #done: Promise<void>;
  error: unknown;

  constructor(store: EmbeddedStore, ref: TableRef, start: ChangeStart) {
    this.#done = (async () => {
      try {
        for await (const event of store.readChanges(ref, start, { signal: this.#abort.signal })) this.events.push(event);
      } catch (error) {
        this.error = error;
      }
    })();
  }

  get changes(): Array<ChangeEvent & { type: 'change' }> {
    return this.events.filter((event): event is ChangeEvent & { type: 'change' } => event.type === 'change');
  }

  async until(ready: () => boolean, ms = 10_000): Promise<void> {
    const until = Date.now() + ms;
    while (!ready() && this.error === undefined) {
      if (Date.now() > until) throw new Error(`timed out; saw ${this.events.length} events`);
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
  }

  async stop(): Promise<void> {
    this.#abort.abort();
    await this.#done;
  }
}

/**
 * The embedded store's change feed beyond the conformance suite: what the changes table holds,
 * as SQLite's own shell reads it; that only committed writes are recorded; a table deleted and
 * created again; a position across a restart; and trimming by age.
 */
describe('embedded store: the change feed', () => {
  let dataDir: string;
  let store: EmbeddedStore;
  const ref = { instance: 'local', table: 'feed' };
  const options = () => ({ deadline: Date.now() + 10_000 });
  const feeds: Feed[] = [];
  const follow = (start: ChangeStart, table: TableRef = ref) => {
    const feed = new Feed(store, table, start);
    feeds.push(feed);
    return feed;
  };

  beforeEach(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'kvcrud-feed-'));
    store = await EmbeddedStore.open({ dataDir });
    await store.createTable(ref, [{ name: 'a' }, { name: 'b' }], options());
  });
  afterEach(async () => {
    await Promise.all(feeds.splice(0).map((feed) => feed.stop()));
    await store.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  describe('through the sqlite3 shell', () => {
    before(async function () {
      try {
        await run('sqlite3', ['-version']);
      } catch {
        this.skip();
      }
    });

    it('holds a change written through the store as one row of the changes table, beside the running store', async () => {
      await store.mutateRow(ref, Buffer.from([0x00, 0xff]), [set('a', 'x', 'v', 7000n), { type: 'deleteRow' }], options());
      const sql = `SELECT c.seq, t.name, hex(c.row_key), c.commit_us > 0, hex(c.mutations)
                   FROM changes c JOIN tables t ON t.id = c.table_id ORDER BY c.seq`;
      const { stdout } = await run('sqlite3', ['-readonly', '-cmd', '.timeout 5000', join(dataDir, DATABASE_FILE), sql], { timeout: 30_000 });
      // u32 count 2; set: u8 1, family "a", column "x", value "v", i64 7000; deleteRow: u8 4 (little-endian).
      const mutations = ['02000000', '01', '0100000061', '0100000078', '0100000076', '581B000000000000', '04'].join('');
      expect(stdout.trim().split('\n')).to.deep.equal([`1|feed|00FF|1|${mutations}`]);
    });
  });

  it('records a write only when it commits: not a failed entry, an empty branch, nor a refused increment', async () => {
    const feed = follow({ type: 'now' });
    await feed.until(() => feed.events.length > 0);
    const results = await store.mutateRows(
      ref,
      [
        { key: Buffer.from('good'), mutations: [set('a', 'x', '1', 1000n)] },
        { key: Buffer.from('bad'), mutations: [set('a', 'x', '1', 1000n), set('nope', 'x', '1', 1000n)] },
      ],
      options(),
    );
    expect(results.map((result) => result?.code)).to.deep.equal([undefined, 'NOT_FOUND']);
    await store.checkAndMutateRow(ref, Buffer.from('good'), { conditions: [{ type: 'rowExists', exists: false }], mutations: [set('a', 'y', 'no', 1000n)], otherwise: [] }, options());
    const refused = await store.readModifyWriteRow(ref, Buffer.from('good'), [{ type: 'increment', family: 'a', column: Buffer.from('x'), amount: 1n }], options()).catch((error: unknown) => error);
    expect(isStoreError(refused, 'FAILED_PRECONDITION')).to.equal(true);
    await store.mutateRow(ref, Buffer.from('last'), [set('b', 'z', 'end', 1000n)], options());
    await feed.until(() => feed.changes.length >= 2);
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(feed.changes.map((event) => event.change.key.toString())).to.deep.equal(['good', 'last']);
  });

  it('wakes a waiting feed when a write commits, without waiting for its next poll', async () => {
    const feed = follow({ type: 'now' });
    await feed.until(() => feed.events.length > 0);
    const latencies: number[] = [];
    for (let i = 0; i < 5; i++) {
      // Idle long enough for the feed to be waiting.
      await new Promise((resolve) => setTimeout(resolve, 50));
      const before = feed.changes.length;
      const started = performance.now();
      await store.mutateRow(ref, Buffer.from(`k${i}`), [set('a', 'x', String(i), 1000n)], options());
      await feed.until(() => feed.changes.length > before);
      latencies.push(performance.now() - started);
    }
    expect(Math.max(...latencies), `ms from write to change: ${latencies.map((ms) => ms.toFixed(1)).join(', ')}`).to.be.lessThan(500);
  });

  it('yields progress within FEED_PROGRESS_MS while writes that fail, or go to other tables, keep coming', async function () {
    this.timeout(30_000);
    const other = { instance: 'local', table: 'other' };
    await store.createTable(other, [{ name: 'a' }], options());
    const feed = follow({ type: 'now' });
    await feed.until(() => feed.events.length > 0);
    const started = Date.now();
    let writing = true;
    const writes = (async () => {
      while (writing) {
        await store.mutateRow(ref, Buffer.from('k'), [set('nope', 'x', '1', 1000n)], options()).catch(() => {});
        await store.mutateRow(other, Buffer.from('k'), [set('a', 'x', '1', 1000n)], options());
      }
    })();
    await feed.until(() => feed.events.length >= 3, 15_000);
    writing = false;
    await writes;
    const elapsed = Date.now() - started;
    expect(feed.changes).to.deep.equal([]);
    expect(elapsed, 'ms for two progress events').to.be.lessThan(2 * FEED_PROGRESS_MS + 1000);
  });

  it('ends the feed of a deleted table with NOT_FOUND; one of the table created again sees only its changes', async () => {
    const old = follow({ type: 'now' });
    await old.until(() => old.events.length > 0);
    await store.mutateRow(ref, Buffer.from('old'), [set('a', 'x', 'old', 1000n)], options());
    await store.deleteTable(ref, options());
    await store.createTable(ref, [{ name: 'a' }], options());
    await store.mutateRow(ref, Buffer.from('new'), [set('a', 'x', 'new', 1000n)], options());
    await old.until(() => old.error !== undefined);
    expect(isStoreError(old.error, 'NOT_FOUND')).to.equal(true);
    expect(old.changes.map((event) => event.change.key.toString())).to.deep.equal(['old']);

    const fresh = follow({ type: 'after', position: (old.events[0] as ChangeEvent).position });
    await fresh.until(() => fresh.changes.length >= 1);
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(fresh.changes.map((event) => event.change.key.toString())).to.deep.equal(['new']);
  });

  it('resumes after a position across a restart of the store', async () => {
    const feed = follow({ type: 'now' });
    await feed.until(() => feed.events.length > 0);
    await store.mutateRow(ref, Buffer.from('one'), [set('a', 'x', '1', 1000n)], options());
    await feed.until(() => feed.changes.length >= 1);
    const position = (feed.changes[0] as ChangeEvent).position;
    await store.mutateRow(ref, Buffer.from('two'), [set('a', 'x', '2', 1000n)], options());
    await Promise.all(feeds.splice(0).map((each) => each.stop()));
    await store.close();
    store = await EmbeddedStore.open({ dataDir });
    await store.mutateRow(ref, Buffer.from('three'), [set('a', 'x', '3', 1000n)], options());
    const resumed = follow({ type: 'after', position });
    await resumed.until(() => resumed.changes.length >= 2);
    expect(resumed.changes.map((event) => event.change.key.toString())).to.deep.equal(['two', 'three']);
  });

  it('trims changes past the retention, oldest first, a step at a time; a position before them is then OUT_OF_RANGE', async () => {
    const feed = follow({ type: 'now' });
    await feed.until(() => feed.events.length > 0);
    const start = (feed.events[0] as ChangeEvent).position;
    for (let i = 0; i < 5; i++) await store.mutateRow(ref, Buffer.from(`k${i}`), [set('a', 'x', String(i), 1000n)], options());
    await feed.until(() => feed.changes.length >= 5);
    const third = (feed.changes[2] as ChangeEvent).position;
    await Promise.all(feeds.splice(0).map((each) => each.stop()));
    await store.close();

    const db = new DatabaseSync(join(dataDir, DATABASE_FILE));
    try {
      const writer = new Writer(db);
      const later = BigInt(Date.now()) * 1000n + 10_000_000n;
      // A retention of 5 s, 10 s on: every change is past it; two per step.
      expect(writer.trimChanges(2, later, 5)).to.equal(true);
      expect(writer.trimChanges(1, later, 5)).to.equal(true);
      expect(db.prepare('SELECT count(*) AS n FROM changes').get()).to.deep.equal({ n: 2 });
      expect(db.prepare('SELECT through FROM change_trim').get()).to.deep.equal({ through: 3 });
      // Within the retention: nothing to trim.
      expect(writer.trimChanges(100, BigInt(Date.now()) * 1000n, 5)).to.equal(false);
    } finally {
      db.close();
    }

    store = await EmbeddedStore.open({ dataDir });
    const expired = follow({ type: 'after', position: start });
    await expired.until(() => expired.error !== undefined);
    expect(isStoreError(expired.error, 'OUT_OF_RANGE')).to.equal(true);
    const kept = follow({ type: 'after', position: third });
    await kept.until(() => kept.changes.length >= 2);
    expect(kept.changes.map((event) => event.change.key.toString())).to.deep.equal(['k3', 'k4']);
  });

  it('yields a tall change whole, and more changes than one read answers, in order', async () => {
    const feed = follow({ type: 'now' });
    await feed.until(() => feed.events.length > 0);
    const tall = Buffer.alloc(3 * 1024 * 1024, 0xab);
    tall[tall.length - 1] = 0x01;
    await store.mutateRow(ref, Buffer.from('tall'), [{ type: 'set', family: 'a', column: Buffer.from('big'), value: tall, timestampMicros: 1000n }], options());
    const entries = Array.from({ length: 600 }, (_, i) => ({ key: Buffer.from(`r${String(i).padStart(3, '0')}`), mutations: [set('b', 'n', String(i), 1000n)] }));
    await store.mutateRows(ref, entries, options());
    await feed.until(() => feed.changes.length >= 601);
    const [first, ...rest] = feed.changes;
    const mutation = first?.change.mutations[0];
    expect(mutation?.type === 'set' && Buffer.compare(mutation.value, tall)).to.equal(0);
    expect(rest.map((event) => event.change.key.toString())).to.deep.equal(entries.map((entry) => entry.key.toString()));
  });

  it('refuses a position beyond any change it recorded, and one of another format', async () => {
    for (const position of ['e1.999999', 'e1.01', '5', 'e2.1']) {
      const feed = follow({ type: 'after', position });
      await feed.until(() => feed.error !== undefined);
      expect(isStoreError(feed.error, 'INVALID_ARGUMENT'), position).to.equal(true);
    }
  });
});
