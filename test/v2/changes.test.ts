import { spawn } from 'node:child_process';
import { expect } from 'chai';
import type { ApiResponse } from '../support/api-client.ts';
import { AnswerBudget } from '../../src/service/answer-budget.ts';
import { EventStreamClient } from '../support/event-stream-client.ts';
import { useTestApp } from '../support/test-app.ts';
import { createTable, problemOf, publishing, v2Paths } from '../support/v2.ts';

const set = (column: string, value: string, family = 'cf') => ({ set: { family, column, value } });

/** A change's key and its mutations as `set family:column=value`, `deleteRow`, …, for short comparisons. */
function brief(change: Record<string, unknown>): string {
  const mutations = (change['mutations'] as Array<Record<string, Record<string, string>>>).map((mutation) => {
    const [kind, body] = Object.entries(mutation)[0] as [string, Record<string, string>];
    if (kind === 'set') return `set ${body['family']}:${body['column']}=${body['value']}`;
    if (kind === 'deleteColumn') return `deleteColumn ${body['family']}:${body['column']}`;
    if (kind === 'deleteFamily') return `deleteFamily ${body['family']}`;
    return kind;
  });
  return `${String(change['key'])}: ${mutations.join('; ')}`;
}

/** How many requests the app counted as shed by `limit` (kvcrud_http_requests_shed_total). */
async function shedCount(baseUrl: string, limit: string): Promise<number> {
  const metrics = await (await fetch(new URL('/metrics', baseUrl))).text();
  return Number(new RegExp(`^kvcrud_http_requests_shed_total\\{limit="${limit}"\\} (\\d+)$`, 'm').exec(metrics)?.[1] ?? 0);
}

