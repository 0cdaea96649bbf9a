import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { ApiClient } from '../support/api-client.ts';
import { EventStreamClient } from '../support/event-stream-client.ts';
import { TEST_PROJECT } from '../support/emulator.ts';
import { spannerTestInstance } from '../support/harnesses/spanner.ts';
import { type RedisServer, requireRedis, spawnRedis } from '../support/redis-server.ts';
import { type ServiceProcess, cleanEnv, runService } from '../support/service-process.ts';
import { requireSpanner, sharedSpannerEmulator } from '../support/spanner-emulator.ts';
import { randomInstanceId } from '../support/test-app.ts';

/**
 * A change feed resumed over HTTP in real service processes: after a service restart, and (where
 * the store is shared by processes) in another process than the one that served the first half.
 * A writer writes KEYS keys, several changes per key, one after another (each acknowledged before
 * the next), so the order it wrote them in is their commit order. The checks: every change after
 * the cursor is delivered, each key's changes in commit order, and nothing before the cursor
 * comes again.
 */

const KEYS = 5;
/** Changes in all: CHANGES / KEYS per key. */
const CHANGES = 30;
const HALF = CHANGES / 2;

/** One service process and a client of it. */
interface Side {
  readonly service: ServiceProcess;
  readonly api: ApiClient;
}

/** The n-th change the writer makes: `k<n % KEYS>` gets value `v<n>`. */
const keyOf = (n: number) => `k${n % KEYS}`;
const written = (from: number, to: number) => Array.from({ length: to - from }, (_, index) => `${keyOf(from + index)}=v${from + index}`);

/** A change as `key=value` of its one set. */
function brief(change: Record<string, unknown>): string {
  const [mutation] = change['mutations'] as Array<{ set?: { value: string } }>;
  return `${String(change['key'])}=${mutation?.set?.value ?? JSON.stringify(mutation)}`;
}

/** Each key's values in the order they came. */
function perKey(changes: readonly string[]): Map<string, string[]> {
  const keys = new Map<string, string[]>();
  for (const change of changes) {
    const [key = '', value = ''] = change.split('=');
    keys.set(key, [...(keys.get(key) ?? []), value]);
  }
  return keys;
}

/** The checks of the whole run: every change exactly once, each key's in the order written. */
function expectEveryChangeOnceInOrder(delivered: readonly string[], expected: readonly string[]): void {
  expect(new Set(delivered).size, 'no change twice').to.equal(delivered.length);
  for (const [key, values] of perKey(delivered)) {
    expect(values, `${key} in commit order`).to.deep.equal(perKey(expected).get(key));
  }
  expect(delivered).to.deep.equal(expected);
}

function useFeedScenario(tablesPath: () => string) {
  const running: ServiceProcess[] = [];
  const streams: EventStreamClient[] = [];
  after(async () => {
    await Promise.all(streams.splice(0).map((stream) => stream.close()));
    await Promise.all(running.splice(0).map((service) => service.stop('SIGKILL')));
  });

  return {
    async start(env: NodeJS.ProcessEnv): Promise<Side> {
      const service = await runService(env);
      running.push(service);
      return { service, api: await ApiClient.connect(service.baseUrl) };
    },
    async createTable(side: Side): Promise<void> {
      const created = await side.api.post(tablesPath(), { name: 'feed', families: [{ name: 'cf', maxVersions: 1 }] });
      expect(created.status, JSON.stringify(created.body)).to.equal(201);
    },
    async write(side: Side, n: number): Promise<void> {
      const response = await side.api.request('PUT', `${tablesPath()}/feed/rows/${keyOf(n)}`, { json: { cells: [{ family: 'cf', column: 'n', value: `v${n}` }] } });
      expect(response.status, JSON.stringify(response.body)).to.equal(200);
    },
    /** An SSE feed of the table, started (its first id read). */
    async follow(side: Side, headers: Record<string, string> = {}, query = ''): Promise<EventStreamClient> {
      const stream = await EventStreamClient.open(`${side.service.baseUrl}${tablesPath()}/feed/changes${query}`, headers);
      streams.push(stream);
      expect([stream.status, stream.body]).to.deep.equal([200, '']);
      await stream.until((client) => client.lastEventId !== '', 'the start of the feed');
      return stream;
    },
    /**
     * The changes after `cursor` as long polls answer them, each resumed from the cursor of the
     * last: until there are `count`, then one more that must answer none within `quietSeconds`.
     */
    async poll(side: Side, cursor: string, count: number, quietSeconds: number): Promise<string[]> {
      const changes: string[] = [];
      let next = cursor;
      const deadline = Date.now() + 30_000;
      for (;;) {
        const wait = changes.length >= count ? quietSeconds : 10;
        const polled = await side.api.get(`${tablesPath()}/feed/changes?cursor=${next}&wait=${wait}`);
        expect(polled.status, JSON.stringify(polled.body)).to.equal(200);
        const answered = (polled.body.changes as Array<Record<string, unknown>>).map(brief);
        changes.push(...answered);
        next = polled.body.cursor as string;
        if (answered.length === 0 && (changes.length >= count || Date.now() > deadline)) return changes;
      }
    },
  };
}

