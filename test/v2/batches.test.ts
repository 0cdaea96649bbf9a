import { expect } from 'chai';
import { useTestApp } from '../support/test-app.ts';
import { createTable, problemOf, publishing, v2Paths } from '../support/v2.ts';

const set = (column: string, value: string, family = 'cf') => ({ set: { family, column, value } });

describe('v2 batches', () => {
  const app = useTestApp();
  const batchGet = (body: unknown) => app().api.post(`${v2Paths(app()).rows('batch')}:batchGet`, body);
  const batchWrite = (entries: unknown[]) => app().api.post(`${v2Paths(app()).rows('batch')}:batchWrite`, { entries });

  before(async () => {
    await createTable(app(), 'batch', [{ name: 'cf', maxVersions: 5 }, { name: 'meta' }]);
  });

  it('writes each entry on its own: a bad entry among good ones is reported by index, the good ones are written', async () => {
    const response = await batchWrite([
      { key: 'good-1', mutations: [set('status', 'new')] },
      { key: 'bad', mutations: [set('status', 'x'), set('c', 'v', 'no-such-family')] },
      { key: 'good-2', mutations: [set('status', 'new'), set('by', 'ana', 'meta')] },
      { key: 'k'.repeat(4097), mutations: [set('status', 'too long a key')] },
    ]);
    expect(response.status).to.equal(200);
    const results = response.body.results as Array<Record<string, unknown>>;
    expect(results.map(({ index, code }) => [index, code])).to.deep.equal([
      [0, 'OK'],
      [1, 'COLUMN_FAMILY_NOT_FOUND'],
      [2, 'OK'],
      [3, 'VALIDATION_FAILED'],
    ]);
    expect(results[1]?.['detail']).to.contain('no-such-family');
    expect(results[3]).to.include({ limit: 'keyBytes' });

    const read = await batchGet({ keys: ['good-1', 'bad', 'good-2'] });
    expect(read.body.rows.map((row: { key: string; found: boolean }) => [row.key, row.found])).to.deep.equal([
      ['good-1', true],
      ['bad', false],
      ['good-2', true],
    ]);
  });

  it('applies entries naming the same row in entry order', async () => {
    await batchWrite([
      { key: 'same', mutations: [set('a', '1')] },
      { key: 'same', mutations: [{ deleteRow: {} }, set('b', '2')] },
    ]);
    const { body } = await batchGet({ keys: ['same'] });
    expect(body.rows[0].cells.map((cell: { column: string }) => cell.column)).to.deep.equal(['b']);
  });

  it('answers a batch get in request order, repeats included, marking missing rows', async () => {
    await batchWrite([
      { key: 'x', mutations: [set('c', 'x1')] },
      { key: 'y', mutations: [set('c', 'y1'), set('m', 'y2', 'meta')] },
    ]);
    const response = await batchGet({ keys: ['y', 'missing', 'x', 'y'], columns: ['cf'] });
    expect(response.status).to.equal(200);
    const rows = response.body.rows as Array<{ key: string; found: boolean; cells: Array<{ family: string; value: string }> }>;
    expect(rows.map((row) => [row.key, row.found, row.cells.map((cell) => `${cell.family}=${cell.value}`)])).to.deep.equal([
      ['y', true, ['cf=y1']],
      ['missing', false, []],
      ['x', true, ['cf=x1']],
      ['y', true, ['cf=y1']],
    ]);
  });

  it('reads several versions in a batch get', async () => {
    await batchWrite([{ key: 'v', mutations: [{ set: { family: 'cf', column: 'c', value: 'old', timestamp: '2026-01-01T00:00:00Z' } }] }]);
    await batchWrite([{ key: 'v', mutations: [{ set: { family: 'cf', column: 'c', value: 'new', timestamp: '2026-01-02T00:00:00Z' } }] }]);
    const { body } = await batchGet({ keys: ['v'], versions: 2 });
    expect(body.rows[0].cells.map((cell: { value: string; timestamp: string }) => `${cell.value}@${cell.timestamp}`)).to.deep.equal([
      'new@2026-01-02T00:00:00.000000Z',
      'old@2026-01-01T00:00:00.000000Z',
    ]);
  });

  it('answers 404 TABLE_NOT_FOUND for a batch on a missing table, writing nothing', async () => {
    const response = await app().api.post(`${v2Paths(app()).rows('missing')}:batchWrite`, { entries: [{ key: 'k', mutations: [set('c', 'v')] }] });
    expect(problemOf(response)).to.deep.equal({ status: 404, code: 'TABLE_NOT_FOUND' });
  });

  it('refuses malformed batches as a whole', async () => {
    for (const entries of [[], [{ key: 'k', mutations: [] }], [{ key: 'k' }], [{ key: '', mutations: [set('c', 'v')] }], [{ key: 'k', mutations: [set('c', 'v')], extra: 1 }]]) {
      expect(problemOf(await batchWrite(entries)), JSON.stringify(entries)).to.deep.equal({ status: 400, code: 'VALIDATION_FAILED' });
    }
    for (const body of [{}, { keys: [] }, { keys: ['k'], versions: 0 }, { keys: ['k'], columns: [] }]) {
      expect(problemOf(await batchGet(body)), JSON.stringify(body)).to.deep.equal({ status: 400, code: 'VALIDATION_FAILED' });
    }
  });
});

describe("v2 batches on a store's published limits", () => {
  // No store at hand has batch limits this small; a real store is wrapped to publish them, so
  // that the service's checks before the store is called are what is tested.
  const app = useTestApp({ wrapStore: (store) => publishing(store, { limits: { entriesPerBatch: 2, mutationsPerBatch: 3, bytesPerBatch: 20 } }) });
  const batchWrite = (entries: unknown[]) => app().api.post(`${v2Paths(app()).rows('t')}:batchWrite`, { entries });

  before(async () => {
    await createTable(app(), 't');
  });

  it('refuses a whole batch over a per-batch limit with 400 naming it, and writes nothing', async () => {
    const cases: Array<[unknown[], string]> = [
      [['a', 'b', 'c'].map((key) => ({ key, mutations: [set('c', 'v')] })), 'entriesPerBatch'],
      [[{ key: 'a', mutations: [set('c', '1'), set('d', '2')] }, { key: 'b', mutations: [set('c', '1'), set('d', '2')] }], 'mutationsPerBatch'],
      [[{ key: 'a', mutations: [set('c', 'v'.repeat(10))] }, { key: 'b', mutations: [set('c', 'v'.repeat(10))] }], 'bytesPerBatch'],
    ];
    for (const [entries, limit] of cases) {
      expect(problemOf(await batchWrite(entries)), limit).to.deep.equal({ status: 400, code: 'VALIDATION_FAILED', limit });
    }
    const keys = await app().api.post(`${v2Paths(app()).rows('t')}:batchGet`, { keys: ['a', 'b', 'c'] });
    expect(problemOf(keys)).to.deep.equal({ status: 400, code: 'VALIDATION_FAILED', limit: 'entriesPerBatch' });
    expect((await app().api.get(v2Paths(app()).rows('t'))).body.rows).to.deep.equal([]);
  });
});
