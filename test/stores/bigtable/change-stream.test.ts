import { randomBytes } from 'node:crypto';
import { Bigtable, admin as bigtableAdmin, v2 } from '@google-cloud/bigtable';
import { expect } from 'chai';
import { BigtableStore } from '../../../src/store/bigtable/bigtable-store.ts';
import type { BigtableStub } from '../../../src/store/bigtable/calls.ts';
import { readChangeFeed } from '../../../src/store/bigtable/change-feed.ts';
import { decodePosition, encodePosition, tableHash } from '../../../src/store/bigtable/change-positions.ts';
import { BIGTABLE_CAPABILITIES, BIGTABLE_LIMITS } from '../../../src/store/bigtable/limits.ts';
import { StoreError } from '../../../src/store/errors.ts';
import { type ChangeEvent, type ChangeStart, FEED_POSITION_CHARS, FEED_PROGRESS_MS, type Mutation } from '../../../src/store/store.ts';
import { ChangeStreamStandIn, type WriteOptions, nowMicros } from '../../support/change-stream-stand-in.ts';

const PROJECT = 'feed-project';
const INSTANCE = 'feed-instance';

const set = (column: string, value: string | Buffer, micros = 1000n): Mutation => ({
  type: 'set',
  family: 'f',
  column: Buffer.from(column),
  value: Buffer.isBuffer(value) ? value : Buffer.from(value),
  timestampMicros: micros,
});

function show(event: ChangeEvent): string {
  if (event.type === 'progress') return 'progress';
  const mutations = event.change.mutations.map((mutation) => {
    switch (mutation.type) {
      case 'set':
        return `set ${mutation.family}:${mutation.column.toString('latin1')}@${mutation.timestampMicros}=${mutation.value.length > 16 ? `${mutation.value.length} bytes` : mutation.value.toString('latin1')}`;
      case 'deleteColumn':
        return `deleteColumn ${mutation.family}:${mutation.column.toString('latin1')}`;
      case 'deleteFamily':
        return `deleteFamily ${mutation.family}`;
      case 'deleteRow':
        return 'deleteRow';
    }
  });
  return `${event.change.key.toString('latin1')}: ${mutations.join('; ')}`;
}

/** A feed read in the background, as the service would read it. */
class Follower {
  readonly events: ChangeEvent[] = [];
  error: unknown;
  readonly #abort = new AbortController();
  readonly #done: Promise<void>;

  constructor(stub: Promise<BigtableStub>, table: string, start: ChangeStart) {
    const feed = readChangeFeed({ stub, tableName: tableName(table), table, start, signal: this.#abort.signal, retentionSeconds: BIGTABLE_LIMITS.changeRetentionSeconds });
    this.#done = (async () => {
      try {
        for await (const event of feed) this.events.push(event);
      } catch (error) {
        this.error = error;
      }
    })();
  }

  get changes(): string[] {
    return this.events.filter((event) => event.type === 'change').map(show);
  }

  /** The position of the last event. */
  get position(): string {
    return (this.events.at(-1) as ChangeEvent).position;
  }

