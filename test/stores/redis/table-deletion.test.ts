import { type ChildProcess, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { pino } from 'pino';
import { isStoreError } from '../../../src/store/errors.ts';
import { RedisStore } from '../../../src/store/redis/redis-store.ts';
import type { CallOptions, Row } from '../../../src/store/store.ts';
import { type RedisServer, requireRedis, spawnRedis } from '../../support/redis-server.ts';
import { SlowProxy } from '../../support/slow-proxy.ts';

const silent = pino({ level: process.env['TEST_LOG_LEVEL'] ?? 'silent' }, pino.destination(2));
const call = (): CallOptions => ({ deadline: Date.now() + 10_000 });
const b = (text: string) => Buffer.from(text);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const t = { instance: 'inst', table: 't' };
const rowName = (i: number) => `row-${String(i).padStart(6, '0')}`;

/** Writes `count` rows of `cells` cells each, through the store. */
async function fill(store: RedisStore, count: number, cells: number): Promise<void> {
  for (let first = 0; first < count; first += 1000) {
    const entries = Array.from({ length: Math.min(1000, count - first) }, (_, i) => ({
      key: b(rowName(first + i)),
      mutations: Array.from({ length: cells }, (__, c) => ({
        type: 'set' as const,
        family: 'cf',
        column: b(`c${c}`),
        value: b(`value-${first + i}-${c}`),
        timestampMicros: 1n,
      })),
    }));
    const results = await store.mutateRows(t, entries, call());
    expect(results.every((result) => result === undefined)).to.equal(true);
  }
}

async function generation(server: RedisServer): Promise<string> {
  return (await server.cli('--raw', 'HGET', 'kvcrud:{inst/t}:table', 'generation')).trim();
}

/** The fields of the table's record, sorted. */
async function recordFields(server: RedisServer): Promise<string[]> {
  return (await server.cli('--raw', 'HKEYS', 'kvcrud:{inst/t}:table')).split('\n').filter((field) => field !== '').sort();
}

async function keysOf(server: RedisServer, gen: string): Promise<number> {
  const out = (await server.cli('--raw', '--scan', '--pattern', `kvcrud:{inst/t}:${gen}:*`)).trim();
  return out === '' ? 0 : out.split('\n').length;
}

describe('redis store: deleting a table', () => {
  let server: RedisServer;
  const stores: RedisStore[] = [];
  const open = (url = server.url) => {
    const store = RedisStore.open({ url, instances: ['inst'], logger: silent });
    stores.push(store);
    return store;
  };
  beforeEach(async function () {
    requireRedis(this);
    server = await spawnRedis();
  });
  afterEach(async () => {
    await Promise.all(stores.splice(0).map((store) => store.close()));
    await server?.stop('SIGKILL');
  });

  it('never shows a reader part of the table: each call sees all of it or NOT_FOUND, and Redis keeps answering while the rows are reclaimed', async function () {
    this.timeout(120_000);
    const ROWS = 20_000;
    const writer = open();
    await writer.createTable(t, [{ name: 'cf' }], call());
    await fill(writer, ROWS, 5);
    const gen = await generation(server);

    // The reader is another process's view: it holds the table's generation in its cache.
    const reader = open();
    const keys = Array.from({ length: 1000 }, (_, i) => b(rowName(i * 20)));
    expect((await reader.readRows(t, keys, { versions: 1 }, call())).every((row) => row !== null)).to.equal(true);

    const seen = { complete: 0, notFound: 0 };
    let deleted = false;
    const afterDeletion: string[] = [];
    const readLoop = async () => {
      while (!deleted || afterDeletion.length < 20) {
        const resolvedBefore = deleted;
        try {
          const rows = await reader.readRows(t, keys, { versions: 1 }, call());
          const found = rows.filter((row) => row !== null && row.cells.length === 5).length;
          expect(found, 'rows of one readRows').to.equal(keys.length);
          seen.complete++;
          if (resolvedBefore) afterDeletion.push('OK');
        } catch (error) {
          if (!isStoreError(error, 'NOT_FOUND')) throw error;
          seen.notFound++;
          if (resolvedBefore) afterDeletion.push('NOT_FOUND');
        }
      }
    };
    const scanLoop = async () => {
      while (!deleted) {
        const rows: Row[] = [];
        try {
          for await (const row of reader.scanRows(t, { range: {}, reverse: false, limit: 1001, versions: 1 }, call())) rows.push(row);
          expect(rows.length, 'rows of one scan').to.equal(1001);
          seen.complete++;
        } catch (error) {
          if (!isStoreError(error, 'NOT_FOUND')) throw error;
          seen.notFound++;
        }
      }
    };

    // Redis's slow log shows every command that held it for 50 ms or more (a loaded machine
    // stretches anything, so the bound is generous: the reclaim's commands take well under 1 ms).
    await server.cli('CONFIG', 'SET', 'slowlog-log-slower-than', '50000');
    await server.cli('SLOWLOG', 'RESET');
    const loops = Promise.all([readLoop(), scanLoop(), readLoop()]);
    await sleep(200);
    await writer.deleteTable(t, call());
    deleted = true;
    await loops;
    await writer.reclaimed();

    expect(afterDeletion.every((result) => result === 'NOT_FOUND'), 'calls after deleteTable resolved').to.equal(true);
    expect(seen.complete).to.be.above(0);
    expect(await keysOf(server, gen), 'keys of the deleted generation left').to.equal(0);
    expect(await recordFields(server), 'the record, once the deleted generation is reclaimed').to.deep.equal([]);
    const slow = (await server.cli('--raw', 'SLOWLOG', 'GET', '128')).split('\n').filter((line) => /^(UNLINK|ZREM|ZRANGE)$/i.test(line));
    expect(slow, 'reclaim commands that held Redis for 50 ms or more').to.deep.equal([]);
  });

  it('a process killed mid-reclaim leaves the rest to the next process, and the name can be used again at once', async function () {
    this.timeout(120_000);
    const ROWS = 5000;
    const first = open();
    await first.createTable(t, [{ name: 'cf' }], call());
    await fill(first, ROWS, 1);
    const gen = await generation(server);
    await first.close();

    // The deleting process talks to Redis through a slow link, so its reclaim takes seconds.
    const proxy = await SlowProxy.start(`127.0.0.1:${server.port}`);
    proxy.delayMs = 20;
    let child: ChildProcess | undefined;
    try {
      const fixture = fileURLToPath(new URL('fixtures/delete-table.ts', import.meta.url));
      child = spawn(process.execPath, [fixture, `redis://${proxy.host}`, 'inst', 't'], { stdio: ['ignore', 'pipe', 'inherit'] });
      await new Promise<void>((resolve, reject) => {
        child?.once('exit', (code) => reject(new Error(`the deleting process exited (${code}) before it deleted the table`)));
        createInterface({ input: child!.stdout! }).on('line', (line) => line === 'deleted' && resolve());
      });
      let left = ROWS;
      while (left === ROWS) {
        await sleep(20);
        left = Number((await server.cli('--raw', 'ZCARD', `kvcrud:{inst/t}:${gen}:rows`)).trim());
      }
      const exited = new Promise((resolve) => child?.once('exit', resolve));
      child.kill('SIGKILL');
      await exited;
    } finally {
      await proxy.close();
    }
    const left = Number((await server.cli('--raw', 'ZCARD', `kvcrud:{inst/t}:${gen}:rows`)).trim());
    expect(left, 'rows left by the killed process').to.be.above(0).and.below(ROWS);
    // The record no longer names a live generation, and marks the deleted one for reclaiming.
    expect(await recordFields(server)).to.deep.equal([`deleted:${gen}`]);

    // Another process: the table is gone for it, and it can create one of the same name while
    // its start-up sweep reclaims the old generation.
    const next = open();
    const missing = await next.describeTable(t, call()).catch((error: unknown) => error);
    expect(isStoreError(missing, 'NOT_FOUND')).to.equal(true);
    await next.createTable(t, [{ name: 'cf' }], call());
    const fresh: Row[] = [];
    for await (const row of next.scanRows(t, { range: {}, reverse: false, limit: 10, versions: 1 }, call())) fresh.push(row);
    expect(fresh).to.deep.equal([]);
    await next.reclaimed();
    expect(await keysOf(server, gen), 'keys of the deleted generation left').to.equal(0);
    expect(await recordFields(server)).to.deep.equal(['families', 'generation']);
    expect(await generation(server)).not.to.equal(gen);
  });

  it('prunes from the list a name registered long ago whose table has no record, and keeps a recent one', async function () {
    // Two creations that stopped after registering their names, before writing their records:
    // one eleven minutes ago, one just now, which may still be under way.
    await server.cli('HSET', 'kvcrud:{inst}:tables', 'stale', String(Date.now() - 11 * 60_000), 'recent', String(Date.now()));
    const store = open();
    await store.createTable({ instance: 'inst', table: 'live' }, [{ name: 'cf' }], call());
    expect((await store.listTables('inst', call())).sort()).to.deep.equal(['live']);
    await store.reclaimed(); // the start-up sweep
    expect((await server.cli('--raw', 'HKEYS', 'kvcrud:{inst}:tables')).split('\n').filter(Boolean).sort()).to.deep.equal(['live', 'recent']);
  });
});