describe('v2 change feeds', () => {
  const app = useTestApp({ feeds: { max: 20, perCaller: 8 } });
  const paths = () => v2Paths(app());
  const changesUrl = (table: string, query = '') => `${app().baseUrl}${paths().table(table)}/changes${query}`;
  const write = (table: string, key: string, ...cells: Array<ReturnType<typeof set>>) =>
    app().api.post(`${paths().row(table, key)}:mutate`, { mutations: cells });
  const streams: EventStreamClient[] = [];
  const follow = async (table: string, query = '', headers: Record<string, string> = {}) => {
    const client = await EventStreamClient.open(changesUrl(table, query), headers);
    streams.push(client);
    return client;
  };

  before(async function () {
    if (!app().store.capabilities.changeFeed) this.skip();
    await createTable(app(), 'feed', [{ name: 'cf' }, { name: 'meta' }]);
  });

  afterEach(async () => {
    await Promise.all(streams.splice(0).map((stream) => stream.close()));
  });

  it('streams each change committed after it starts as an SSE event, its id the cursor after it', async () => {
    await write('feed', 'before', set('a', 'not seen'));
    const stream = await follow('feed');
    expect([stream.status, stream.contentType]).to.deep.equal([200, 'text/event-stream; charset=utf-8']);
    await stream.until((client) => client.heartbeats.length > 0, 'the start');
    const start = stream.lastEventId;
    expect(start).to.match(/^[A-Za-z0-9_-]+$/);
    await write('feed', 'k1', set('a', '1'), set('b', '2', 'meta'));
    await app().api.request('DELETE', paths().row('feed', 'k1'));
    await stream.until((client) => client.changes.length >= 2, 'two changes');
    expect(stream.changes.map(brief)).to.deep.equal(['k1: set cf:a=1; set meta:b=2', 'k1: deleteRow']);
    const [first] = stream.changes;
    expect(first?.['timestamp']).to.match(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/);
    expect(stream.events.map((event) => event.event)).to.deep.equal(['change', 'change']);
    expect(new Set([start, ...stream.events.map((event) => event.id)]).size).to.equal(3);
  });

  it('resumes with Last-Event-ID or ?cursor= after a disconnect: nothing missed, nothing again', async () => {
    const first = await follow('feed', '?prefix=resume');
    await first.until((client) => client.heartbeats.length > 0, 'the start');
    for (let i = 0; i < 5; i += 1) await write('feed', `resume${i}`, set('n', String(i)));
    await first.until((client) => client.changes.length >= 5, 'five changes');
    const cut = first.events[2]?.id ?? '';
    await first.close();
    for (let i = 5; i < 8; i += 1) await write('feed', `resume${i}`, set('n', String(i)));
    const byHeader = await follow('feed', '?prefix=resume', { 'last-event-id': cut });
    const byQuery = await follow('feed', `?prefix=resume&cursor=${cut}`);
    const expected = [3, 4, 5, 6, 7].map((i) => `resume${i}: set cf:n=${i}`);
    for (const stream of [byHeader, byQuery]) {
      await stream.until((client) => client.changes.length >= 5, 'the rest');
      expect(stream.changes.map(brief)).to.deep.equal(expected);
    }
  });

  it('long-polls as JSON: {changes, cursor}, resumable with the cursor', async () => {
    const started = await app().api.get(`${paths().table('feed')}/changes?prefix=poll`);
    expect(started.status).to.equal(200);
    expect(started.body.changes).to.deep.equal([]);
    const cursor = started.body.cursor as string;
    await write('feed', 'poll1', set('x', '1'));
    await write('feed', 'poll2', set('x', '2'));
    const polled = await app().api.get(`${paths().table('feed')}/changes?prefix=poll&wait=5&cursor=${cursor}`);
    expect(polled.status).to.equal(200);
    const seen = (polled.body.changes as Array<Record<string, unknown>>).map(brief);
    expect(seen.length).to.be.greaterThan(0);
    expect(['poll1: set cf:x=1', 'poll2: set cf:x=2'].slice(0, seen.length)).to.deep.equal(seen);
    const rest = await app().api.get(`${paths().table('feed')}/changes?prefix=poll&wait=5&cursor=${polled.body.cursor as string}`);
    expect([...seen, ...(rest.body.changes as Array<Record<string, unknown>>).map(brief)]).to.deep.equal(['poll1: set cf:x=1', 'poll2: set cf:x=2']);
    const idle = await app().api.get(`${paths().table('feed')}/changes?prefix=poll&wait=1&cursor=${rest.body.cursor as string}`);
    expect(idle.body.changes).to.deep.equal([]);
  });

  it('follows only the keys and columns asked for; a row delete always', async () => {
    const stream = await follow('feed', '?prefix=f&columns=meta,cf:b');
    await stream.until((client) => client.heartbeats.length > 0, 'the start');
    await write('feed', 'other', set('b', 'no'));
    await write('feed', 'f1', set('a', 'no'), set('b', 'yes'), set('m', 'yes', 'meta'));
    await write('feed', 'f2', set('a', 'no'));
    await app().api.request('DELETE', paths().row('feed', 'f2'));
    await stream.until((client) => client.changes.length >= 2, 'two changes');
    expect(stream.changes.map(brief)).to.deep.equal(['f1: set cf:b=yes; set meta:m=yes', 'f2: deleteRow']);
  });

  it('refuses a cursor of another table, an altered one, and since with cursor, with 400; a start older than the retention with 410', async () => {
    await createTable(app(), 'other-feed');
    const other = await app().api.get(`${paths().table('other-feed')}/changes`);
    const cursor = other.body.cursor as string;
    const refused = await app().api.get(`${paths().table('feed')}/changes?cursor=${cursor}`);
    expect(problemOf(refused)).to.deep.equal({ status: 400, code: 'INVALID_CURSOR' });
    const altered = `${cursor.slice(0, -2)}${cursor.endsWith('AA') ? 'BB' : 'AA'}`;
    expect(problemOf(await app().api.get(`${paths().table('other-feed')}/changes?cursor=${altered}`))).to.deep.equal({ status: 400, code: 'INVALID_CURSOR' });
    const header = await follow('feed', '', { 'last-event-id': cursor });
    expect(header.status).to.equal(400);
    expect(JSON.parse(header.body)).to.include({ code: 'INVALID_CURSOR' });
    const both = await app().api.get(`${paths().table('feed')}/changes?cursor=${cursor}&since=2026-01-01T00:00:00Z`);
    expect(problemOf(both)).to.deep.equal({ status: 400, code: 'VALIDATION_FAILED' });
    const old = await app().api.get(`${paths().table('feed')}/changes?since=1971-01-01T00:00:00Z`);
    expect(problemOf(old)).to.deep.equal({ status: 410, code: 'CURSOR_EXPIRED' });
  });

  it('answers 404 for a missing table, and ends a table\'s feeds with an end event when it is deleted', async () => {
    expect(problemOf(await app().api.get(`${paths().table('no-such')}/changes`))).to.deep.equal({ status: 404, code: 'TABLE_NOT_FOUND' });
    await createTable(app(), 'doomed');
    const stream = await follow('doomed');
    await stream.until((client) => client.heartbeats.length > 0, 'the start');
    await write('doomed', 'last', set('a', '1'));
    await stream.until((client) => client.changes.length >= 1, 'the change');
    await app().api.request('DELETE', paths().table('doomed'));
    await stream.until((client) => client.ended, 'the end of the stream');
    const end = stream.events.at(-1);
    expect(end?.event).to.equal('end');
    expect(JSON.parse(end?.data ?? '{}')).to.include({ reason: 'TABLE_DELETED' });
  });

  it('caps the feeds one caller has open with 429 RATE_LIMITED, counted as shed by feeds_per_caller, and frees a slot when a feed closes', async () => {
    const shedBefore = await shedCount(app().baseUrl, 'feeds_per_caller');
    const open: EventStreamClient[] = [];
    for (let i = 0; i < 8; i += 1) open.push(await follow('feed'));
    expect(open.map((stream) => stream.status)).to.deep.equal(open.map(() => 200));
    const refused = await follow('feed');
    expect(refused.status).to.equal(429);
    expect(JSON.parse(refused.body)).to.include({ code: 'RATE_LIMITED' });
    // A long poll is a feed too, refused alike, with the problem document and its Retry-After.
    const polled = await app().api.get(`${paths().table('feed')}/changes`);
    expect(problemOf(polled)).to.deep.equal({ status: 429, code: 'RATE_LIMITED' });
    expect(polled.headers.get('retry-after')).to.match(/^[1-9]\d*$/);
    let refusals = 2;
    await open[0]?.close();
    // The service sees the disconnect, then frees the slot.
    const until = Date.now() + 10_000;
    let again = await follow('feed');
    while (again.status !== 200 && Date.now() < until) {
      expect(again.status).to.equal(429);
      refusals += 1;
      await new Promise((resolve) => setTimeout(resolve, 100));
      again = await follow('feed');
    }
    expect(again.status).to.equal(200);
    // Each refusal is counted once, by the bound that refused it, and nothing else is.
    expect((await shedCount(app().baseUrl, 'feeds_per_caller')) - shedBefore).to.equal(refusals);
    expect(await shedCount(app().baseUrl, 'feeds')).to.equal(0);
  });

  it('is followed by curl -N, as the README shows', async function () {
    this.timeout(30_000);
    const curl = spawn('curl', ['-sN', '-H', 'Accept: text/event-stream', changesUrl('feed', '?prefix=curl')]);
    let output = '';
    curl.stdout.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
    try {
      const until = Date.now() + 10_000;
      while (!output.includes('\n\n') && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 20));
      await write('feed', 'curl1', set('hello', 'world'));
      while (!output.includes('event: change') && Date.now() < until + 5000) await new Promise((resolve) => setTimeout(resolve, 20));
      expect(output).to.match(/id: [A-Za-z0-9_-]+\nevent: change\ndata: \{"key":"curl1","timestamp":"[^"]+","mutations":\[\{"set":\{"family":"cf","column":"hello","value":"world","timestamp":"[^"]+"\}\}\]\}\n\n/);
    } finally {
      curl.kill();
    }
  });

  it('ends open feeds with SHUTTING_DOWN and their cursors when the service drains', async () => {
    const stream = await follow('feed');
    await stream.until((client) => client.heartbeats.length > 0, 'the start');
    app().drain.start();
    await stream.until((client) => client.ended, 'the end of the stream', 5000);
    const end = stream.events.at(-1);
    expect(end?.event).to.equal('end');
    const data = JSON.parse(end?.data ?? '{}') as Record<string, unknown>;
    expect(data['reason']).to.equal('SHUTTING_DOWN');
    expect(data['cursor']).to.equal(end?.id);
  });
});

