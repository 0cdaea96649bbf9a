import { expect } from 'chai';
import { decodeCursor, encodeCursor } from '../../../src/service/feed-cursors.ts';
import { SPANNER_LIMITS } from '../../../src/store/spanner/limits.ts';
import { decodePosition, encodePosition } from '../../../src/store/spanner/change-feed.ts';
import { EventStreamClient } from '../../support/event-stream-client.ts';
import { harness as spanner } from '../../support/harnesses/spanner.ts';
import { useTestApp } from '../../support/test-app.ts';
import { createTable, problemOf, v2Paths } from '../../support/v2.ts';

/**
 * An expired position of the Spanner store, over HTTP, on the emulator. A Spanner position is the
 * table's id and a commit timestamp (`s1.<table_id>.<nanos>`); the change stream keeps a day. A
 * test cannot wait a day, so it takes a cursor the feed gave and moves its timestamp back by more
 * than the retention, encoded as the service encodes cursors (the cursor's tag is no secret, see
 * feed-cursors.ts): the cursor this table's feed gave a day and an hour earlier.
 */
describe('spanner: a cursor older than the change retention, over HTTP', function () {
  this.timeout(120_000);
  const app = useTestApp({ store: spanner });
  const changes = () => `${v2Paths(app()).table('aged')}/changes`;

  before(async function () {
    this.timeout(120_000);
    await createTable(app(), 'aged');
  });

  it('answers 410 CURSOR_EXPIRED for it, as JSON and to an SSE request, where the cursor it was made from reads on', async () => {
    const started = await app().api.get(changes());
    expect(started.status).to.equal(200);
    const cursor = started.body.cursor as string;
    const target = { store: app().storeName, instance: app().instance, table: 'aged' };
    const position = decodePosition(decodeCursor(target, cursor, 'cursor'));
    if (position === undefined) throw new Error(`not a Spanner position: ${decodeCursor(target, cursor, 'cursor')}`);
    const aged = encodeCursor(target, encodePosition({ ...position, nanos: position.nanos - BigInt(SPANNER_LIMITS.changeRetentionSeconds + 3600) * 1_000_000_000n }));

    expect(problemOf(await app().api.get(`${changes()}?cursor=${aged}`))).to.deep.equal({ status: 410, code: 'CURSOR_EXPIRED' });
    const stream = await EventStreamClient.open(`${app().baseUrl}${changes()}`, { 'last-event-id': aged });
    expect(stream.status).to.equal(410);
    expect(JSON.parse(stream.body)).to.include({ code: 'CURSOR_EXPIRED' });

    expect((await app().api.request('PUT', `${v2Paths(app()).row('aged', 'k')}`, { json: { cells: [{ family: 'cf', column: 'c', value: 'v' }] } })).status).to.equal(200);
    const kept = await app().api.get(`${changes()}?cursor=${cursor}&wait=10`);
    expect(kept.status).to.equal(200);
    expect((kept.body.changes as Array<{ key: string }>).map((change) => change.key)).to.deep.equal(['k']);
  });
});
