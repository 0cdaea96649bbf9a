import { expect } from 'chai';
import { EventStreamClient } from '../support/event-stream-client.ts';
import { type Sample, parseSamples, sampleValue } from '../support/prometheus.ts';
import { useTestApp } from '../support/test-app.ts';
import { createTable, v2Paths } from '../support/v2.ts';

const CHANGES = 5;

/** The feed metrics' values on /metrics while feeds are open, after they delivered changes, and once they closed. */
describe('v2 change feeds: their metrics', () => {
  const app = useTestApp();
  const streams: EventStreamClient[] = [];
  const scrape = async (): Promise<Sample[]> => {
    const response = await app().api.get('/metrics');
    expect(response.status).to.equal(200);
    return parseSamples(response.body as string);
  };
  /** Each feed metric of the store, 0 for one without a sample yet. */
  const feedMetrics = async () => {
    const samples = await scrape();
    const store = { store: app().storeName };
    const value = (name: string, labels: Record<string, string> = {}) => sampleValue(samples, name, { ...store, ...labels }) ?? 0;
    return {
      open: value('kvcrud_feeds_open'),
      delivered: value('kvcrud_feed_changes_delivered_total'),
      lagCount: value('kvcrud_feed_lag_seconds_count'),
      lagSum: value('kvcrud_feed_lag_seconds_sum'),
      lagWithin10s: value('kvcrud_feed_lag_seconds_bucket', { le: '10' }),
      clientGone: value('kvcrud_feeds_ended_total', { reason: 'CLIENT_GONE' }),
    };
  };
  const until = async (ready: () => Promise<boolean>, what: string) => {
    const deadline = Date.now() + 10_000;
    while (!(await ready())) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  };

  before(async function () {
    if (!app().store.capabilities.changeFeed) this.skip();
    await createTable(app(), 'metered');
  });
  after(async () => {
    await Promise.all(streams.splice(0).map((stream) => stream.close()));
  });

  it('counts the feeds open, the changes each delivered with their lag, and the feeds their readers left', async () => {
    const before = await feedMetrics();
    const url = `${app().baseUrl}${v2Paths(app()).table('metered')}/changes`;
    const all = await EventStreamClient.open(url);
    // This one follows other keys: what it skips is not delivered.
    const other = await EventStreamClient.open(`${url}?prefix=other`);
    streams.push(all, other);
    for (const stream of [all, other]) await stream.until((client) => client.lastEventId !== '', 'the start of the feed');
    expect((await feedMetrics()).open - before.open, 'open').to.equal(2);

    const writtenAt = Date.now();
    for (let i = 0; i < CHANGES; i += 1) {
      const response = await app().api.request('PUT', `${v2Paths(app()).row('metered', `k${i}`)}`, { json: { cells: [{ family: 'cf', column: 'c', value: String(i) }] } });
      expect(response.status).to.equal(200);
    }
    await all.until((client) => client.changes.length >= CHANGES, `${CHANGES} changes`);
    const after = await feedMetrics();
    const elapsedSeconds = (Date.now() - writtenAt) / 1000;
    expect(other.changes).to.deep.equal([]);
    expect(after.delivered - before.delivered, 'delivered').to.equal(CHANGES);
    expect(after.lagCount - before.lagCount, 'lag observations').to.equal(CHANGES);
    expect(after.lagWithin10s - before.lagWithin10s, 'lags within 10 s').to.equal(CHANGES);
    // Each lag is from its commit to its delivery: never negative, never more than the whole run.
    expect(after.lagSum - before.lagSum, 'lag sum').to.be.within(0, CHANGES * elapsedSeconds);
    expect(after.open - before.open, 'still open').to.equal(2);

    await all.close();
    await until(async () => (await feedMetrics()).open - before.open === 1, 'one feed open');
    await other.close();
    await until(async () => (await feedMetrics()).open - before.open === 0, 'no feed open');
    const closed = await feedMetrics();
    expect(closed.clientGone - before.clientGone, 'ended CLIENT_GONE').to.equal(2);
    expect(closed.delivered - before.delivered, 'delivered, after they closed').to.equal(CHANGES);
  });
});