describe('v2 change feeds: the bytes of a long poll\'s answer', () => {
  /** A change's key and the length of its value, for comparisons that do not print megabytes. */
  const sized = (change: Record<string, unknown>) => {
    const [mutation] = change['mutations'] as Array<{ set: { value: string } }>;
    return `${String(change['key'])}:${mutation?.set.value.length ?? 0}`;
  };

  describe('at pageBytes', () => {
    const app = useTestApp({ maxBodyBytes: 8 * 1024 * 1024 });
    const paths = () => v2Paths(app());

    before(async function () {
      if (!app().store.capabilities.changeFeed) this.skip();
      await createTable(app(), 'tall');
    });

    it('ends before the change that would take it past pageBytes, and the next poll from its cursor has the rest', async function () {
      this.timeout(120_000);
      const value = 'v'.repeat(1024 * 1024);
      const start = await app().api.get(`${paths().table('tall')}/changes`);
      const pageBytes = (await app().api.get('/v2/stores')).body.stores[0].limits.pageBytes as number;
      expect(pageBytes).to.equal(16 * 1024 * 1024);
      const keys = Array.from({ length: 20 }, (_, index) => `t${String(index).padStart(2, '0')}`);
      for (const key of keys) {
        const written = await app().api.post(`${paths().row('tall', key)}:mutate`, { mutations: [{ set: { family: 'cf', column: 'c', value } }] });
        expect(written.status).to.equal(200);
      }
      const answers: string[][] = [];
      let cursor = start.body.cursor as string;
      while (answers.flat().length < keys.length && answers.length < 25) {
        const polled = await app().api.get(`${paths().table('tall')}/changes?wait=5&cursor=${cursor}`);
        expect(polled.status).to.equal(200);
        answers.push((polled.body.changes as Array<Record<string, unknown>>).map(sized));
        cursor = polled.body.cursor as string;
      }
      // Every change once, in order, and no answer past pageBytes: 15 such changes (with their
      // keys and columns) fit in 16 MiB, 16 do not. (An answer may hold fewer: it stops gathering
      // when the next change is slow to come.)
      expect(answers.flat()).to.deep.equal(keys.map((key) => `${key}:${value.length}`));
      expect(answers.map((answer) => answer.length).every((count) => count <= 15), JSON.stringify(answers.map((answer) => answer.length))).to.equal(true);
      const after = await app().api.get(`${paths().table('tall')}/changes?wait=1&cursor=${cursor}`);
      expect(after.body.changes).to.deep.equal([]);
    });
  });

  describe('within the answer budget', () => {
    // Room for about one change of the test's at a time.
    const budget = new AnswerBudget(700 * 1024);
    const app = useTestApp({ answerBudget: budget });
    const paths = () => v2Paths(app());

    before(async function () {
      if (!app().store.capabilities.changeFeed) this.skip();
      await createTable(app(), 'held');
    });

    it('takes each change from the budget as scan pages do: it ends at the first the budget has no room for, and gives all back once written', async () => {
      const value = 'w'.repeat(512 * 1024);
      const start = await app().api.get(`${paths().table('held')}/changes`);
      const keys = ['h0', 'h1', 'h2'];
      for (const key of keys) await app().api.post(`${paths().row('held', key)}:mutate`, { mutations: [{ set: { family: 'cf', column: 'c', value } }] });
      const answers: string[][] = [];
      let cursor = start.body.cursor as string;
      while (answers.flat().length < keys.length && answers.length < 10) {
        const polled = await app().api.get(`${paths().table('held')}/changes?wait=5&cursor=${cursor}`);
        answers.push((polled.body.changes as Array<Record<string, unknown>>).map(sized));
        cursor = polled.body.cursor as string;
        // Given back once the answer was written.
        const until = Date.now() + 5000;
        while (budget.inUse !== 0 && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 10));
        expect(budget.inUse).to.equal(0);
      }
      // Each answer holds its first change whatever the budget holds, and no more: the next has no room.
      expect(answers).to.deep.equal(keys.map((key) => [`${key}:${value.length}`]));
    });
  });
});

