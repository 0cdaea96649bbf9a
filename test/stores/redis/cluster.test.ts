import { expect } from 'chai';
import { pino } from 'pino';
import { isStoreError } from '../../../src/store/errors.ts';
import { openConnection } from '../../../src/store/redis/connection.ts';
import { toStoreError } from '../../../src/store/redis/redis-errors.ts';
import { RedisStore } from '../../../src/store/redis/redis-store.ts';
import type { CallOptions, Mutation, Row } from '../../../src/store/store.ts';
import { closedPort } from '../../support/fake-backends.ts';
import { type RedisCluster, redisCli, requireRedis, spawnRedisCluster } from '../../support/redis-server.ts';

const silent = pino({ level: 'silent' });
const call = (): CallOptions => ({ deadline: Date.now() + 10_000 });
const b = (text: string) => Buffer.from(text);
const set = (family: string, column: string, value: string): Mutation => ({ type: 'set', family, column: b(column), value: b(value), timestampMicros: 1n });

describe('redis store on a Redis Cluster (3 primaries)', () => {
  let cluster: RedisCluster;
  let store: RedisStore;
  const tables = Array.from({ length: 12 }, (_, i) => ({ instance: i % 2 === 0 ? 'even' : 'odd', table: `t${i}` }));

  before(async function () {
    this.timeout(60_000);
    requireRedis(this);
    cluster = await spawnRedisCluster(3);
    store = RedisStore.open({ url: cluster.url, cluster: true, instances: ['even', 'odd'], logger: silent });
  });
  after(async () => {
    await store?.close();
    await cluster?.stop();
  });

  /** Which node serves `key`'s slot, by its port. */
  const owner = async (key: string): Promise<number> => (await cluster.nodeFor(key)).port;
  /** A table's live generation, as its record holds it. */
  async function generation(ref: { instance: string; table: string }): Promise<string> {
    const record = `kvcrud:{${ref.instance}/${ref.table}}:table`;
    return (await redisCli(await owner(record), ['--raw', 'HGET', record, 'generation'])).trim();
  }

  it('serves tables spread over the primaries: writes, reads, batches and scans in both directions', async function () {
    this.timeout(60_000);
    for (const ref of tables) {
      await store.createTable(ref, [{ name: 'cf' }, { name: 'other' }], call());
      const results = await store.mutateRows(
        ref,
        Array.from({ length: 50 }, (_, i) => ({ key: b(`k${String(i).padStart(3, '0')}`), mutations: [set('cf', 'c', `${ref.table}-${i}`)] })),
        call(),
      );
      expect(results.every((result) => result === undefined)).to.equal(true);
    }
    for (const ref of tables) {
      const rows = await store.readRows(ref, [b('k007'), b('nope'), b('k049')], { versions: 1 }, call());
      expect(rows.map((row) => row?.cells[0]?.value.toString() ?? null)).to.deep.equal([`${ref.table}-7`, null, `${ref.table}-49`]);
      const scanned: Row[] = [];
      for await (const row of store.scanRows(ref, { range: { start: b('k010'), end: b('k020') }, reverse: true, limit: 3, versions: 1 }, call())) scanned.push(row);
      expect(scanned.map((row) => row.key.toString())).to.deep.equal(['k019', 'k018', 'k017']);
    }
    expect((await store.listTables('even', call())).sort()).to.deep.equal(tables.filter((ref) => ref.instance === 'even').map((ref) => ref.table).sort());

    // Each table's keys share one slot (its hash tag); the tables themselves are spread out.
    const homes = new Set<number>();
    for (const ref of tables) {
      const gen = await generation(ref);
      const tag = `kvcrud:{${ref.instance}/${ref.table}}`;
      const slots = new Set(
        await Promise.all([`${tag}:table`, `${tag}:${gen}:rows`, `${tag}:${gen}:r:k007`].map(async (key) => (await cluster.nodes[0]!.cli('--raw', 'CLUSTER', 'KEYSLOT', key)).trim())),
      );
      expect(slots.size, `slots of ${ref.table}`).to.equal(1);
      const home = await owner(`${tag}:table`);
      expect(await redisCli(home, ['HGETALL', `${tag}:${gen}:r:k007`])).to.equal(`1) "cf:c"\n2) "1:${ref.table}-7"\n`);
      homes.add(home);
    }
    expect(homes.size, 'primaries holding tables').to.be.above(1);
  });

  it('decides conditions and counts each table on its own node', async function () {
    this.timeout(60_000);
    const counted = Array.from({ length: 6 }, (_, i) => ({ instance: i % 2 === 0 ? 'even' : 'odd', table: `counted${i}` }));
    const homes = new Set<number>();
    for (const ref of counted) {
      await store.createTable(ref, [{ name: 'cf' }], call());
      const claims = await Promise.all(
        Array.from({ length: 10 }, (_, i) =>
          store.checkAndMutateRow(ref, b('lock'), { conditions: [{ type: 'rowExists', exists: false }], mutations: [set('cf', 'owner', `c${i}`)], otherwise: [] }, call()),
        ),
      );
      expect(claims.filter(Boolean), `winners in ${ref.table}`).to.have.length(1);
      await Promise.all(Array.from({ length: 10 }, () => store.readModifyWriteRow(ref, b('n'), [{ type: 'increment', family: 'cf', column: b('hits'), amount: 1n }], call())));
      const home = await owner(`kvcrud:{${ref.instance}/${ref.table}}:table`);
      const stored = Buffer.from(await redisCli(home, ['--raw', 'HGET', `kvcrud:{${ref.instance}/${ref.table}}:${await generation(ref)}:r:n`, 'cf:hits']), 'latin1');
      // "<timestamp>:" then the counter's 8 bytes, then redis-cli's newline.
      expect(stored.subarray(stored.length - 9, stored.length - 1).readBigInt64BE(), `hits in ${ref.table}`).to.equal(10n);
      homes.add(home);
    }
    expect(homes.size, 'primaries holding counted tables').to.be.above(1);
  });

  it('follows each table\'s change feed from the stream on the table\'s own node', async function () {
    this.timeout(60_000);
    const followed = Array.from({ length: 6 }, (_, i) => ({ instance: i % 2 === 0 ? 'even' : 'odd', table: `followed${i}` }));
    const homes = new Set<number>();
    const abort = new AbortController();
    try {
      for (const ref of followed) await store.createTable(ref, [{ name: 'cf' }], call());
      const feeds = followed.map((ref) => store.readChanges(ref, { type: 'now' }, { signal: abort.signal })[Symbol.asyncIterator]());
      for (const feed of feeds) expect((await feed.next()).value?.type).to.equal('progress');
      for (const ref of followed) await store.mutateRow(ref, b('k'), [set('cf', 'c', ref.table)], call());
      for (const [index, feed] of feeds.entries()) {
        let event = (await feed.next()).value;
        while (event?.type === 'progress') event = (await feed.next()).value;
        expect(event?.type === 'change' ? event.change.mutations : undefined).to.deep.equal([set('cf', 'c', (followed[index] as { table: string }).table)]);
      }
      for (const ref of followed) {
        const tag = `kvcrud:{${ref.instance}/${ref.table}}`;
        const stream = `${tag}:${await generation(ref)}:changes`;
        const home = await owner(`${tag}:table`);
        expect(await owner(stream), `the node of ${ref.table}'s stream`).to.equal(home);
        expect((await redisCli(home, ['--raw', 'XLEN', stream])).trim()).to.equal('1');
        homes.add(home);
      }
      expect(homes.size, 'primaries holding followed tables').to.be.above(1);
    } finally {
      abort.abort();
    }
  });

  it('refuses a missing family atomically, and deletes a table with its rows reclaimed on its own node', async function () {
    this.timeout(30_000);
    const ref = { instance: 'odd', table: 'gone' };
    await store.createTable(ref, [{ name: 'cf' }], call());
    await store.mutateRow(ref, b('k'), [set('cf', 'c', 'kept')], call());
    const error = await store.mutateRow(ref, b('k'), [set('cf', 'c', 'lost'), set('nope', 'c', 'x')], call()).catch((caught: unknown) => caught);
    expect(isStoreError(error, 'NOT_FOUND') && error.resource === 'columnFamily').to.equal(true);
    expect((await store.readRows(ref, [b('k')], { versions: 1 }, call()))[0]?.cells[0]?.value.toString()).to.equal('kept');

    expect(await generation(ref)).to.match(/^[0-9a-f]{12}$/);
    await store.deleteTable(ref, call());
    const missing = await store.readRows(ref, [b('k')], { versions: 1 }, call()).catch((caught: unknown) => caught);
    expect(isStoreError(missing, 'NOT_FOUND') && missing.resource === 'table').to.equal(true);
    await store.reclaimed();
    const home = await owner('kvcrud:{odd/gone}:table');
    expect(await redisCli(home, ['--raw', '--scan', '--pattern', 'kvcrud:{odd/gone}*'])).to.equal('');
  });

  it('a cluster no node of which answers: calls answer UNAVAILABLE at once', async () => {
    const port = await closedPort();
    const unreachable = RedisStore.open({ url: `redis://127.0.0.1:${port}`, cluster: true, instances: ['even'], logger: silent });
    try {
      await new Promise((resolve) => setTimeout(resolve, 300)); // the first discovery has failed by now
      const started = Date.now();
      for (const attempt of [unreachable.listTables('even', call()), unreachable.checkHealth(call())]) {
        const error = await attempt.catch((caught: unknown) => caught);
        expect(isStoreError(error, 'UNAVAILABLE')).to.equal(true);
      }
      expect(Date.now() - started).to.be.below(500);
    } finally {
      await unreachable.close();
    }
  });

  it('checkHealth asks every primary', async () => {
    await store.checkHealth(call());
  });

  it('a store not configured for a cluster refuses a cluster node with a message saying what to set', async function () {
    const plain = RedisStore.open({ url: cluster.url, instances: ['even'], logger: silent });
    try {
      let error: unknown;
      for (const started = Date.now(); Date.now() - started < 5000; ) {
        error = await plain.listTables('even', call()).catch((caught: unknown) => caught);
        if (isStoreError(error, 'INTERNAL')) break;
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      expect(isStoreError(error, 'INTERNAL')).to.equal(true);
      expect((error as Error).message).to.equal(`${cluster.url} is a Redis Cluster node: set "cluster: true" for this store`);
    } finally {
      await plain.close();
    }
  });

  // Last: they kill a node and leave it down.
  it('a primary killed: its tables answer UNAVAILABLE at once, the others keep serving, checkHealth fails', async function () {
    this.timeout(30_000);
    const homes = new Map<string, number>();
    for (const ref of tables) {
      homes.set(ref.table, await owner(`kvcrud:{${ref.instance}/${ref.table}}:table`));
    }
    // The node holding the first table's rows.
    const victim = cluster.nodes.find((node) => node.port === homes.get('t0'))!;
    const onVictim = tables.filter((ref) => homes.get(ref.table) === victim.port).map((ref) => ref.table);
    await victim.stop('SIGKILL');
    for (const ref of tables) {
      const started = Date.now();
      const outcome = await store.readRows(ref, [b('k007')], { versions: 1 }, call()).then(
        () => 'OK',
        (error: unknown) => (isStoreError(error) ? error.code : String(error)),
      );
      expect(outcome, ref.table).to.equal(onVictim.includes(ref.table) ? 'UNAVAILABLE' : 'OK');
      expect(Date.now() - started).to.be.below(1000);
    }
    const health = await store.checkHealth(call()).then(
      () => 'OK',
      (error: unknown) => (isStoreError(error) ? error.code : String(error)),
    );
    expect(health).to.equal('UNAVAILABLE');
  });

  it('a process started while a primary is down serves the keys of the others, and answers UNAVAILABLE at once for its own', async function () {
    this.timeout(30_000);
    const down = cluster.nodes.find((node) => node.process.exitCode !== null || node.process.signalCode !== null)!;
    const up = cluster.nodes.find((node) => node !== down)!;
    // One key in the slots of each primary.
    const keys = new Map<number, string>();
    for (let i = 0; keys.size < cluster.nodes.length; i++) {
      const node = await cluster.nodeFor(`probe-${i}`);
      if (!keys.has(node.port)) keys.set(node.port, `probe-${i}`);
    }
    const connection = openConnection({ url: up.url, cluster: true, logger: silent });
    try {
      await connection.firstAttempt;
      const started = Date.now();
      for (const [port, key] of keys) {
        const outcome = await connection.send(['SET', key, 'v']).then(
          () => 'OK',
          (error: unknown) => toStoreError(error, 'set').code,
        );
        expect(outcome, `a key of the primary on ${port}`).to.equal(port === down.port ? 'UNAVAILABLE' : 'OK');
      }
      const health = await connection.ping().then(
        () => 'OK',
        (error: unknown) => toStoreError(error, 'ping').code,
      );
      expect(health).to.equal('UNAVAILABLE');
      expect(Date.now() - started, 'every answer at once').to.be.below(1500);
    } finally {
      connection.close();
    }
  });
});
