import { expect } from 'chai';
import { harness as embeddedHarness } from '../support/harnesses/embedded.ts';
import type { DataStore } from '../../src/store/store.ts';
import { type TestApp, startTestApp, useTestApp } from '../support/test-app.ts';
import { createTable, problemOf, publishing, scanKeys, v2Paths, writeRows } from '../support/v2.ts';

const KEYS = ['a', 'b', 'ba', 'bb', 'c', 'd\u00ff', 'e'];

describe('v2 scans', () => {
  const app = useTestApp();
  const scan = (query: string, table = 'scan') => app().api.get(`${v2Paths(app()).rows(table)}?${query}`);
  const keysOf = (response: { body: { rows: Array<{ key: string }> } }) => response.body.rows.map((row) => row.key);

  before(async () => {
    await createTable(app(), 'scan', [{ name: 'cf' }, { name: 'other' }]);
    await createTable(app(), 'scan2');
    await writeRows(app(), 'scan', KEYS);
    await writeRows(app(), 'scan2', KEYS);
  });

  it('returns rows in key byte order: start inclusive, end exclusive, or a prefix', async () => {
    expect(keysOf(await scan(''))).to.deep.equal(KEYS);
    expect(keysOf(await scan('start=b&end=c'))).to.deep.equal(['b', 'ba', 'bb']);
    expect(keysOf(await scan('start=ba'))).to.deep.equal(['ba', 'bb', 'c', 'd\u00ff', 'e']);
    expect(keysOf(await scan('end=b'))).to.deep.equal(['a']);
    expect(keysOf(await scan('prefix=b'))).to.deep.equal(['b', 'ba', 'bb']);
    expect(keysOf(await scan(`prefix=${encodeURIComponent('d\u00ff')}`))).to.deep.equal(['d\u00ff']);
    expect(keysOf(await scan('start=c&end=b'))).to.deep.equal([]);
  });

  it('refuses a prefix with start or end, and unknown parameters', async () => {
    for (const query of ['prefix=b&start=a', 'prefix=b&end=c', 'order=desc', 'pageSize=0', 'pageSize=x', 'reverse=yes', 'limit=-1']) {
      expect(problemOf(await scan(query)), query).to.deep.equal({ status: 400, code: 'VALIDATION_FAILED' });
    }
  });

  it('scans in reverse, from the largest key below end', async () => {
    expect(keysOf(await scan('reverse=true'))).to.deep.equal([...KEYS].reverse());
    expect(keysOf(await scan('reverse=true&start=b&end=c'))).to.deep.equal(['bb', 'ba', 'b']);
    const { keys, pages } = await scanKeys(app(), 'scan', 'reverse=true&pageSize=3');
    expect(keys).to.deep.equal([...KEYS].reverse());
    expect(pages).to.deep.equal([3, 3, 1]);
  });

  it('pages with tokens, each page resuming where the last ended; limit caps the rows over all pages', async () => {
    const { keys, pages, tokens } = await scanKeys(app(), 'scan', 'pageSize=2');
    expect(keys).to.deep.equal(KEYS);
    expect(pages).to.deep.equal([2, 2, 2, 1]);
    for (const token of tokens) expect(token).to.match(/^[A-Za-z0-9_-]{1,999}$/);
    expect(await scanKeys(app(), 'scan', 'pageSize=2&limit=5')).to.deep.include({ keys: KEYS.slice(0, 5), pages: [2, 2, 1] });
    expect((await scanKeys(app(), 'scan', 'limit=3')).keys).to.deep.equal(KEYS.slice(0, 3));
  });

  it('lets pageSize change between pages', async () => {
    const first = await scan('pageSize=1');
    const rest = await scan(`pageSize=10&pageToken=${first.body.nextPageToken}`);
    expect([...keysOf(first), ...keysOf(rest)]).to.deep.equal(KEYS);
    expect(rest.body).to.not.have.property('nextPageToken');
  });

  it('answers 400 INVALID_PAGE_TOKEN for a token of another table or query, or an altered one', async () => {
    const { body } = await scan('pageSize=2&prefix=b');
    const token = body.nextPageToken as string;
    expect(problemOf(await scan(`pageSize=2&prefix=b&pageToken=${token}`, 'scan2'))).to.deep.equal({ status: 400, code: 'INVALID_PAGE_TOKEN' });
    for (const query of ['pageSize=2&prefix=c', 'pageSize=2', 'pageSize=2&prefix=b&columns=cf', 'pageSize=2&prefix=b&versions=2', 'pageSize=2&prefix=b&reverse=true']) {
      expect(problemOf(await scan(`${query}&pageToken=${token}`)), query).to.deep.equal({ status: 400, code: 'INVALID_PAGE_TOKEN' });
    }
    const altered = `${token.slice(0, -2)}${token.endsWith('AA') ? 'BB' : 'AA'}`;
    expect(problemOf(await scan(`pageSize=2&prefix=b&pageToken=${altered}`))).to.deep.equal({ status: 400, code: 'INVALID_PAGE_TOKEN' });
    expect(problemOf(await scan('pageToken=garbage'))).to.deep.equal({ status: 400, code: 'INVALID_PAGE_TOKEN' });
  });

  it("refuses a pageSize over the store's rowsPerPage, naming the limit", async () => {
    expect(problemOf(await scan('pageSize=1001'))).to.deep.equal({ status: 400, code: 'VALIDATION_FAILED', limit: 'rowsPerPage' });
  });

  it('returns only the columns selected, skipping rows without any', async () => {
    await app().api.request('PUT', v2Paths(app()).row('scan', 'bb'), { json: { cells: [{ family: 'other', column: 'x', value: 'y' }] } });
    const response = await scan('columns=other');
    expect(response.body.rows).to.have.length(1);
    expect(response.body.rows[0]).to.deep.include({ key: 'bb' });
    expect(response.body.rows[0].cells.map((cell: { family: string }) => cell.family)).to.deep.equal(['other']);
  });
});