  async until(ready: () => boolean, what: string, ms = 10_000): Promise<void> {
    const started = Date.now();
    while (!ready()) {
      if (this.error !== undefined) throw this.error;
      if (Date.now() - started > ms) throw new Error(`waited ${ms} ms for ${what}; got ${JSON.stringify(this.changes)}`);
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  }

  async started(): Promise<string> {
    await this.until(() => this.events.length > 0, 'the first event');
    expect((this.events[0] as ChangeEvent).type).to.equal('progress');
    return (this.events[0] as ChangeEvent).position;
  }

  async changed(count: number): Promise<string[]> {
    await this.until(() => this.changes.length >= count, `${count} changes`);
    return this.changes;
  }

  async ended(ms = 10_000): Promise<unknown> {
    await this.until(() => this.error !== undefined || false, 'the end of the feed', ms).catch((error: unknown) => {
      if (error !== this.error) throw error;
    });
    return this.error;
  }

  async stop(): Promise<void> {
    this.#abort.abort();
    await this.#done;
  }
}

function tableName(table: string): string {
  return `projects/${PROJECT}/instances/${INSTANCE}/tables/${table}`;
}

function expectCode(error: unknown, code: string, name?: string): void {
  expect(error, `a StoreError ${code}`).to.be.instanceOf(StoreError);
  expect((error as StoreError).code).to.equal(code);
  if (name !== undefined) expect((error as StoreError).resourceName).to.equal(name);
}

/**
 * The Bigtable store's change feed reader against a stand-in for Bigtable's change stream RPCs
 * (test/support/change-stream-stand-in.ts), which the emulator does not serve: partitions,
 * continuation tokens, heartbeats, chunked changes, CloseStream on a split or a merge, broken
 * streams and a table deleted. Not checked against live Bigtable.
 */
describe('Bigtable store: the change feed on a table\'s change stream (against a stand-in)', () => {
  let standIn: ChangeStreamStandIn;
  let client: v2.BigtableClient;
  let stub: Promise<BigtableStub>;
  const followers: Follower[] = [];
  let tables = 0;
  let table: string;
  const follow = (start: ChangeStart, name = table) => {
    const follower = new Follower(stub, name, start);
    followers.push(follower);
    return follower;
  };
  const write = (key: string, mutations: Mutation[], options: WriteOptions = {}) => standIn.write(tableName(table), Buffer.from(key), mutations, options);

  before(async () => {
    standIn = await ChangeStreamStandIn.start();
    // The client's own settings for an endpoint without credentials, as the store makes them.
    const settings = new Bigtable({ projectId: PROJECT, apiEndpoint: `127.0.0.1:${standIn.port}`, universeDomain: 'googleapis.com', metricsEnabled: false }).options;
    client = new v2.BigtableClient(settings.BigtableClient);
    stub = client.initialize() as unknown as Promise<BigtableStub>;
  });
  after(async () => {
    await client?.close();
    await standIn?.close();
  });
  beforeEach(() => {
    tables += 1;
    table = `t${tables}`;
    standIn.createTable(tableName(table), [Buffer.from('m')]);
  });
  afterEach(async () => {
    await Promise.all(followers.splice(0).map((follower) => follower.stop()));
  });

  it('yields the changes of every partition after the start, as applied, starting with a progress event', async () => {
    write('before', [set('x', 'old')]);
    const feed = follow({ type: 'now' });
    await feed.started();
    write('a', [set('x', 'v1', 2000n), set('y', Buffer.from([0, 0xff]))]);
    write('z', [{ type: 'deleteColumn', family: 'f', column: Buffer.from('x') }, { type: 'deleteFamily', family: 'g' }]);
    write('a', [{ type: 'deleteRow' }]);
    // Across partitions in the order their streams deliver; a row's changes in commit order.
    await feed.changed(3);
    expect(feed.changes.filter((change) => change.startsWith('a:'))).to.deep.equal(['a: set f:x@2000=v1; set f:y@1000=\x00\xff', 'a: deleteRow']);
    expect(feed.changes.filter((change) => change.startsWith('z:'))).to.deep.equal(['z: deleteColumn f:x; deleteFamily g']);
    const change = feed.events.find((event) => event.type === 'change');
    expect(change?.type === 'change' && change.change.commitMicros > 0n, 'a commit time').to.equal(true);
    for (const event of feed.events) expect(event.position).to.match(new RegExp(`^[\\x20-\\x7e]{1,${FEED_POSITION_CHARS}}$`));
  });

  it('leaves out garbage collection and the removal of expired versions, which change nothing a reader sees', async () => {
    const feed = follow({ type: 'now' });
    await feed.started();
    write('a', [{ type: 'deleteColumn', family: 'f', column: Buffer.from('x') }], { type: 'GARBAGE_COLLECTION' });
    // What readModifyWriteRow sends first to drop versions past a family's maxAge.
    standIn.write(tableName(table), Buffer.from('a'), [{ deleteFromColumn: { familyName: 'f', columnQualifier: Buffer.from('x'), timeRange: { startTimestampMicros: '0', endTimestampMicros: '5000' } } }]);
    write('b', [set('x', 'after')]);
    expect(await feed.changed(1)).to.deep.equal(['b: set f:x@1000=after']);
  });

  it('joins a change sent in several messages, its values in chunks', async () => {
    const feed = follow({ type: 'now' });
    await feed.started();
    const large = Buffer.alloc(10_000, 7);
    large.write('start', 0);
    write('a', [set('small', 's'), set('large', large), { type: 'deleteFamily', family: 'g' }, set('second', Buffer.alloc(2500, 1))], { chunkBytes: 1024 });
    await feed.changed(1);
    const event = feed.events.find((candidate) => candidate.type === 'change');
    if (event?.type !== 'change') throw new Error('no change');
    expect(show(event)).to.equal('a: set f:small@1000=s; set f:large@1000=10000 bytes; deleteFamily g; set f:second@1000=2500 bytes');
    const [, values, , second] = event.change.mutations;
    expect(values?.type === 'set' && values.value.equals(large), 'the large value, whole').to.equal(true);
    expect(second?.type === 'set' && second.value.equals(Buffer.alloc(2500, 1)), 'the second value, whole').to.equal(true);
  });

  it('resumes after any position it yielded: nothing missed, nothing before it again', async () => {
    const feed = follow({ type: 'now' });
    const start = await feed.started();
    const keys = ['a1', 'z1', 'a2', 'z2', 'a3', 'z3'];
    for (const key of keys) write(key, [set('x', key)]);
    await feed.changed(keys.length);
    const all = feed.changes;
    const positions = [start, ...feed.events.filter((event) => event.type === 'change').map((event) => event.position)];
    for (const [index, position] of positions.entries()) {
      const resumed = follow({ type: 'after', position });
      await resumed.started();
      if (index < keys.length) await resumed.changed(keys.length - index);
      await new Promise((resolve) => setTimeout(resolve, 100));
      expect(resumed.changes.sort(), `after position ${index}`).to.deep.equal(all.slice(index).sort());
      await resumed.stop();
    }
  });

  it('starts at a time within the retention with `since`, including changes committed at or after it', async () => {
    write('a', [set('x', 'before')]);
    await new Promise((resolve) => setTimeout(resolve, 5));
    const since = nowMicros();
    await new Promise((resolve) => setTimeout(resolve, 5));
    write('z', [set('x', 'after')]);
    const feed = follow({ type: 'since', sinceMicros: since });
    expect(await feed.changed(1)).to.deep.equal(['z: set f:x@1000=after']);
  });

  it('yields progress from heartbeats while idle, positions that resume there, and stops promptly, cancelling its streams', async function () {
    this.timeout(20_000);
    const feed = follow({ type: 'now' });
    await feed.started();
    await feed.until(() => feed.events.length >= 3, 'progress while idle', FEED_PROGRESS_MS * 3);
    const times = feed.events.map(() => Date.now());
    expect(times.length).to.be.greaterThanOrEqual(3);
    const idlePosition = feed.position;
    write('a', [set('x', 'later')]);
    const resumed = follow({ type: 'after', position: idlePosition });
    expect(await resumed.changed(1)).to.deep.equal(['a: set f:x@1000=later']);
    const cancelled = standIn.cancelled;
    const stopping = Date.now();
    await feed.stop();
    expect(Date.now() - stopping, 'ms to stop').to.be.lessThan(1000);
    expect(feed.error).to.equal(undefined);
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(standIn.cancelled - cancelled, 'streams cancelled: one per partition').to.equal(2);
  });

  it('reads both halves of a split partition on from the tokens its CloseStream gave, and resumes across the split', async () => {
    const feed = follow({ type: 'now' });
    await feed.started();
    write('c', [set('x', 'before split')]);
    await feed.changed(1);
    const beforeSplit = feed.position;
    write('d', [set('x', 'closing')]);
    standIn.split(tableName(table), Buffer.from('f'));
    write('c', [set('x', 'left half')]);
    write('g', [set('x', 'right half')]);
    write('z', [set('x', 'untouched')]);
    await feed.changed(5);
    // The closing partition's changes come before those of the halves that follow it.
    const split = feed.changes.filter((change) => !change.startsWith('z:'));
    expect(split.slice(0, 2)).to.deep.equal(['c: set f:x@1000=before split', 'd: set f:x@1000=closing']);
    expect(split.slice(2).sort()).to.deep.equal(['c: set f:x@1000=left half', 'g: set f:x@1000=right half']);
    expect(feed.changes).to.include('z: set f:x@1000=untouched');
    expect(standIn.reads.filter((read) => read.endsWith('from tokens')).sort()).to.include.members(['..f from tokens', 'f..m from tokens']);

    const resumed = follow({ type: 'after', position: beforeSplit });
    await resumed.changed(4);
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(resumed.changes.sort()).to.deep.equal(feed.changes.slice(1).sort());
  });

  it('reads a merged partition once the tokens of both partitions merged into it have come, each change once', async () => {
    const feed = follow({ type: 'now' });
    await feed.started();
    write('a', [set('x', 'left')]);
    write('z', [set('x', 'right')]);
    await feed.changed(2);
    standIn.merge(tableName(table), Buffer.from('m'));
    write('b', [set('x', 'merged left')]);
    write('y', [set('x', 'merged right')]);
    await feed.changed(4);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(feed.changes.slice(2).sort()).to.deep.equal(['b: set f:x@1000=merged left', 'y: set f:x@1000=merged right']);
    expect(standIn.reads.filter((read) => read === '.. from tokens')).to.have.length(1);
    const resumed = follow({ type: 'after', position: feed.position });
    await resumed.started();
    write('c', [set('x', 'after resuming')]);
    expect(await resumed.changed(1)).to.deep.equal(['c: set f:x@1000=after resuming']);
  });

  it('reads a broken stream again from its last token: nothing missed, nothing twice', async () => {
    const feed = follow({ type: 'now' });
    await feed.started();
    write('a', [set('x', '1')]);
    await feed.changed(1);
    standIn.breakStreams(tableName(table));
    write('a', [set('x', '2')]);
    write('z', [set('x', '3')]);
    await feed.changed(3);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(feed.changes).to.have.members(['a: set f:x@1000=1', 'a: set f:x@1000=2', 'z: set f:x@1000=3']);
    expect(feed.changes).to.have.length(3);
    expect(feed.error).to.equal(undefined);
  });

  it('fails with NOT_FOUND table for a missing table, and ends with it when the table is deleted (DeleteTable), after its last changes', async () => {
    const missing = follow({ type: 'now' }, 'no-such-table');
    expectCode(await missing.ended(), 'NOT_FOUND', 'no-such-table');

    const feed = follow({ type: 'now' });
    await feed.started();
    write('last', [set('x', 'v')]);
    await feed.changed(1);
    const settings = new Bigtable({ projectId: PROJECT, apiEndpoint: `127.0.0.1:${standIn.port}`, universeDomain: 'googleapis.com', metricsEnabled: false }).options;
    const admin = new bigtableAdmin.v2.BigtableTableAdminClient(settings.BigtableTableAdminClient);
    try {
      await admin.deleteTable({ name: tableName(table) });
    } finally {
      await admin.close();
    }
    expectCode(await feed.ended(), 'NOT_FOUND', table);
    expect(feed.changes).to.deep.equal(['last: set f:x@1000=v']);

    // The same name again: a new feed sees only the new table's changes; an old position is not its.
    const old = feed.position;
    standIn.createTable(tableName(table));
    const fresh = follow({ type: 'now' });
    await fresh.started();
    write('new', [set('x', 'new')]);
    expect(await fresh.changed(1)).to.deep.equal(['new: set f:x@1000=new']);
    expectCode(await follow({ type: 'after', position: old }).ended(), 'INVALID_ARGUMENT');
  });

  it('fails with OUT_OF_RANGE for a start older than the retention, and INVALID_ARGUMENT for a position it never made', async () => {
    const since = BigInt(Date.now() - (BIGTABLE_LIMITS.changeRetentionSeconds + 3600) * 1000) * 1000n;
    expectCode(await follow({ type: 'since', sinceMicros: since }).ended(), 'OUT_OF_RANGE');
    expectCode(await follow({ type: 'after', position: 'not-a-position-of-this-store~' }).ended(), 'INVALID_ARGUMENT');
    expectCode(await follow({ type: 'after', position: 'b1.e30' }).ended(), 'INVALID_ARGUMENT');

    // A position made by the store, of the right table, whose partitions were last heard of too long ago.
    const stale = encodePosition({ h: tableHash(tableName(table)), u: [{ s: '', e: '', since: '1000', m: '1000' }], w: [] });
    expectCode(await follow({ type: 'after', position: stale }).ended(), 'OUT_OF_RANGE');

    const feed = follow({ type: 'now' });
    const position = await feed.started();
    standIn.createTable(tableName('other'));
    expectCode(await follow({ type: 'after', position }, 'other').ended(), 'INVALID_ARGUMENT');
  });

  it('writes the tokens of 30 partitions (100 characters each) within FEED_POSITION_CHARS, and fails INTERNAL rather than make a longer position', () => {
    const state = (partitions: number) => ({
      h: tableHash(tableName(table)),
      u: Array.from({ length: partitions }, (_, index) => {
        const s = Buffer.from(`user${String(index * 1000).padStart(8, '0')}`).toString('base64url');
        const e = Buffer.from(`user${String(index * 1000 + 1000).padStart(8, '0')}`).toString('base64url');
        return { s, e, k: [{ s, e, t: randomBytes(75).toString('base64') }], m: String(nowMicros()) };
      }),
      w: [],
    });
    const position = encodePosition(state(30));
    expect(position.length).to.be.at.most(FEED_POSITION_CHARS);
    expect(decodePosition(position, tableHash(tableName(table))).u).to.have.length(30);
    expect(() => encodePosition(state(60))).to.throw(StoreError).with.property('code', 'INTERNAL');
  });

  it('fails with UNIMPLEMENTED changeFeed for a table created without a change stream', async () => {
    standIn.createTable(tableName('plain'), [], { changeStream: false });
    const error = await follow({ type: 'now' }, 'plain').ended();
    expectCode(error, 'UNIMPLEMENTED');
    expect((error as StoreError).capability).to.equal('changeFeed');
  });

  it('publishes changeFeed on Bigtable, and not on the emulator, where readChanges fails UNIMPLEMENTED', async () => {
    const emulated = new BigtableStore({ projectId: PROJECT, instanceIds: [INSTANCE], emulatorHost: '127.0.0.1:1' });
    try {
      expect(BIGTABLE_CAPABILITIES.changeFeed).to.equal(true);
      expect(emulated.capabilities.changeFeed).to.equal(false);
      const iterator = emulated.readChanges({ instance: INSTANCE, table: 't' }, { type: 'now' }, { signal: new AbortController().signal })[Symbol.asyncIterator]();
      expectCode(await iterator.next().catch((error: unknown) => error), 'UNIMPLEMENTED');
    } finally {
      await emulated.close();
    }
  });
});
