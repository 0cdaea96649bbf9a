import { expect } from 'chai';
import { EventStreamClient } from '../support/event-stream-client.ts';
import { useTestApp } from '../support/test-app.ts';
import { createTable, v2Paths } from '../support/v2.ts';

type Mutation = Record<string, Record<string, string>>;
const set = (family: string, column: string, value: string): Mutation => ({ set: { family, column, value } });

/** A change as `key: mutation; mutation`, each as `set f:c=v`, `deleteColumn f:c`, `deleteFamily f` or `deleteRow`. */
function brief(change: Record<string, unknown>): string {
  const mutations = (change['mutations'] as Mutation[]).map((mutation) => {
    const [kind, body] = Object.entries(mutation)[0] as [string, Record<string, string>];
    if (kind === 'set') return `set ${body['family']}:${body['column']}=${body['value']}`;
    if (kind === 'deleteColumn') return `deleteColumn ${body['family']}:${body['column']}`;
    if (kind === 'deleteFamily') return `deleteFamily ${body['family']}`;
    return kind;
  });
  return `${String(change['key'])}: ${mutations.join('; ')}`;
}

/**
 * The filters of `GET …/changes` over HTTP: `start`/`end`, `columns` and a `since` in the past.
 * Each feed ends its test on a last change it follows, written after the others: changes come in
 * commit order on this store, so once it is there every earlier one was delivered or skipped.
 */
describe('v2 change feeds: key ranges, columns and since', () => {
  const app = useTestApp();
  const paths = () => v2Paths(app());
  const streams: EventStreamClient[] = [];
  const follow = async (table: string, query: string) => {
    const stream = await EventStreamClient.open(`${app().baseUrl}${paths().table(table)}/changes${query}`);
    streams.push(stream);
    expect(stream.status, stream.body).to.equal(200);
    await stream.until((client) => client.lastEventId !== '', 'the start of the feed');
    return stream;
  };
  const mutate = async (table: string, key: string, ...mutations: Mutation[]) => {
    const response = await app().api.post(`${paths().row(table, key)}:mutate`, { mutations });
    expect(response.status, JSON.stringify(response.body)).to.equal(200);
  };
  const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

  before(async function () {
    if (!app().store.capabilities.changeFeed) this.skip();
    await createTable(app(), 'ranges');
    await createTable(app(), 'columns', [{ name: 'cf' }, { name: 'meta' }]);
    await createTable(app(), 'since');
  });
  afterEach(async () => {
    await Promise.all(streams.splice(0).map((stream) => stream.close()));
  });

  it('follows the keys from start (inclusive) to end (exclusive), with either bound alone', async () => {
    const between = await follow('ranges', '?start=b&end=d');
    const from = await follow('ranges', '?start=d');
    const before = await follow('ranges', '?end=b');
    for (const key of ['a', 'b', 'bz', 'c', 'd', 'e']) await mutate('ranges', key, set('cf', 'c', key));
    // The last of each feed's range, so that each has seen everything before it.
    await mutate('ranges', 'a0', set('cf', 'c', 'a0'));
    await mutate('ranges', 'cz', set('cf', 'c', 'cz'));
    await mutate('ranges', 'zz', set('cf', 'c', 'zz'));
    await between.until((client) => client.changes.some((change) => change['key'] === 'cz'), 'cz');
    await from.until((client) => client.changes.some((change) => change['key'] === 'zz'), 'zz');
    await before.until((client) => client.changes.some((change) => change['key'] === 'a0'), 'a0');
    expect(between.changes.map((change) => change['key'])).to.deep.equal(['b', 'bz', 'c', 'cz']);
    expect(from.changes.map((change) => change['key'])).to.deep.equal(['d', 'e', 'zz']);
    expect(before.changes.map((change) => change['key'])).to.deep.equal(['a', 'a0']);
  });

  it('follows the mutations of the columns and families asked for: a family\'s delete with them, a row delete always', async () => {
    const oneColumn = await follow('columns', '?columns=cf:b');
    const family = await follow('columns', '?columns=meta');
    await mutate('columns', 'k1', set('cf', 'a', '1'), set('cf', 'b', '2'), set('meta', 'm', '3'));
    await mutate('columns', 'k2', { deleteColumn: { family: 'cf', column: 'a' } });
    await mutate('columns', 'k3', { deleteColumn: { family: 'cf', column: 'b' } }, { deleteColumn: { family: 'meta', column: 'm' } });
    await mutate('columns', 'k4', { deleteFamily: { family: 'cf' } });
    await mutate('columns', 'k5', { deleteFamily: { family: 'meta' } });
    await app().api.request('DELETE', paths().row('columns', 'k1'));
    await oneColumn.until((client) => client.changes.length >= 4, 'four changes');
    await family.until((client) => client.changes.length >= 4, 'four changes');
    expect(oneColumn.changes.map(brief)).to.deep.equal(['k1: set cf:b=2', 'k3: deleteColumn cf:b', 'k4: deleteFamily cf', 'k1: deleteRow']);
    expect(family.changes.map(brief)).to.deep.equal(['k1: set meta:m=3', 'k3: deleteColumn meta:m', 'k5: deleteFamily meta', 'k1: deleteRow']);
  });

  it('starts at a since in the past: the changes committed at or after it, none before, then the new ones', async () => {
    const watch = await follow('since', '');
    for (const key of ['old', 'mid1', 'mid2']) {
      await mutate('since', key, set('cf', 'c', key));
      // Commit times are kept at millisecond granularity: one millisecond and more between the changes.
      await sleep(20);
    }
    await watch.until((client) => client.changes.length >= 3, 'three changes');
    const committed = new Map(watch.changes.map((change) => [change['key'], change['timestamp'] as string]));
    const since = committed.get('mid1') ?? '';
    expect(since).to.match(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/);

    const resumed = await follow('since', `?since=${since}`);
    await resumed.until((client) => client.changes.length >= 2, 'the changes since');
    await mutate('since', 'new', set('cf', 'c', 'new'));
    await resumed.until((client) => client.changes.length >= 3, 'the new change');
    expect(resumed.changes.map((change) => change['key'])).to.deep.equal(['mid1', 'mid2', 'new']);

    // The same as a long poll.
    const polled = await app().api.get(`${paths().table('since')}/changes?since=${since}&wait=5`);
    expect(polled.status).to.equal(200);
    expect((polled.body.changes as Array<Record<string, unknown>>).map((change) => change['key'])).to.deep.equal(['mid1', 'mid2', 'new']);
    // A microsecond after mid1's commit: mid1 is before it.
    const after = `${since.slice(0, -2)}${Number(since.at(-2)) + 1}Z`;
    const later = await app().api.get(`${paths().table('since')}/changes?since=${after}&wait=5`);
    expect((later.body.changes as Array<Record<string, unknown>>).map((change) => change['key'])).to.deep.equal(['mid2', 'new']);
  });
});