describe('v2 scans of long keys', () => {
  const app = useTestApp();
  const shared = 'p'.repeat(2000);

  before(async () => {
    await createTable(app(), 'long');
    // 4 KiB keys that differ early, then keys sharing a 2,000-byte prefix, between short ones.
    const distinct = Array.from({ length: 9 }, (_, index) => `k${index}${'x'.repeat(4093)}`);
    const run = Array.from({ length: 6 }, (_, index) => `${shared}${index}`);
    await writeRows(app(), 'long', [...distinct, 'o', ...run, 'z'], () => 'v');
  });

  it('pages through 4 KiB keys with tokens under 1 KiB: the shortest separator, not the key', async () => {
    const { keys, tokens } = await scanKeys(app(), 'long', 'end=l&pageSize=2');
    expect(keys).to.have.length(9);
    expect(keys).to.deep.equal([...keys].sort());
    for (const token of tokens) expect(token.length).to.be.below(64);
  });

  it('keeps tokens short for keys sharing a long prefix when the scan names it', async () => {
    const { keys, pages, tokens } = await scanKeys(app(), 'long', `prefix=${shared}&pageSize=2`);
    expect(keys).to.deep.equal(Array.from({ length: 6 }, (_, index) => `${shared}${index}`));
    expect(pages).to.deep.equal([2, 2, 2]);
    for (const token of tokens) expect(token.length).to.be.below(64);
  });

  it('grows a page past pageSize where consecutive keys share more than a token holds, and returns each row once', async () => {
    const { keys, pages, tokens } = await scanKeys(app(), 'long', 'start=o&pageSize=2');
    expect(keys).to.deep.equal(['o', ...Array.from({ length: 6 }, (_, index) => `${shared}${index}`), 'z']);
    // 'o' and the first of the run; then the run up to its last key, whose separator from 'z' is short.
    expect(pages).to.deep.equal([1, 6, 1]);
    for (const token of tokens) expect(token.length).to.be.at.most(1000);
  });
});

describe('v2 scans where no page can end within rowsPerPage', () => {
  // No store has so few rows per page; a real one is wrapped to publish 3, so that a run of keys
  // sharing a long prefix outgrows what a page may hold.
  const app = useTestApp({ wrapStore: (store) => publishing(store, { limits: { rowsPerPage: 3 } }) });

  it('answers 400 asking for a prefix covering the shared part, and serves the scan that names it', async () => {
    const shared = 'q'.repeat(1500);
    await createTable(app(), 'run');
    await writeRows(app(), 'run', Array.from({ length: 5 }, (_, index) => `${shared}${index}`));
    const refused = await app().api.get(`${v2Paths(app()).rows('run')}?pageSize=2`);
    expect(problemOf(refused)).to.deep.equal({ status: 400, code: 'VALIDATION_FAILED' });
    expect(refused.body.errors[0].path).to.equal('prefix');
    expect((await scanKeys(app(), 'run', `prefix=${shared}&pageSize=2`)).pages).to.deep.equal([2, 2, 1]);
  });
});