describe('v2 change feeds and the bound on feeds open in all', () => {
  // Each caller may open more than the service takes in all: FEEDS_MAX refuses first.
  const app = useTestApp({ feeds: { max: 3, perCaller: 10 } });
  const paths = () => v2Paths(app());
  const changesUrl = () => `${app().baseUrl}${paths().table('capped')}/changes`;
  const streams: EventStreamClient[] = [];

  before(async function () {
    if (!app().store.capabilities.changeFeed) this.skip();
    await createTable(app(), 'capped');
  });

  afterEach(async () => {
    await Promise.all(streams.splice(0).map((stream) => stream.close()));
  });

  it('refuses a feed beyond FEEDS_MAX with 503 OVERLOADED and Retry-After, SSE or long poll, and takes one again once a feed closes', async () => {
    for (let i = 0; i < 3; i += 1) streams.push(await EventStreamClient.open(changesUrl()));
    expect(streams.map((stream) => stream.status)).to.deep.equal([200, 200, 200]);
    const refused = await EventStreamClient.open(changesUrl());
    expect(refused.status).to.equal(503);
    expect(JSON.parse(refused.body)).to.include({ code: 'OVERLOADED', status: 503 });
    const polled = await app().api.get(`${paths().table('capped')}/changes`);
    expect(problemOf(polled)).to.deep.equal({ status: 503, code: 'OVERLOADED' });
    expect(polled.headers.get('retry-after')).to.match(/^[1-9]\d*$/);
    expect(String(polled.body.detail)).to.contain('feeds');
    // Both refusals counted as shed by the global bound, none by the caller's.
    expect(await shedCount(app().baseUrl, 'feeds')).to.equal(2);
    expect(await shedCount(app().baseUrl, 'feeds_per_caller')).to.equal(0);
    // Not a want of memory for answers.
    expect(String((await app().api.get('/metrics')).body)).not.to.match(/kvcrud_http_requests_shed_total\{limit="answer_bytes"\}/);
    // Other requests are served all the while.
    expect((await app().api.get(paths().table('capped'))).status).to.equal(200);
    await streams.shift()?.close();
    // The service sees the disconnect, then frees the slot.
    const until = Date.now() + 10_000;
    let again = await app().api.get(`${paths().table('capped')}/changes`);
    while (again.status !== 200 && Date.now() < until) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      again = await app().api.get(`${paths().table('capped')}/changes`);
    }
    expect(again.status).to.equal(200);
  });
});

