import { expect } from 'chai';
import { AnswerBudget, type AnswerHold } from '../../src/service/answer-budget.ts';
import { StoreError } from '../../src/store/errors.ts';
import type { DataStore } from '../../src/store/store.ts';
import { harness as embeddedHarness } from '../support/harnesses/embedded.ts';
import { type TestApp, startTestApp } from '../support/test-app.ts';
import { createTable, problemOf, v2Paths, writeRows } from '../support/v2.ts';

const KEYS = Array.from({ length: 12 }, (_, index) => `row-${String(index).padStart(2, '0')}`);
const VALUE = 'v'.repeat(64 * 1024);
/** What the budget counts for each row: its key, its one column `c` and its value. */
const ROW_BYTES = 'row-00'.length + 1 + VALUE.length;

const SMALL_KEYS = ['small-0', 'small-1', 'small-2', 'small-3'];

const turn = () => new Promise(setImmediate);

/** The service's budget, recording the bytes each answer settled for once it had read its rows. */
class RecordingBudget extends AnswerBudget {
  readonly settled: number[] = [];

  override hold<Owner>(firstUse?: (hold: AnswerHold, owner: Owner) => void, owner?: Owner): AnswerHold {
    const hold = super.hold(firstUse, owner);
    const settle = hold.settle.bind(hold);
    hold.settle = async (bytes) => {
      const granted = await settle(bytes);
      if (granted) this.settled.push(bytes);
      return granted;
    };
    return hold;
  }
}

