import { expect } from 'chai';
import { pino } from 'pino';
import { isStoreError } from '../../../src/store/errors.ts';
import { RedisStore } from '../../../src/store/redis/redis-store.ts';
import type { CallOptions, ChangeEvent, ChangeStart, Mutation, TableRef } from '../../../src/store/store.ts';
import { type RedisServer, requireRedis, spawnRedis } from '../../support/redis-server.ts';

const silent = pino({ level: 'silent' });
const call = (): CallOptions => ({ deadline: Date.now() + 5000 });
const b = (text: string) => Buffer.from(text);
const set = (family: string, column: string, value: string | Buffer, timestampMicros: bigint): Mutation => ({
  type: 'set',
  family,
  column: b(column),
  value: typeof value === 'string' ? b(value) : value,
  timestampMicros,
});

const following: Array<{ stop(): Promise<void> }> = [];

/** A feed read in the background until stopped (at the latest after the test), its events as they come. */
function follow(store: RedisStore, ref: TableRef, start: ChangeStart) {
  const abort = new AbortController();
  const events: ChangeEvent[] = [];
  let error: unknown;
  const done = (async () => {
    try {
      for await (const event of store.readChanges(ref, start, { signal: abort.signal })) events.push(event);
    } catch (caught) {
      error = caught;
    }
  })();
  const waitFor = async (ready: () => boolean, what: string) => {
    const until = Date.now() + 20_000;
    while (!ready()) {
      if (Date.now() > until) throw new Error(`timed out waiting for ${what}: ${events.length} events, ${String(error)}`);
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  };
  const feed = {
    events,
    get error() {
      return error;
    },
    changes: () => events.flatMap((event) => (event.type === 'change' ? [event] : [])),
    started: () => waitFor(() => events.length > 0 || error !== undefined, 'the first event'),
    until: (count: number) => waitFor(() => events.filter((event) => event.type === 'change').length >= count || error !== undefined, `${count} changes`),
    ended: async () => {
      await waitFor(() => error !== undefined, 'the end of the feed');
      return error;
    },
    stop: async () => {
      abort.abort();
      await done;
    },
  };
  following.push(feed);
  return feed;
}

/** Connections Redis has from clients, as CLIENT LIST counts them (redis-cli's own among them). */
async function clients(server: RedisServer): Promise<number> {
  return (await server.cli('--raw', 'CLIENT', 'LIST')).trim().split('\n').length;
}

describe('redis store: change feed', () => {
  let server: RedisServer;
  let store: RedisStore;
  const t = { instance: 'inst', table: 't' };

  before(async function () {
    requireRedis(this);
    // One entry per stream node, so that MINID ~ trims entry by entry and a trim can be seen.
    server = await spawnRedis({ args: ['--stream-node-max-entries', '1'] });
    store = RedisStore.open({ url: server.url, instances: ['inst'], logger: silent, feedConnections: 1 });
  });
  after(async () => {
    await store?.close();
    await server?.stop();
  });
  afterEach(async () => {
    await Promise.all(following.splice(0).map((feed) => feed.stop()));
  });
  beforeEach(async () => {
    await server.cli('FLUSHALL');
    await store.createTable(t, [{ name: 'cf' }], call());
  });

  const generation = async () => (await server.cli('--raw', 'HGET', 'kvcrud:{inst/t}:table', 'generation')).trim();

  it('redis-cli XRANGE shows a change written through the store: the row key and the packed mutations, under an ID of Redis\'s clock', async () => {
    const feed = follow(store, t, { type: 'now' });
    await feed.started();
    const before = Date.now();
    await store.mutateRow(t, b('user#1'), [set('cf', 'name', 'Ada', 42n)], call());
    await feed.until(1);
    await feed.stop();
    const gen = await generation();
    const stream = `kvcrud:{inst/t}:${gen}:changes`;
    expect(await server.cli('TYPE', stream)).to.equal('stream\n');
    const shown = await server.cli('XRANGE', stream, '-', '+');
    const match = /^1\) 1\) "(\d+)-(\d+)"\n {3}2\) 1\) "key"\n {6}2\) "user#1"\n {6}3\) "mutations"\n {6}4\) "(.*)"\n$/.exec(shown);
    expect(match, shown).to.not.equal(null);
    const [, ms, seq, mutations] = match as RegExpExecArray;
    // op "s", family (2-byte length), column (4), timestamp (1), value (4), as redis-cli escapes them.
    expect(mutations).to.equal('s\\x00\\x02cf\\x00\\x00\\x00\\x04name\\x0242\\x00\\x00\\x00\\x03Ada');
    expect(Number(ms)).to.be.within(before - 1000, Date.now() + 1000);
    const change = feed.changes()[0] as Extract<ChangeEvent, { type: 'change' }>;
    expect(change.position).to.equal(`r1.${gen}.${ms}-${seq}`);
    expect(change.change.commitMicros).to.equal(BigInt(ms as string) * 1000n);
    expect(change.change.mutations).to.deep.equal([set('cf', 'name', 'Ada', 42n)]);
  });

  it('ends the old feed with NOT_FOUND when the table is recreated, and a new feed sees only the new table\'s changes', async function () {
    this.timeout(30_000);
    const old = follow(store, t, { type: 'now' });
    await old.started();
    await store.mutateRow(t, b('k'), [set('cf', 'c', 'old', 1n)], call());
    await old.until(1);
    const position = (old.changes()[0] as ChangeEvent).position;
    await store.deleteTable(t, call());
    await store.createTable(t, [{ name: 'cf' }], call());
    await store.mutateRow(t, b('k'), [set('cf', 'c', 'new', 1n)], call());
    const ended = await old.ended();
    expect(isStoreError(ended, 'NOT_FOUND') && ended.resource === 'table').to.equal(true);
    expect(old.changes().map((event) => event.change.mutations)).to.deep.equal([[set('cf', 'c', 'old', 1n)]]);

    const fresh = follow(store, t, { type: 'since', sinceMicros: BigInt(Date.now() - 60_000) * 1000n });
    await fresh.until(1);
    expect(fresh.changes().map((event) => event.change.mutations)).to.deep.equal([[set('cf', 'c', 'new', 1n)]]);
    await fresh.stop();

    // The old table's stream goes with its rows; resuming its feed is NOT_FOUND.
    await store.reclaimed();
    expect(await server.cli('--raw', '--scan', '--pattern', `kvcrud:{inst/t}:*:changes`)).to.equal(`kvcrud:{inst/t}:${await generation()}:changes\n`);
    const resumed = follow(store, t, { type: 'after', position });
    const error = await resumed.ended();
    expect(isStoreError(error, 'NOT_FOUND') && error.resource === 'table').to.equal(true);
  });

  it('trims changes older than the retention as it writes, and a start before a trimmed change is OUT_OF_RANGE', async function () {
    this.timeout(30_000);
    const gen = await generation();
    const stream = `kvcrud:{inst/t}:${gen}:changes`;
    // A change from long ago, in the store's own format, as if the retention had passed since.
    await server.cli('XADD', stream, '1000-0', 'key', 'ancient', 'mutations', 'none');
    const fromStart = follow(store, t, { type: 'after', position: `r1.${gen}.0-0` });
    expect(isStoreError(await fromStart.ended(), 'OUT_OF_RANGE')).to.equal(true);
    await store.mutateRow(t, b('k'), [set('cf', 'c', 'v', 1n)], call());
    expect((await server.cli('--raw', 'XLEN', stream)).trim()).to.equal('1');
    const again = follow(store, t, { type: 'after', position: `r1.${gen}.0-0` });
    expect(isStoreError(await again.ended(), 'OUT_OF_RANGE')).to.equal(true);
  });

  it('moves an idle feed\'s position up with Redis\'s clock, and resumes after it with what came later', async function () {
    this.timeout(30_000);
    await store.mutateRow(t, b('k'), [set('cf', 'c', 'before', 1n)], call());
    const feed = follow(store, t, { type: 'now' });
    await feed.started();
    const first = (feed.events[0] as ChangeEvent).position;
    // The position trails Redis's clock by a few seconds: wait until it has passed the last change.
    const until = Date.now() + 15_000;
    while ((feed.events.at(-1) as ChangeEvent).position === first && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 50));
    await feed.stop();
    const idle = (feed.events.at(-1) as ChangeEvent).position;
    const ms = (position: string) => Number(/\.(\d+)-\d+$/.exec(position)?.[1]);
    expect(ms(idle), `${idle} after ${first}`).to.be.above(ms(first));
    expect(ms(idle)).to.be.within(Date.now() - 10_000, Date.now());
    await store.mutateRow(t, b('k'), [set('cf', 'c', 'after', 2n)], call());
    const resumed = follow(store, t, { type: 'after', position: idle });
    await resumed.until(1);
    await resumed.stop();
    expect(resumed.changes().map((event) => event.change.mutations)).to.deep.equal([[set('cf', 'c', 'after', 2n)]]);
  });

  it('refuses a well-formed position past the end of the table\'s changes', async () => {
    const gen = await generation();
    await store.mutateRow(t, b('k'), [set('cf', 'c', 'v', 1n)], call());
    // Later than Redis's clock: no feed ever stood there.
    const feed = follow(store, t, { type: 'after', position: `r1.${gen}.${Date.now() + 3_600_000}-0` });
    expect(isStoreError(await feed.ended(), 'INVALID_ARGUMENT')).to.equal(true);
  });

  it('blocks on a connection of its own up to the cap; feeds beyond it poll the shared one; both are released when they stop', async function () {
    this.timeout(30_000);
    const idle = await clients(server);
    const first = follow(store, t, { type: 'now' });
    const second = follow(store, t, { type: 'now' });
    await first.started();
    await second.started();
    // The cap is 1 here: one more connection, whichever feed holds it.
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(await clients(server), 'connections while two feeds are open').to.equal(idle + 1);
    for (let i = 0; i < 5; i += 1) await store.mutateRow(t, b(`k${i}`), [set('cf', 'c', String(i), 1n)], call());
    await first.until(5);
    await second.until(5);
    expect(second.changes().map((event) => event.position)).to.deep.equal(first.changes().map((event) => event.position));
    const stopping = Date.now();
    await Promise.all([first.stop(), second.stop()]);
    expect(Date.now() - stopping, 'ms to stop').to.be.below(1000);
    expect(first.error).to.equal(undefined);
    expect(second.error).to.equal(undefined);
    const until = Date.now() + 5000;
    while ((await clients(server)) !== idle && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 50));
    expect(await clients(server), 'connections once both stopped').to.equal(idle);
  });

  it('releases its connection when the reader breaks out of the loop', async function () {
    this.timeout(30_000);
    const idle = await clients(server);
    const abort = new AbortController();
    for await (const event of store.readChanges(t, { type: 'now' }, { signal: abort.signal })) {
      if (event.type === 'progress') {
        await store.mutateRow(t, b('k'), [set('cf', 'c', 'v', 1n)], call());
        continue;
      }
      expect(await clients(server), 'connections while the feed is open').to.equal(idle + 1);
      break;
    }
    const until = Date.now() + 5000;
    while ((await clients(server)) !== idle && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 20));
    expect(await clients(server), 'connections once the loop is left').to.equal(idle);
  });

  it('resumes in another process on the same Redis, from a position the first one yielded', async function () {
    this.timeout(30_000);
    const feed = follow(store, t, { type: 'now' });
    await feed.started();
    await store.mutateRow(t, b('k'), [set('cf', 'c', 'one', 1n)], call());
    await feed.until(1);
    await feed.stop();
    const position = (feed.changes()[0] as ChangeEvent).position;
    await store.mutateRow(t, b('k'), [set('cf', 'c', 'two', 2n)], call());
    const other = RedisStore.open({ url: server.url, instances: ['inst'], logger: silent });
    try {
      const resumed = follow(other, t, { type: 'after', position });
      await resumed.until(1);
      await resumed.stop();
      expect(resumed.changes().map((event) => event.change.mutations)).to.deep.equal([[set('cf', 'c', 'two', 2n)]]);
    } finally {
      await other.close();
    }
  });

  it('ends with UNAVAILABLE, promptly, when Redis goes away under a waiting feed', async function () {
    this.timeout(30_000);
    const feed = follow(store, t, { type: 'now' });
    await feed.started();
    const crashed = Date.now();
    await server.crash();
    try {
      const error = await feed.ended();
      expect(isStoreError(error, 'UNAVAILABLE'), String(error)).to.equal(true);
      expect(Date.now() - crashed, 'ms to end').to.be.below(5000);
    } finally {
      await server.restartEmpty();
    }
  });
});