describe('v2 change feeds and the request slots', () => {
  // Fewer request slots than the feeds the tests hold open: a feed that held one would starve the reads.
  const app = useTestApp({ maxInflight: 2, feeds: { max: 20, perCaller: 20 } });
  const paths = () => v2Paths(app());
  const streams: EventStreamClient[] = [];

  /** The feeds the service has open, as its metrics say. */
  const feedsOpen = async (): Promise<number> => {
    const metrics = await app().api.get('/metrics');
    const sample = /^kvcrud_feeds_open\{[^}]*\} (\d+)$/m.exec(String(metrics.body));
    return Number(sample?.[1] ?? 0);
  };
  const untilFeedsOpen = async (count: number) => {
    const until = Date.now() + 10_000;
    while ((await feedsOpen()) !== count) {
      if (Date.now() > until) throw new Error(`timed out waiting for ${count} open feeds; ${await feedsOpen()} are`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  };
  /** Reads one after the other, so that they never need more than one slot at once. */
  const reads = async (count: number) => {
    const statuses: number[] = [];
    for (let i = 0; i < count; i += 1) statuses.push((await app().api.get(paths().table('slots'))).status);
    return statuses;
  };

  before(async function () {
    if (!app().store.capabilities.changeFeed) this.skip();
    await createTable(app(), 'slots');
  });

  afterEach(async () => {
    await Promise.all(streams.splice(0).map((stream) => stream.close()));
    await untilFeedsOpen(0);
  });

  it('serves other requests while SSE feeds are open: they hold no request slot', async () => {
    // One after the other: opening a feed takes a slot until its stream has begun.
    for (let i = 0; i < 5; i += 1) streams.push(await EventStreamClient.open(`${app().baseUrl}${paths().table('slots')}/changes`));
    expect(streams.map((stream) => stream.status)).to.deep.equal([200, 200, 200, 200, 200]);
    await untilFeedsOpen(5);
    expect(await reads(10)).to.deep.equal(Array.from({ length: 10 }, () => 200));
  });

  it('serves other requests while long polls wait: a waiting long poll holds no request slot', async () => {
    const start = await app().api.get(`${paths().table('slots')}/changes`);
    const cursor = start.body.cursor as string;
    const waiting: Array<Promise<ApiResponse>> = [];
    for (let i = 0; i < 4; i += 1) {
      waiting.push(app().api.get(`${paths().table('slots')}/changes?wait=20&cursor=${cursor}`));
      await untilFeedsOpen(i + 1);
    }
    expect(await reads(10)).to.deep.equal(Array.from({ length: 10 }, () => 200));
    const written = await app().api.post(`${paths().row('slots', 'woken')}:mutate`, { mutations: [{ set: { family: 'cf', column: 'c', value: 'v' } }] });
    expect(written.status).to.equal(200);
    const answers = await Promise.all(waiting);
    expect(answers.map((answer) => [answer.status, (answer.body.changes as Array<{ key: string }>).map((change) => change.key)])).to.deep.equal(
      Array.from({ length: 4 }, () => [200, ['woken']]),
    );
  });

  it('closes the feed of a long poll whose client leaves while it waits', async () => {
    const left = new AbortController();
    const poll = fetch(`${app().baseUrl}${paths().table('slots')}/changes?wait=30`, { signal: left.signal }).catch((error: unknown) => error);
    await untilFeedsOpen(1);
    left.abort();
    await poll;
    await untilFeedsOpen(0);
  });
});

describe('v2 change feeds on a store without them', () => {
  const app = useTestApp({ wrapStore: (store) => publishing(store, { capabilities: { changeFeed: false } }) });

  it('answers 501 NOT_SUPPORTED_BY_STORE naming changeFeed', async () => {
    await createTable(app(), 'plain');
    expect(problemOf(await app().api.get(`${v2Paths(app()).table('plain')}/changes`))).to.deep.equal({ status: 501, code: 'NOT_SUPPORTED_BY_STORE', capability: 'changeFeed' });
  });
});