/** Resolves once `check` holds, polling; fails after `timeoutMs`. */
async function until(check: () => boolean, what: string, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

describe('v2 answers within the answer budget', () => {
  // Three rows at once; a batchGet waits at most 300 ms to be admitted.
  const budget = new RecordingBudget(3 * ROW_BYTES, 300);
  let app: TestApp;
  /** Called before the store yields each row of a scan (its index in that scan), when set. */
  let beforeRow: ((index: number) => Promise<void>) | undefined;
  /** Calls of the store's readRows (batchGet) so far. */
  let rowReads = 0;
  /** Awaited before the store reads a batchGet's rows, when set. */
  let beforeRead: (() => Promise<void>) | undefined;

  before(async function () {
    const hooked = (real: DataStore): DataStore =>
      new Proxy(real, {
        get(target, property, receiver) {
          if (property === 'scanRows') {
            return async function* (...args: Parameters<DataStore['scanRows']>) {
              let index = 0;
              for await (const row of target.scanRows(...args)) {
                await beforeRow?.(index++);
                yield row;
              }
            };
          }
          if (property === 'readRows') {
            return async (...args: Parameters<DataStore['readRows']>) => {
              rowReads += 1;
              await beforeRead?.();
              return target.readRows(...args);
            };
          }
          const value: unknown = Reflect.get(target, property, receiver);
          return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
        },
      });
    app = await startTestApp({ harness: { driver: 'embedded', harness: await embeddedHarness.make(this) }, instances: ['local'], wrapStore: hooked, answerBudget: budget });
    await createTable(app, 'wide');
    await writeRows(app, 'wide', KEYS, () => VALUE);
    // Small rows, and one row as large as those of 'wide'.
    await createTable(app, 'mixed');
    await writeRows(app, 'mixed', [...SMALL_KEYS, 'large'], (key) => (key === 'large' ? VALUE : key));
  });
  afterEach(() => {
    beforeRow = undefined;
    beforeRead = undefined;
  });

  /** Waits until nothing more is read within 100 ms, and answers the reads made since `reads`. */
  async function readsSince(reads: number): Promise<number> {
    await new Promise((resolve) => setTimeout(resolve, 100));
    return rowReads - reads;
  }

  /**
   * Sends `request` while `spent` bytes of the budget are held elsewhere; answers the reads it made
   * meanwhile and whether it had answered, then, once those bytes are given back, its response.
   */
  async function whileHeld<T>(spent: number, request: () => Promise<T>): Promise<{ reads: number; answered: boolean; response: T }> {
    const hog = budget.hold();
    hog.take(spent);
    const before = rowReads;
    let answered = false;
    const response = request().finally(() => (answered = true));
    let reads: number;
    try {
      reads = await readsSince(before);
    } finally {
      hog.release();
    }
    const wasAnswered = answered;
    return { reads, answered: wasAnswered, response: await response };
  }
  after(() => app?.close());

  const scan = (token?: string) => app.api.get(`${v2Paths(app).rows('wide')}?pageSize=100${token === undefined ? '' : `&pageToken=${token}`}`);
  const keysOf = (response: { body: { rows: Array<{ key: string }> } }) => response.body.rows.map((row) => row.key);

  /** Follows a scan's tokens from `first` to its end: its keys, and the sizes of its pages. */
  async function follow(first: Awaited<ReturnType<typeof scan>>): Promise<{ keys: string[]; pages: number[] }> {
    const keys: string[] = [];
    const pages: number[] = [];
    let response = first;
    for (;;) {
      expect(response.status, JSON.stringify(response.body)).to.equal(200);
      keys.push(...keysOf(response));
      pages.push(response.body.rows.length);
      const token = response.body.nextPageToken as string | undefined;
      if (token === undefined) return { keys, pages };
      response = await scan(token);
    }
  }

  // First: no read of a row has been answered yet, so nothing is known of any answer's size.
  it('lets the first get since the service started read first, and the others read together once it is done, even when it failed', async () => {
    let failFirst: () => void = () => {};
    const first = new Promise<void>((_, reject) => (failFirst = () => reject(new StoreError('UNAVAILABLE', 'injected: the store is down'))));
    let openRest: () => void = () => {};
    const rest = new Promise<void>((resolve) => (openRest = resolve));
    let reads = 0;
    beforeRead = () => (++reads === 1 ? first : rest);
    const get = (key: string) => app.api.get(v2Paths(app).row('mixed', key));
    const answers = Promise.all(['small-0', 'small-1', 'small-2'].map(get));
    try {
      await until(() => reads === 1, 'the first get reads');
      await new Promise((resolve) => setTimeout(resolve, 100));
      expect(reads, 'reads while the first is reading').to.equal(1);
      failFirst();
      await until(() => reads === 3, 'the other two read together');
    } finally {
      failFirst();
      openRest();
    }
    // Whichever read first failed; the others were served.
    expect((await answers).map((response) => response.status).sort()).to.deep.equal([200, 200, 503]);
    await until(() => budget.inUse === 0, 'the budget is back to zero');
  });

  it('ends the pages of two scans at once early, with tokens, and following them returns every row once', async () => {
    // Both scans read at once: neither yields a row before the other has started, then they take turns row by row.
    let started = 0;
    let bothStarted: () => void = () => {};
    const together = new Promise<void>((resolve) => (bothStarted = resolve));
    beforeRow = async (index) => {
      if (index === 0 && ++started === 2) bothStarted();
      await together;
      await turn();
    };
    const [first, second] = await Promise.all([scan(), scan()]);
    const pages = [first.body.rows.length, second.body.rows.length];
    expect(first.body.nextPageToken).to.be.a('string');
    expect(second.body.nextPageToken).to.be.a('string');
    // Three rows fit at once, and each page holds at least its first row, whatever the other holds.
    expect(Math.min(...pages)).to.be.at.least(1);
    expect(pages[0] + pages[1]).to.be.at.most(4);

    const [one, two] = await Promise.all([follow(first), follow(second)]);
    expect(one.keys).to.deep.equal(KEYS);
    expect(two.keys).to.deep.equal(KEYS);
    await until(() => budget.inUse === 0, 'the budget is back to zero');
  });

  it('still gives each page one row when the budget is spent, so that a scan always ends', async () => {
    const hog = budget.hold();
    hog.take(budget.limitBytes);
    try {
      const { keys, pages } = await follow(await scan());
      expect(keys).to.deep.equal(KEYS);
      expect(pages).to.deep.equal(KEYS.map(() => 1));
    } finally {
      hog.release();
    }
    await until(() => budget.inUse === 0, 'the budget is back to zero');
  });

  it('gives back what a page took when the request fails', async () => {
    let held = 0;
    beforeRow = (index) => {
      if (index < 2) return Promise.resolve();
      held = budget.inUse;
      return Promise.reject(new StoreError('UNAVAILABLE', 'injected: the store went away mid-scan'));
    };
    expect(problemOf(await scan())).to.deep.equal({ status: 503, code: 'BACKEND_UNAVAILABLE' });
    expect(held).to.equal(2 * ROW_BYTES);
    await until(() => budget.inUse === 0, 'the budget is back to zero');
  });

  it('gives back what a page took when its client leaves, and takes nothing for it after', async () => {
    let resume: () => void = () => {};
    const resumed = new Promise<void>((resolve) => (resume = resolve));
    let after = -1;
    beforeRow = async (index) => {
      if (index !== 2) return;
      await resumed;
      after = budget.inUse;
    };
    const client = new AbortController();
    const request = fetch(new URL(`${v2Paths(app).rows('wide')}?pageSize=100`, app.baseUrl), { signal: client.signal });
    await until(() => budget.inUse === 2 * ROW_BYTES, 'the page holds two rows');
    client.abort();
    await request.catch(() => {});
    await until(() => budget.inUse === 0, 'the budget is back to zero');
    resume();
    await until(() => after !== -1, 'the scan went on reading');
    await turn();
    expect(after).to.equal(0);
    expect(budget.inUse).to.equal(0);
  });

  const batchGet = (count: number) => app.api.post(`${v2Paths(app).rows('wide')}:batchGet`, { keys: KEYS.slice(0, count) });
  const batchGetMissing = () => app.api.post(`${v2Paths(app).rows('wide')}:batchGet`, { keys: ['missing-0', 'missing-1'] });


  it('lets a batchGet wait for room for what it is expected to hold before it reads', async () => {
    // An answer of found rows makes the table's estimate a row's bytes per key.
    expect((await batchGet(1)).status).to.equal(200);
    for (const spent of [budget.limitBytes, budget.limitBytes - ROW_BYTES]) {
      const { reads, answered, response } = await whileHeld(spent, () => batchGet(2));
      expect(reads, `reads with ${spent} bytes held`).to.equal(0);
      expect(answered).to.equal(false);
      const { status, body } = response;
      expect(status).to.equal(200);
      expect(body.rows.map((row: { found: boolean }) => row.found)).to.deep.equal([true, true]);
      await until(() => budget.inUse === 0, 'the budget is back to zero');
    }
  });

  it('refuses a batchGet beyond the store\'s limits at once, without waiting for room', async () => {
    const hog = budget.hold();
    hog.take(budget.limitBytes);
    try {
      const reads = rowReads;
      const started = performance.now();
      const response = await app.api.post(`${v2Paths(app).rows('wide')}:batchGet`, { keys: KEYS.slice(0, 2), columns: [`cf:${'c'.repeat(16 * 1024 + 1)}`] });
      expect(problemOf(response)).to.deep.equal({ status: 400, code: 'VALIDATION_FAILED', limit: 'columnBytes' });
      // The budget's turns last 300 ms here.
      expect(performance.now() - started).to.be.below(250);
      expect(rowReads).to.equal(reads);
    } finally {
      hog.release();
    }
  });

  it('lets batchGets read together while what they are expected to hold fits, and one after another when not', async () => {
    expect((await batchGet(1)).status).to.equal(200);
    // Three rows fit: two answers of one row read at once, two of two rows one after the other.
    for (const [count, together] of [
      [1, 2],
      [2, 1],
    ] as const) {
      let open: () => void = () => {};
      const gate = new Promise<void>((resolve) => (open = resolve));
      beforeRead = () => gate;
      const reads = rowReads;
      const answers = Promise.all([batchGet(count), batchGet(count)]);
      try {
        expect(await readsSince(reads), `batchGets of ${count} rows reading at once`).to.equal(together);
      } finally {
        open();
      }
      for (const { status } of await answers) expect(status).to.equal(200);
      expect(rowReads - reads).to.equal(2);
      await until(() => budget.inUse === 0, 'the budget is back to zero');
    }
  });

  it('lets a batchGet that read more than expected wait for room for all it read, then answers it whole', async () => {
    // Answers of missing keys hold only their keys: each brings the estimate a quarter of the way down to that.
    for (let index = 0; index < 24; index += 1) expect((await batchGetMissing()).status).to.equal(200);
    budget.settled.length = 0;
    // Room for one row: it reads, then waits for room for five.
    const { reads, answered, response } = await whileHeld(budget.limitBytes - ROW_BYTES, () => batchGet(5));
    expect(reads).to.equal(1);
    expect(answered).to.equal(false);
    const { status, body } = response;
    expect(status).to.equal(200);
    expect(body.rows.map((row: { found: boolean }) => row.found)).to.deep.equal([true, true, true, true, true]);
    // More than the budget holds, taken whole once it held nothing else.
    expect(budget.settled).to.deep.equal([5 * ROW_BYTES]);
    await until(() => budget.inUse === 0, 'the budget is back to zero');
  });

  it('refuses a batchGet with 503 OVERLOADED when a turn does not come in time, counting it as shed', async () => {
    for (const spent of [budget.limitBytes, budget.limitBytes - ROW_BYTES]) {
      const hog = budget.hold();
      hog.take(spent);
      try {
        const response = await batchGet(2);
        expect(problemOf(response), `with ${spent} bytes held`).to.deep.equal({ status: 503, code: 'OVERLOADED' });
        expect(response.headers.get('retry-after')).to.equal('1');
        expect(response.headers.get('content-type')).to.match(/^application\/problem\+json/);
      } finally {
        hog.release();
      }
      await until(() => budget.inUse === 0, 'the budget is back to zero');
    }
    const metrics = await (await fetch(new URL('/metrics', app.baseUrl))).text();
    expect(metrics).to.match(/^kvcrud_http_requests_shed_total\{limit="answer_bytes"\} 2$/m);
  });
  const get = (table: string, key: string) => app.api.get(v2Paths(app).row(table, key));
  const readCellData = (table: string, key: string) => app.api.get(`/v1/${app.instance}/readCellData?tableName=${table}&id=${key}`);

  it('lets a get of a row of 64 KiB or more wait for room before it reads, where the table\'s rows are that large', async () => {
    // A large row makes the table's estimate a row's bytes.
    expect((await get('wide', KEYS[0] as string)).status).to.equal(200);
    for (const read of [() => get('wide', KEYS[1] as string), () => readCellData('wide', KEYS[1] as string)]) {
      const { reads, answered, response } = await whileHeld(budget.limitBytes - ROW_BYTES + 1, read);
      expect(reads).to.equal(0);
      expect(answered).to.equal(false);
      expect(response.status).to.equal(200);
      await until(() => budget.inUse === 0, 'the budget is back to zero');
    }
  });

  it('lets a get that finds a large row where small ones were expected wait for room for it, then answers it', async () => {
    for (const key of SMALL_KEYS) expect((await get('mixed', key)).status).to.equal(200);
    budget.settled.length = 0;
    const large = 'large'.length + 1 + VALUE.length;
    // Room for less than the row: it reads, then waits.
    const { reads, answered, response } = await whileHeld(budget.limitBytes - large + 1, () => get('mixed', 'large'));
    expect(reads).to.equal(1);
    expect(answered).to.equal(false);
    const { status, body } = response;
    expect(status).to.equal(200);
    expect(body.cells[0].value).to.have.length(VALUE.length);
    expect(budget.settled).to.deep.equal([large]);
    await until(() => budget.inUse === 0, 'the budget is back to zero');
  });

  it('neither counts nor holds back a get of a small row, even with the budget spent', async () => {
    for (const key of SMALL_KEYS) expect((await get('mixed', key)).status).to.equal(200);
    const hog = budget.hold();
    hog.take(budget.limitBytes);
    try {
      for (const response of await Promise.all([get('mixed', 'small-0'), readCellData('mixed', 'small-1'), get('mixed', 'missing')])) {
        expect(response.status, JSON.stringify(response.body)).to.be.oneOf([200, 404]);
      }
      expect(budget.inUse).to.equal(budget.limitBytes);
    } finally {
      hog.release();
    }
  });

  it('refuses a get of a large row with 503 OVERLOADED when no room comes in time', async () => {
    expect((await get('wide', KEYS[0] as string)).status).to.equal(200);
    const hog = budget.hold();
    hog.take(budget.limitBytes);
    try {
      for (const response of [await get('wide', KEYS[2] as string), await readCellData('wide', KEYS[2] as string)]) {
        expect(problemOf(response)).to.deep.equal({ status: 503, code: 'OVERLOADED' });
        expect(response.headers.get('retry-after')).to.equal('1');
      }
    } finally {
      hog.release();
    }
    await until(() => budget.inUse === 0, 'the budget is back to zero');
  });
  it('streams large answers without passing the listeners at which Node warns of a leak', async () => {
    const warnings: string[] = [];
    const record = (warning: Error) => warnings.push(`${warning.name}: ${warning.message}`);
    process.on('warning', record);
    try {
      const answers = await Promise.all([scan(), get('wide', KEYS[3] as string), readCellData('wide', KEYS[3] as string), batchGet(2)]);
      for (const { status } of answers) expect(status).to.equal(200);
      await turn();
    } finally {
      process.off('warning', record);
    }
    expect(warnings.filter((warning) => warning.startsWith('MaxListenersExceededWarning'))).to.deep.equal([]);
  });
});