describe('v2 scans of large rows', () => {
  const app = useTestApp({ maxBodyBytes: 12 * 1024 * 1024 });

  it('ends a page before the row that would take it past pageBytes (16 MiB)', async function () {
    this.timeout(120_000);
    await createTable(app(), 'big');
    const value = 'v'.repeat(5 * 1024 * 1024);
    for (const key of ['r1', 'r2', 'r3', 'r4', 'r5']) {
      const response = await app().api.request('PUT', v2Paths(app()).row('big', key), { json: { cells: [{ family: 'cf', column: 'c', value }] } });
      expect(response.status).to.equal(200);
    }
    const { keys, pages } = await scanKeys(app(), 'big', 'pageSize=10');
    expect(keys).to.deep.equal(['r1', 'r2', 'r3', 'r4', 'r5']);
    expect(pages).to.deep.equal([3, 2]);
  });
});

describe('v2 scans across two apps on one store', () => {
  let first: TestApp;
  let second: TestApp;

  before(async function () {
    const embedded = await embeddedHarness.make(this);
    const store = await embedded.open(['local']);
    // The second app shares the first's store and leaves closing it to the first.
    const shared = { driver: 'embedded', harness: { ...embedded, open: () => Promise.resolve(store) } };
    first = await startTestApp({ harness: shared, instances: ['local'] });
    second = await startTestApp({ harness: shared, instances: ['local'], wrapStore: (real) => publishing(real, {}) });
    await createTable(first, 'shared');
    await writeRows(first, 'shared', Array.from({ length: 25 }, (_, index) => `row-${String(index).padStart(3, '0')}`));
  });
  after(async () => {
    await second?.close().catch(() => {});
    await first?.close();
  });

  it('resumes on one app a page token the other gave, alternating, each row once in order', async () => {
    const keys: string[] = [];
    let token: string | undefined;
    let turn = 0;
    do {
      const app = turn % 2 === 0 ? first : second;
      const response = await app.api.get(`${v2Paths(app).rows('shared')}?pageSize=4${token === undefined ? '' : `&pageToken=${token}`}`);
      expect(response.status).to.equal(200);
      keys.push(...response.body.rows.map((row: { key: string }) => row.key));
      token = response.body.nextPageToken;
      turn += 1;
    } while (token !== undefined);
    expect(keys).to.deep.equal(Array.from({ length: 25 }, (_, index) => `row-${String(index).padStart(3, '0')}`));
    expect(turn).to.equal(7);
  });
});

describe('v2 scans of large rows', () => {
  let app: TestApp;
  let pulled = 0;

  before(async function () {
    this.timeout(120_000);
    // Counts the rows the service takes from the store's scans.
    const counting = (real: DataStore): DataStore =>
      new Proxy(real, {
        get(target, property, receiver) {
          if (property === 'scanRows') {
            return async function* (...args: Parameters<DataStore['scanRows']>) {
              for await (const row of target.scanRows(...args)) {
                pulled += 1;
                yield row;
              }
            };
          }
          const value: unknown = Reflect.get(target, property, receiver);
          return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
        },
      });
    app = await startTestApp({ harness: { driver: 'embedded', harness: await embeddedHarness.make(this) }, instances: ['local'], wrapStore: counting });
    await createTable(app, 'big');
    const value = 'v'.repeat(5 * 1024 * 1024);
    for (let index = 0; index < 8; index++) {
      const response = await app.api.request('PUT', v2Paths(app).row('big', `r${index}`), { json: { cells: [{ family: 'cf', column: 'c', value }] } });
      expect(response.status).to.equal(200);
    }
  });
  after(() => app?.close());

  it('stops reading the store once a page is full, whatever pageSize asks for', async function () {
    this.timeout(60_000);
    pulled = 0;
    const response = await app.api.get(`${v2Paths(app).rows('big')}?pageSize=1000`);
    expect(response.status).to.equal(200);
    expect((response.body as { rows: unknown[] }).rows).to.have.length(3);
    // Three rows of 5 MiB fit in 16 MiB; the fourth passes it and places the next page's token.
    expect(pulled).to.equal(4);
    const { keys, pages } = await scanKeys(app, 'big', 'pageSize=1000');
    expect(keys).to.deep.equal(['r0', 'r1', 'r2', 'r3', 'r4', 'r5', 'r6', 'r7']);
    expect(pages).to.deep.equal([3, 3, 2]);
  });
});
