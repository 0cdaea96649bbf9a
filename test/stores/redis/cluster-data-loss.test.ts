import { expect } from 'chai';
import { pino } from 'pino';
import { isStoreError } from '../../../src/store/errors.ts';
import { RedisStore } from '../../../src/store/redis/redis-store.ts';
import type { CallOptions, Mutation, TableRef } from '../../../src/store/store.ts';
import { type RedisCluster, type RedisServer, requireRedis, spawnRedisCluster } from '../../support/redis-server.ts';

const silent = pino({ level: 'silent' });
const call = (): CallOptions => ({ deadline: Date.now() + 5000 });
const b = (text: string) => Buffer.from(text);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const set = (value: string): Mutation => ({ type: 'set', family: 'cf', column: b('c'), value: b(value), timestampMicros: 1n });

/** 'OK', or the error's code (with its resource for NOT_FOUND), so that answers compare as text. */
async function outcome(promise: Promise<unknown>): Promise<string> {
  try {
    await promise;
    return 'OK';
  } catch (error) {
    if (isStoreError(error, 'NOT_FOUND')) return `NOT_FOUND ${error.resource ?? ''}`;
    return isStoreError(error) ? error.code : String(error);
  }
}

async function scanned(store: RedisStore, ref: TableRef): Promise<string[]> {
  const keys: string[] = [];
  for await (const row of store.scanRows(ref, { range: {}, reverse: false, limit: 100, versions: 1 }, call())) keys.push(row.key.toString());
  return keys;
}

async function until(answer: () => Promise<string>, wanted: (text: string) => boolean, what: string, ms = 10_000): Promise<string> {
  const started = Date.now();
  for (;;) {
    const text = await answer();
    if (wanted(text)) return text;
    if (Date.now() - started > ms) expect.fail(`${what}: still ${text} after ${ms} ms`);
    await sleep(100);
  }
}

