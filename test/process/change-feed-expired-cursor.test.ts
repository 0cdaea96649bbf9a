import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { expect } from 'chai';
import { DATABASE_FILE } from '../../src/store/embedded/embedded-store.ts';
import { Writer } from '../../src/store/embedded/writer.ts';
import { ApiClient } from '../support/api-client.ts';
import { EventStreamClient } from '../support/event-stream-client.ts';
import { type ServiceProcess, cleanEnv, runService } from '../support/service-process.ts';
import { problemOf } from '../support/v2.ts';

/**
 * A cursor older than the store keeps changes, over HTTP, on the embedded store in a real service
 * process. The store keeps changes for `limits.changeRetentionSeconds` (a day) and trims older
 * ones once a minute. A test cannot wait a day, so while the service is stopped the test runs the
 * store's own trimming step (Writer.trimChanges) with a retention of 5 s and a clock 10 s ahead:
 * what the service's trimming does to changes a day old. The service started again then finds
 * those changes gone, as it would after the retention.
 */
describe('change feeds: a cursor older than the retention, over HTTP', function () {
  this.timeout(90_000);
  let dataDir: string;
  const running: ServiceProcess[] = [];
  const streams: EventStreamClient[] = [];
  const changes = '/v2/stores/embedded/instances/local/tables/orders/changes';
  const start = async () => {
    const service = await runService(cleanEnv({ PORT: '0', DATA_DIR: dataDir }));
    running.push(service);
    return { service, api: await ApiClient.connect(service.baseUrl) };
  };
  before(() => {
    dataDir = mkdtempSync(join(tmpdir(), 'kvcrud-feed-expired-'));
  });
  after(async () => {
    await Promise.all(streams.splice(0).map((stream) => stream.close()));
    await Promise.all(running.splice(0).map((service) => service.stop('SIGKILL')));
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('answers 410 CURSOR_EXPIRED for a cursor before a trimmed change, as JSON and to an SSE request; a cursor after them still reads on', async () => {
    const first = await start();
    expect((await first.api.post('/v2/stores/embedded/instances/local/tables', { name: 'orders', families: [{ name: 'cf' }] })).status).to.equal(201);
    const feed = await EventStreamClient.open(`${first.service.baseUrl}${changes}`);
    streams.push(feed);
    await feed.until((client) => client.lastEventId !== '', 'the start of the feed');
    const beforeAll = feed.lastEventId;
    for (let i = 1; i <= 4; i += 1) {
      expect((await first.api.request('PUT', `/v2/stores/embedded/instances/local/tables/orders/rows/k${i}`, { json: { cells: [{ family: 'cf', column: 'c', value: String(i) }] } })).status).to.equal(200);
    }
    await feed.until((client) => client.changes.length >= 4, 'four changes');
    const [afterFirst, afterSecond] = feed.events.map((event) => event.id);
    // Within the retention, every cursor reads on.
    expect((await first.api.get(`${changes}?cursor=${beforeAll}`)).status).to.equal(200);
    expect(await first.service.stop('SIGTERM')).to.equal(0);

    const db = new DatabaseSync(join(dataDir, DATABASE_FILE));
    try {
      // The two oldest changes, as if a day had passed since they were committed.
      new Writer(db).trimChanges(2, BigInt(Date.now() + 10_000) * 1000n, 5);
      expect(db.prepare('SELECT count(*) AS n FROM changes').get()).to.deep.equal({ n: 2 });
    } finally {
      db.close();
    }

    const second = await start();
    for (const cursor of [beforeAll, afterFirst]) {
      const expired = await second.api.get(`${changes}?cursor=${cursor}`);
      expect(problemOf(expired)).to.deep.equal({ status: 410, code: 'CURSOR_EXPIRED' });
      const stream = await EventStreamClient.open(`${second.service.baseUrl}${changes}`, { 'last-event-id': cursor ?? '' });
      streams.push(stream);
      expect(stream.status).to.equal(410);
      expect(JSON.parse(stream.body)).to.include({ code: 'CURSOR_EXPIRED' });
    }
    const kept = await second.api.get(`${changes}?cursor=${afterSecond}&wait=5`);
    expect(kept.status).to.equal(200);
    expect((kept.body.changes as Array<{ key: string }>).map((change) => change.key)).to.deep.equal(['k3', 'k4']);
  });
});