/** Waits until `stream` has `count` changes, then `quietMs` more, and returns them all (so any extra one shows). */
async function changesOf(stream: EventStreamClient, count: number, quietMs: number, what: string): Promise<string[]> {
  await stream.until((client) => client.changes.length >= count, what, 30_000);
  await new Promise((resolve) => setTimeout(resolve, quietMs));
  return stream.changes.map(brief);
}

/**
 * Two service processes A and B on one shared store: A serves the first half of the changes
 * over SSE and the client disconnects; B resumes from the last id the client saw and delivers
 * exactly the rest, while the writer goes on writing through both. Then A is restarted and,
 * from B's cursors, delivers only what came after them.
 */
async function handOver(scenario: ReturnType<typeof useFeedScenario>, env: () => NodeJS.ProcessEnv, quietMs: number): Promise<void> {
  const [a, b] = await Promise.all([scenario.start(env()), scenario.start(env())]);
  await scenario.createTable(a);
  const first = await scenario.follow(a);

  let cutTaken: () => void = () => undefined;
  const cut = new Promise<void>((resolve) => (cutTaken = resolve));
  const writer = (async () => {
    for (let n = 0; n < CHANGES; n += 1) {
      // The rest is written while the feed moves from A to B.
      if (n === HALF) await cut;
      await scenario.write(n % 2 === 0 ? a : b, n);
    }
  })();

  const firstHalf = await changesOf(first, HALF, 0, 'the first half from A');
  const lastSeen = first.lastEventId;
  await first.close();
  cutTaken();
  expect(firstHalf, 'A, before the disconnect').to.deep.equal(written(0, HALF));

  const rest = await scenario.follow(b, { 'last-event-id': lastSeen });
  await writer;
  const fromB = await changesOf(rest, CHANGES - HALF, quietMs, 'the rest from B');
  expect(fromB, 'B, resumed after what A delivered').to.deep.equal(written(HALF, CHANGES));
  expectEveryChangeOnceInOrder([...firstHalf, ...fromB], written(0, CHANGES));

  // A restarted: from B's last cursor, only what comes after it; from one in the middle of B's
  // changes, exactly the ones after that change.
  const middle = rest.events.filter((event) => event.event === 'change')[4]?.id ?? '';
  const last = rest.lastEventId;
  await rest.close();
  await a.service.stop('SIGTERM');
  const restarted = await scenario.start(env());
  const resumed = await scenario.follow(restarted, { 'last-event-id': last });
  for (let n = CHANGES; n < CHANGES + 4; n += 1) await scenario.write(n % 2 === 0 ? restarted : b, n);
  expect(await changesOf(resumed, 4, quietMs, 'the changes after the restart'), 'restarted A, from B\'s last cursor').to.deep.equal(written(CHANGES, CHANGES + 4));
  expect(await scenario.poll(restarted, middle, CHANGES + 4 - (HALF + 5), Math.ceil(quietMs / 1000)), 'restarted A, long polls from the middle of B\'s changes').to.deep.equal(written(HALF + 5, CHANGES + 4));
}

/**
 * The processes of the hand-over: SHUTDOWN_TIMEOUT_MS is short because fetch, once a stream it
 * read is aborted, opens a connection to the service on which it sends nothing, and the drain
 * waits for such a connection until the timeout cuts it.
 */
const handOverEnv = (storesFile: string) => cleanEnv({ PORT: '0', STORES_FILE: storesFile, SHUTDOWN_TIMEOUT_MS: '2000' });

