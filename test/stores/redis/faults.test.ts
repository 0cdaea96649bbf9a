import { expect } from 'chai';
import { pino } from 'pino';
import { type StoreError, isStoreError } from '../../../src/store/errors.ts';
import { RedisStore } from '../../../src/store/redis/redis-store.ts';
import type { CallOptions, Mutation } from '../../../src/store/store.ts';
import { closedPort } from '../../support/fake-backends.ts';
import { type RedisServer, redisCli, requireRedis, spawnRedis } from '../../support/redis-server.ts';

const silent = pino({ level: 'silent' });
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const b = (text: string) => Buffer.from(text);
const set = (value: string): Mutation => ({ type: 'set', family: 'cf', column: b('c'), value: b(value), timestampMicros: BigInt(Date.now()) * 1000n });
const t = { instance: 'inst', table: 't' };

async function outcome(promise: Promise<unknown>): Promise<string> {
  try {
    await promise;
    return 'OK';
  } catch (error) {
    if (isStoreError(error)) return error.code === 'NOT_FOUND' ? `NOT_FOUND ${error.resource}` : error.code;
    throw error; // anything but a StoreError is a bug
  }
}

describe('redis store: backend faults', () => {
  const servers: RedisServer[] = [];
  const stores: RedisStore[] = [];
  afterEach(async () => {
    await Promise.all(stores.splice(0).map((store) => store.close()));
    await Promise.all(servers.splice(0).map((server) => server.stop('SIGKILL')));
  });
  beforeEach(function () {
    requireRedis(this);
  });
  const start = async (port?: number) => {
    const server = await spawnRedis(port === undefined ? {} : { port });
    servers.push(server);
    return server;
  };
  const open = (server: RedisServer) => {
    const store = RedisStore.open({ url: server.url, instances: ['inst'], logger: silent });
    stores.push(store);
    return store;
  };
  const within = (ms: number): CallOptions => ({ deadline: Date.now() + ms });

  it('killed under load: fails fast with UNAVAILABLE, checkHealth fails, and recovers on the same port without a new store', async function () {
    this.timeout(60_000);
    const DEADLINE_MS = 1000;
    const server = await start();
    const port = server.port;
    const store = open(server);
    await store.createTable(t, [{ name: 'cf' }], within(DEADLINE_MS));

    type Outcome = { phase: string; result: string; ms: number };
    const outcomes: Outcome[] = [];
    let phase = 'up';
    let stop = false;
    let n = 0;
    const worker = async () => {
      while (!stop) {
        const key = b(`row-${n++}`);
        for (const work of [() => store.mutateRow(t, key, [set('v')], within(DEADLINE_MS)), () => store.readRows(t, [key], { versions: 1 }, within(DEADLINE_MS))]) {
          const startPhase = phase;
          const started = Date.now();
          const result = await outcome(work());
          outcomes.push({ phase: startPhase === phase ? phase : 'between', result, ms: Date.now() - started });
          // While Redis is down, calls fail at once: pace the loop rather than spin.
          if (result !== 'OK') await sleep(5);
        }
      }
    };
    const load = Promise.all(Array.from({ length: 8 }, worker));

    await sleep(700);
    phase = 'killing';
    await server.stop('SIGKILL');
    phase = 'down';
    await sleep(1500);
    expect(await outcome(store.checkHealth(within(500))), 'checkHealth while down').to.equal('UNAVAILABLE');

    // A new Redis on the same port: empty, as Redis without persistence always restarts. The
    // table is made again, as an operator would restore it.
    phase = 'restarting';
    await start(port);
    const restarted = Date.now();
    await waitUntil(() => outcome(store.checkHealth(within(500))), 'OK');
    const recoveredMs = Date.now() - restarted;
    expect(await outcome(store.createTable(t, [{ name: 'cf' }], within(DEADLINE_MS)))).to.equal('OK');
    phase = 'recovered';
    await sleep(700);
    stop = true;
    await load;

    const results = (name: string) => [...new Set(outcomes.filter((entry) => entry.phase === name).map((entry) => entry.result))].sort();
    expect(results('up'), 'while up').to.deep.equal(['OK']);
    const down = outcomes.filter((entry) => entry.phase === 'down');
    expect(down.length).to.be.above(0);
    expect(results('down'), 'while down').to.deep.equal(['UNAVAILABLE']);
    const slowest = Math.max(...down.map((entry) => entry.ms));
    expect(slowest, 'failing fast, far below the deadline').to.be.below(DEADLINE_MS / 2);
    expect(results('recovered'), 'after recovery').to.deep.equal(['OK']);
    expect(recoveredMs, 'reconnected within').to.be.below(5000);
  });

  it('down at start-up: the store opens, calls answer UNAVAILABLE at once, and it connects when Redis comes up', async function () {
    this.timeout(30_000);
    const port = await closedPort();
    const store = RedisStore.open({ url: `redis://127.0.0.1:${port}`, instances: ['inst'], logger: silent });
    stores.push(store);
    await sleep(300); // the first connection attempt has failed by now
    const started = Date.now();
    expect(await outcome(store.listTables('inst', within(2000)))).to.equal('UNAVAILABLE');
    expect(await outcome(store.checkHealth(within(2000)))).to.equal('UNAVAILABLE');
    expect(Date.now() - started).to.be.below(500);
    await start(port);
    await waitUntil(() => outcome(store.checkHealth(within(500))), 'OK');
    expect(await store.listTables('inst', within(2000))).to.deep.equal([]);
  });

  it('restarted empty: every table answers NOT_FOUND, listTables is empty, and tables can be made again', async function () {
    this.timeout(30_000);
    let server = await start();
    const store = open(server);
    await store.createTable(t, [{ name: 'cf' }], within(2000));
    await store.mutateRow(t, b('k'), [set('v')], within(2000));
    expect(await outcome(store.readRows(t, [b('k')], { versions: 1 }, within(2000)))).to.equal('OK');

    const port = server.port;
    await server.stop('SIGKILL');
    server = await start(port);
    await waitUntil(() => outcome(store.checkHealth(within(500))), 'OK');

    // The store still holds the table's generation in its cache: the scripts' check of the
    // table's record, not the cache, decides.
    expect(await outcome(store.readRows(t, [b('k')], { versions: 1 }, within(2000)))).to.equal('NOT_FOUND table');
    expect(await outcome(store.mutateRow(t, b('k'), [set('v')], within(2000)))).to.equal('NOT_FOUND table');
    expect(await outcome(store.mutateRows(t, [{ key: b('k'), mutations: [set('v')] }], within(2000)))).to.equal('NOT_FOUND table');
    expect(await outcome(store.describeTable(t, within(2000)))).to.equal('NOT_FOUND table');
    expect(await outcome(store.deleteTable(t, within(2000)))).to.equal('NOT_FOUND table');
    const scan = async () => {
      for await (const row of store.scanRows(t, { range: {}, reverse: false, limit: 10, versions: 1 }, within(2000))) void row;
    };
    expect(await outcome(scan())).to.equal('NOT_FOUND table');
    expect(await store.listTables('inst', within(2000))).to.deep.equal([]);
    // Nothing was written for the refused calls: the empty Redis holds only the state of the
    // instance's list of tables, found whole (and empty) again.
    expect(await server.cli('--raw', '--scan')).to.equal('kvcrud:{inst}:catalog-state\n');

    await store.createTable(t, [{ name: 'cf' }], within(2000));
    await store.mutateRow(t, b('k'), [set('again')], within(2000));
    const [row] = await store.readRows(t, [b('k')], { versions: 1 }, within(2000));
    expect(row?.cells[0]?.value.toString()).to.equal('again');
  });

  it('slow (DEBUG SLEEP): calls end with DEADLINE_EXCEEDED at their deadline, and later answers go to the right calls', async function () {
    this.timeout(30_000);
    const server = await start();
    const store = open(server);
    await store.createTable(t, [{ name: 'cf' }], within(2000));
    await store.mutateRow(t, b('a'), [set('A')], within(2000));
    await store.mutateRow(t, b('b'), [set('B')], within(2000));

    const sleeping = redisCli(server.port, ['DEBUG', 'SLEEP', '1.5']);
    await sleep(100); // let DEBUG SLEEP reach Redis first
    const started = Date.now();
    const [read, write, health] = await Promise.all([
      outcome(store.readRows(t, [b('a')], { versions: 1 }, within(300))),
      outcome(store.mutateRow(t, b('a'), [set('late')], within(300))),
      outcome(store.checkHealth(within(300))),
    ]);
    const elapsed = Date.now() - started;
    expect([read, write, health]).to.deep.equal(['DEADLINE_EXCEEDED', 'DEADLINE_EXCEEDED', 'DEADLINE_EXCEEDED']);
    expect(elapsed, 'answered at the deadline, not when Redis woke').to.be.below(1000);
    await sleeping;

    // The abandoned write ran when Redis woke (its outcome was unknown to the caller, as a
    // DEADLINE_EXCEEDED says); replies stay matched to their calls.
    const rows = await store.readRows(t, [b('b'), b('a')], { versions: 1 }, within(2000));
    expect(rows.map((row) => row?.cells[0]?.value.toString())).to.deep.equal(['B', 'late']);
  });

  it('a call whose caller has gone ends at once with the caller-gone error', async function () {
    const server = await start();
    const store = open(server);
    await store.createTable(t, [{ name: 'cf' }], within(2000));
    const sleeping = redisCli(server.port, ['DEBUG', 'SLEEP', '0.5']);
    await sleep(100);
    const controller = new AbortController();
    const pending = store.readRows(t, [b('a')], { versions: 1 }, { deadline: Date.now() + 5000, signal: controller.signal });
    setTimeout(() => controller.abort(), 50);
    const started = Date.now();
    const error = (await pending.then(
      () => expect.fail('resolved'),
      (reason: unknown) => reason,
    )) as StoreError;
    expect(error.code).to.equal('DEADLINE_EXCEEDED');
    expect(error.message).to.match(/caller disconnected/);
    expect(Date.now() - started).to.be.below(300);
    await sleeping;
  });
});

async function waitUntil(probe: () => Promise<string>, wanted: string, timeoutMs = 10_000): Promise<void> {
  const started = Date.now();
  let last = '';
  while (Date.now() - started < timeoutMs) {
    last = await probe();
    if (last === wanted) return;
    await sleep(50);
  }
  expect.fail(`still ${last} after ${timeoutMs} ms, waiting for ${wanted}`);
}