// A primary "comes back empty" as a Redis without persistence does after a crash or a
// maintenance restart: killed, and started again with its nodes.conf, so that it still owns its
// slots, and with none of its keys. The cluster is shared by the cases; each leaves every node
// running and the cluster healthy. The node timeout is long enough that a node down for a case
// is never marked failed (which, without replicas, would stop the whole cluster).
describe('redis store on a Redis Cluster whose primaries lose their data', () => {
  let cluster: RedisCluster;
  const stores: RedisStore[] = [];
  const open = (instance: string, url = cluster.url) => {
    const store = RedisStore.open({ url, cluster: true, instances: [instance], logger: silent });
    stores.push(store);
    return store;
  };

  before(async function () {
    this.timeout(60_000);
    requireRedis(this);
    cluster = await spawnRedisCluster(3, { nodeTimeoutMs: 30_000 });
  });
  afterEach(async function () {
    this.timeout(30_000);
    await Promise.all(stores.splice(0).map((store) => store.close()));
    for (const node of cluster?.nodes ?? []) if (node.process.exitCode !== null || node.process.signalCode !== null) await node.restartEmpty();
    await cluster?.healthy();
  });
  after(async () => {
    await cluster?.stop();
  });

  const catalogNode = (instance: string) => cluster.nodeFor(`kvcrud:{${instance}}:tables`);
  const tableNode = (ref: TableRef) => cluster.nodeFor(`kvcrud:{${ref.instance}/${ref.table}}:table`);

  /** The first table name (t0, t1, …) of `instance` whose record lives on a node `where` accepts. */
  async function tableWhere(instance: string, where: (node: RedisServer) => boolean, taken: readonly string[] = []): Promise<TableRef> {
    for (let i = 0; ; i++) {
      const ref = { instance, table: `t${i}` };
      if (!taken.includes(ref.table) && where(await tableNode(ref))) return ref;
    }
  }

  it('the primary holding a table comes back empty: describe, create, list and every row call agree that it is gone, in the process that knew it and in a new one', async function () {
    this.timeout(60_000);
    const catalog = await catalogNode('lost');
    const gone = await tableWhere('lost', (node) => node !== catalog);
    const home = await tableNode(gone);
    const kept = await tableWhere('lost', (node) => node !== home, [gone.table]);
    const store = open('lost');
    for (const ref of [gone, kept]) {
      await store.createTable(ref, [{ name: 'cf' }], call());
      await store.mutateRow(ref, b('k'), [set(`${ref.table}-v`)], call());
      expect(await outcome(store.readRows(ref, [b('k')], { versions: 1 }, call()))).to.equal('OK');
    }

    await home.restartEmpty();
    await cluster.healthy();
    await until(() => outcome(store.describeTable(gone, call())), (text) => text !== 'UNAVAILABLE', 'describe after the restart');

    // The store that created the table still has its generation cached; a new one has nothing.
    for (const [who, s] of [['the process that created it', store], ['a new process', open('lost')]] as const) {
      const answers = {
        describe: await outcome(s.describeTable(gone, call())),
        read: await outcome(s.readRows(gone, [b('k')], { versions: 1 }, call())),
        write: await outcome(s.mutateRow(gone, b('k'), [set('x')], call())),
        batch: await outcome(s.mutateRows(gone, [{ key: b('k'), mutations: [set('x')] }], call())),
        scan: await outcome(scanned(s, gone)),
        delete: await outcome(s.deleteTable(gone, call())),
      };
      expect(answers, who).to.deep.equal({ describe: 'NOT_FOUND table', read: 'NOT_FOUND table', write: 'NOT_FOUND table', batch: 'NOT_FOUND table', scan: 'NOT_FOUND table', delete: 'NOT_FOUND table' });
      expect(await s.listTables('lost', call()), who).to.deep.equal([kept.table]);
      expect((await s.readRows(kept, [b('k')], { versions: 1 }, call()))[0]?.cells[0]?.value.toString(), who).to.equal(`${kept.table}-v`);
    }
    // The refused calls wrote nothing on the emptied primary.
    expect(await home.cli('--raw', '--scan', '--pattern', `kvcrud:{lost/${gone.table}}*`)).to.equal('');

    // The name is free: a new table, empty, in every process.
    await store.createTable(gone, [{ name: 'cf' }], call());
    const other = open('lost');
    expect(await other.readRows(gone, [b('k')], { versions: 1 }, call())).to.deep.equal([null]);
    await other.mutateRow(gone, b('k'), [set('again')], call());
    expect((await store.readRows(gone, [b('k')], { versions: 1 }, call()))[0]?.cells[0]?.value.toString()).to.equal('again');
    expect((await store.listTables('lost', call())).sort()).to.deep.equal([gone.table, kept.table].sort());
  });

  it("the catalog's primary down: a new process serves the tables of the other primaries in full; listing, creating and the tables of that primary answer UNAVAILABLE at once", async function () {
    this.timeout(60_000);
    const catalog = await catalogNode('down');
    const served = await tableWhere('down', (node) => node !== catalog);
    const deleted = await tableWhere('down', (node) => node !== catalog, [served.table]);
    const withCatalog = await tableWhere('down', (node) => node === catalog);
    const writer = open('down');
    for (const ref of [served, deleted, withCatalog]) {
      await writer.createTable(ref, [{ name: 'cf' }], call());
      await writer.mutateRow(ref, b('k'), [set(`${ref.table}-v`)], call());
    }

    await catalog.crash();
    const healthy = cluster.nodes.find((node) => node !== catalog) as RedisServer;
    const fresh = open('down', healthy.url);
    const started = Date.now();
    for (const [who, s] of [['a new process', fresh], ['the process that created them', writer]] as const) {
      expect(await outcome(s.describeTable(served, call())), who).to.equal('OK');
      expect((await s.readRows(served, [b('k')], { versions: 1 }, call()))[0]?.cells[0]?.value.toString(), who).to.equal(`${served.table}-v`);
      expect(await outcome(s.mutateRow(served, b('k2'), [set('new')], call())), who).to.equal('OK');
      expect(await scanned(s, served), who).to.deep.equal(['k', 'k2']);
      expect(await outcome(s.mutateRow(served, b('k2'), [{ type: 'deleteRow' }], call())), who).to.equal('OK');
      expect(await outcome(s.readRows(withCatalog, [b('k')], { versions: 1 }, call())), who).to.equal('UNAVAILABLE');
      expect(await outcome(s.describeTable(withCatalog, call())), who).to.equal('UNAVAILABLE');
      expect(await outcome(s.listTables('down', call())), who).to.equal('UNAVAILABLE');
      expect(await outcome(s.createTable({ instance: 'down', table: 'new' }, [{ name: 'cf' }], call())), who).to.equal('UNAVAILABLE');
    }
    // Deleting needs only the table's own primary.
    await fresh.deleteTable(deleted, call());
    expect(await outcome(writer.readRows(deleted, [b('k')], { versions: 1 }, call()))).to.equal('NOT_FOUND table');
    expect(Date.now() - started, 'every answer at once, none at its deadline').to.be.below(4000);

    // Back, empty: the list is rebuilt from the records; the table of the lost primary is gone with it.
    await catalog.restartEmpty();
    await cluster.healthy();
    const listed = await until(() => fresh.listTables('down', call()).then((names) => names.join(','), outcome), (text) => text !== 'UNAVAILABLE', 'listing');
    expect(listed).to.equal(served.table);
  });

  it("the catalog's primary comes back empty: the next sweep lists the other primaries' tables again and reclaims the rows of a deletion cut short", async function () {
    this.timeout(60_000);
    const catalog = await catalogNode('relist');
    const live = [await tableWhere('relist', (node) => node !== catalog)];
    live.push(await tableWhere('relist', (node) => node !== catalog, [live[0]!.table]));
    const big = await tableWhere('relist', (node) => node !== catalog, live.map((ref) => ref.table));
    const bigHome = await tableNode(big);

    // A process serving the instance throughout, its start-up sweep done.
    const running = open('relist');
    expect(await running.listTables('relist', call())).to.deep.equal([]);
    await running.reclaimed();

    // Another process writes the tables, then deletes one and stops before reclaiming its rows.
    const writer = open('relist');
    for (const ref of [...live, big]) {
      await writer.createTable(ref, [{ name: 'cf' }], call());
      await writer.mutateRow(ref, b('k'), [set(`${ref.table}-v`)], call());
    }
    // A row whose key makes its hash's name match the pattern the rebuild scans for.
    await writer.mutateRow(live[0]!, b('x}:table'), [set('x')], call());
    for (let first = 0; first < 3000; first += 1000) {
      const entries = Array.from({ length: 1000 }, (_, i) => ({ key: b(`row-${first + i}`), mutations: [set('x')] }));
      await writer.mutateRows(big, entries, { deadline: Date.now() + 20_000 });
    }
    await writer.deleteTable(big, call());
    await writer.close();
    const bigKeys = async () => (await bigHome.cli('--raw', '--scan', '--pattern', `kvcrud:{relist/${big.table}}*`)).trim().split('\n').filter(Boolean).length;
    expect(await bigKeys(), 'keys of the deleted table left by the stopped process').to.be.above(3000);

    await catalog.restartEmpty();
    await cluster.healthy();
    // No call lists the tables here: the sweep that follows the reconnection does it all.
    const listedInRedis = async () => (await catalog.cli('--raw', 'HKEYS', 'kvcrud:{relist}:tables')).split('\n').filter(Boolean);
    await until(
      async () => `${(await listedInRedis()).filter((name) => live.some((ref) => ref.table === name)).length} listed, ${await bigKeys()} keys of the deleted table`,
      (text) => text === `${live.length} listed, 0 keys of the deleted table`,
      'the sweep after the catalog came back empty',
    );
    // The deleted table's name is registered again with the generation left to reclaim, and pruned later.
    expect((await listedInRedis()).sort()).to.deep.equal([...live, big].map((ref) => ref.table).sort());
    expect((await running.listTables('relist', call())).sort()).to.deep.equal(live.map((ref) => ref.table).sort());
    for (const ref of live) expect((await running.readRows(ref, [b('k')], { versions: 1 }, call()))[0]?.cells[0]?.value.toString()).to.equal(`${ref.table}-v`);
    expect(await outcome(running.describeTable(big, call()))).to.equal('NOT_FOUND table');
  });
});