describe('change feeds resumed across service processes and restarts', function () {
  this.timeout(120_000);

  describe('embedded store: a restart on the same data directory', () => {
    // Two processes cannot share an embedded data directory (the store locks it: docs/stores/embedded.md,
    // test/stores/embedded/durability.test.ts), so here the feed crosses a restart only.
    let dataDir: string;
    const scenario = useFeedScenario(() => '/v2/stores/embedded/instances/local/tables');
    const env = () => cleanEnv({ PORT: '0', DATA_DIR: dataDir });
    before(() => {
      dataDir = mkdtempSync(join(tmpdir(), 'kvcrud-feed-resume-'));
    });
    after(() => {
      rmSync(dataDir, { recursive: true, force: true });
    });

    it('resumes in the new process after the cursor the old one ended with, and from one before the restart', async () => {
      const first = await scenario.start(env());
      await scenario.createTable(first);
      const feed = await scenario.follow(first);
      for (let n = 0; n < HALF; n += 1) await scenario.write(first, n);
      const firstHalf = await changesOf(feed, HALF, 0, 'the first half');
      expect(firstHalf).to.deep.equal(written(0, HALF));
      const early = feed.events.filter((event) => event.event === 'change')[4]?.id ?? '';

      // SIGTERM ends the open feed with its cursor: the client resumes from it.
      expect(await first.service.stop('SIGTERM')).to.equal(0);
      await feed.until((client) => client.ended, 'the end of the stream');
      const end = feed.events.at(-1);
      expect(end?.event).to.equal('end');
      const { reason, cursor } = JSON.parse(end?.data ?? '{}') as { reason: string; cursor: string };
      expect(reason).to.equal('SHUTTING_DOWN');

      const second = await scenario.start(env());
      const resumed = await scenario.follow(second, { 'last-event-id': cursor });
      for (let n = HALF; n < CHANGES; n += 1) await scenario.write(second, n);
      const rest = await changesOf(resumed, CHANGES - HALF, 1000, 'the rest');
      expect(rest, 'from the cursor of the end event').to.deep.equal(written(HALF, CHANGES));
      expectEveryChangeOnceInOrder([...firstHalf, ...rest], written(0, CHANGES));

      // A cursor the first process gave, before the restart: what it had delivered after it, then the rest.
      const fromEarly = await scenario.follow(second, {}, `?cursor=${early}`);
      expect(await changesOf(fromEarly, CHANGES - 5, 1000, 'the changes after the fifth'), 'from the fifth change\'s id').to.deep.equal(written(5, CHANGES));
      expect(await scenario.poll(second, early, CHANGES - 5, 1), 'long polls from the same id').to.deep.equal(written(5, CHANGES));
    });
  });

  describe('redis store: two service processes on one redis-server, and a restart', () => {
    let server: RedisServer;
    let directory: string;
    const scenario = useFeedScenario(() => '/v2/stores/cache/instances/feeds/tables');
    before(async function () {
      requireRedis(this);
      server = await spawnRedis();
      directory = mkdtempSync(join(tmpdir(), 'kvcrud-feed-resume-redis-'));
      writeFileSync(join(directory, 'stores.yaml'), `stores:\n  cache: { driver: redis, url: "${server.url}", instances: [feeds] }\n`);
    });
    after(async () => {
      await server?.stop('SIGKILL');
      if (directory !== undefined) rmSync(directory, { recursive: true, force: true });
    });

    it('B resumes with Last-Event-ID exactly where A\'s client left, while writes go on; restarted A resumes from B\'s cursors', async () => {
      await handOver(scenario, () => handOverEnv(join(directory, 'stores.yaml')), 1000);
    });
  });

  describe('spanner store: two service processes on one emulator database, and a restart', () => {
    let directory: string;
    const instance = randomInstanceId();
    const scenario = useFeedScenario(() => `/v2/stores/ledger/instances/${instance}/tables`);
    before(async function () {
      this.timeout(60_000);
      requireSpanner(this);
      const emulator = await sharedSpannerEmulator();
      directory = mkdtempSync(join(tmpdir(), 'kvcrud-feed-resume-spanner-'));
      writeFileSync(
        join(directory, 'stores.yaml'),
        `stores:\n  ledger: { driver: spanner, projectId: ${TEST_PROJECT}, instance: ${spannerTestInstance()}, emulatorHost: "${emulator.host}", instances: [${instance}] }\n`,
      );
    });
    after(() => {
      if (directory !== undefined) rmSync(directory, { recursive: true, force: true });
    });

    it('B resumes with Last-Event-ID exactly where A\'s client left, while writes go on; restarted A resumes from B\'s cursors', async () => {
      // A Spanner feed yields a change once every partition has passed it (about a heartbeat, 1 s).
      await handOver(scenario, () => handOverEnv(join(directory, 'stores.yaml')), 2500);
    });
  });
});
