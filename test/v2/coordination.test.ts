import { expect } from 'chai';
import { useTestApp } from '../support/test-app.ts';
import { createTable, problemOf, publishing, v2Paths } from '../support/v2.ts';

const set = (column: string, value: string, family = 'cf') => ({ set: { family, column, value } });
const counter = (value: bigint) => {
  const bytes = Buffer.alloc(8);
  bytes.writeBigInt64BE(value);
  return bytes.toString('base64');
};

describe('v2 coordination: checkAndMutate, readModifyWrite, conditional batches', () => {
  const app = useTestApp();
  const row = (key: string, table = 'coord') => v2Paths(app()).row(table, key);
  const check = (key: string, body: unknown, table = 'coord') => app().api.post(`${row(key, table)}:checkAndMutate`, body);
  const modify = (key: string, body: unknown, query = '') => app().api.post(`${row(key)}:readModifyWrite${query}`, body);
  const read = (key: string, query = '') => app().api.get(`${row(key)}${query}`);

  before(async () => {
    await createTable(app(), 'coord', [{ name: 'cf', maxVersions: 1 }, { name: 'meta' }]);
  });

  it('creates a row if absent: the first call matches, the second applies `otherwise`', async () => {
    const body = { conditions: [{ rowExists: false }], mutations: [set('owner', 'ana')], otherwise: [set('loser', 'bo', 'meta')] };
    const first = await check('lock', body);
    expect([first.status, first.body]).to.deep.equal([200, { key: 'lock', matched: true }]);
    const second = await check('lock', { ...body, mutations: [set('owner', 'bo')] });
    expect([second.status, second.body]).to.deep.equal([200, { key: 'lock', matched: false }]);
    const cells = (await read('lock')).body.cells.map((cell: { family: string; column: string; value: string }) => `${cell.family}:${cell.column}=${cell.value}`);
    expect(cells).to.deep.equal(['cf:owner=ana', 'meta:loser=ana'.replace('ana', 'bo')]);
  });

  it('compares a column with the bytes given, as text or base64', async () => {
    await app().api.request('PUT', row('state'), { json: { cells: [{ family: 'cf', column: 'state', value: 'draft' }] } });
    const publish = { mutations: [set('state', 'published')] };
    expect((await check('state', { ...publish, conditions: [{ family: 'cf', column: 'state', equals: 'other' }] })).body.matched).to.equal(false);
    expect((await check('state', { ...publish, conditions: [{ family: 'cf', column: 'c3RhdGU=', equals: 'ZHJhZnQ=', encoding: 'base64' }] })).body.matched).to.equal(true);
    expect((await read('state')).body.cells[0].value).to.equal('published');
    const exists = await check('state', { conditions: [{ family: 'meta', exists: false }, { family: 'cf', column: 'state', exists: true }], otherwise: [{ deleteRow: {} }] });
    expect(exists.body.matched).to.equal(true);
  });

  it('answers 404 COLUMN_FAMILY_NOT_FOUND for a family the table lacks, in a condition or in the branch not taken, writing nothing', async () => {
    for (const body of [
      { conditions: [{ family: 'nope', exists: true }], mutations: [set('a', 'v')] },
      { conditions: [{ rowExists: false }], mutations: [set('a', 'v')], otherwise: [set('a', 'v', 'nope')] },
    ]) {
      const response = await check('untouched', body);
      expect(problemOf(response)).to.deep.equal({ status: 404, code: 'COLUMN_FAMILY_NOT_FOUND' });
      expect(response.body.detail).to.contain('"nope"');
    }
    expect((await read('untouched')).status).to.equal(404);
  });

  it('refuses a body with no mutation in either list, or a condition of no known shape, with 400 naming the field', async () => {
    const empty = await check('r', { conditions: [{ rowExists: true }], mutations: [], otherwise: [] });
    expect(problemOf(empty)).to.deep.equal({ status: 400, code: 'VALIDATION_FAILED' });
    expect(empty.body.errors[0].message).to.contain('mutations or otherwise');
    for (const condition of [{}, { rowExists: true, family: 'cf' }, { family: 'cf', column: 'a', equals: 'x', exists: true }, { family: 'cf', equals: 'x' }]) {
      const response = await check('r', { conditions: [condition], mutations: [set('a', 'v')] });
      expect(problemOf(response), JSON.stringify(condition)).to.deep.equal({ status: 400, code: 'VALIDATION_FAILED' });
      expect(response.body.errors[0].path).to.equal('conditions[0]');
      expect(response.body.errors[0].message).to.contain('exactly one of');
    }
    const none = await check('r', { mutations: [set('a', 'v')] });
    expect(none.body.errors[0].path).to.equal('conditions');
  });

  it('refuses more conditions than the store takes with 400 naming conditionsPerCheck, in a request or in a batch entry alone, writing nothing', async () => {
    const { conditionsPerCheck } = app().store.limits;
    const conditions = Array.from({ length: conditionsPerCheck + 1 }, () => ({ rowExists: false }));
    const response = await check('over', { conditions, mutations: [set('a', 'v')] });
    expect(problemOf(response)).to.deep.equal({ status: 400, code: 'VALIDATION_FAILED', limit: 'conditionsPerCheck' });
    expect(response.body.detail).to.contain(`${conditionsPerCheck + 1} conditions, more than the ${conditionsPerCheck}`);
    expect((await check('over', { conditions: conditions.slice(1), mutations: [set('a', 'v')] })).body.matched).to.equal(true);
    const batch = await app().api.post(`${v2Paths(app()).rows('coord')}:batchWrite`, {
      entries: [
        { key: 'over-entry', conditions, mutations: [set('a', 'v')] },
        { key: 'within-entry', conditions: conditions.slice(1), mutations: [set('a', 'v')] },
      ],
    });
    expect(batch.status).to.equal(200);
    expect(batch.body.results.map((result: { code: string; limit?: string; matched?: boolean }) => [result.code, result.limit, result.matched])).to.deep.equal([
      ['VALIDATION_FAILED', 'conditionsPerCheck', undefined],
      ['OK', undefined, true],
    ]);
    expect((await read('over-entry')).status).to.equal(404);
  });

  it('refuses more rules than the store takes with 400 naming rulesPerRow, writing nothing', async () => {
    const { rulesPerRow } = app().store.limits;
    const rules = Array.from({ length: rulesPerRow + 1 }, (_, index) => ({ family: 'cf', column: `c${index}`, increment: 1 }));
    const response = await modify('many-rules', { rules });
    expect(problemOf(response)).to.deep.equal({ status: 400, code: 'VALIDATION_FAILED', limit: 'rulesPerRow' });
    expect(response.body.detail).to.contain(`${rulesPerRow + 1} rules, more than the ${rulesPerRow}`);
    expect((await read('many-rules')).status).to.equal(404);
    const within = await modify('many-rules', { rules: rules.slice(1) });
    expect([within.status, within.body.cells.length]).to.deep.equal([200, rulesPerRow]);
  });

  it('answers 404 COLUMN_FAMILY_NOT_FOUND for a rule naming a family the table lacks, writing none of the rules', async () => {
    for (const rules of [
      [{ family: 'nope', column: 'n', increment: 1 }],
      [
        { family: 'cf', column: 'n', increment: 1 },
        { family: 'meta', column: 'log', append: '.' },
        { family: 'nope', column: 'log', append: '.' },
      ],
    ]) {
      const response = await modify('no-family', { rules });
      expect(problemOf(response), JSON.stringify(rules)).to.deep.equal({ status: 404, code: 'COLUMN_FAMILY_NOT_FOUND' });
      expect(response.body.detail).to.contain('"nope"');
    }
    expect((await read('no-family')).status).to.equal(404);
  });

  it('increments a counter from nothing, answering its bytes and its int64, and reads it back as int64 when asked', async () => {
    const first = await modify('views', { rules: [{ family: 'cf', column: 'n', increment: 5 }] });
    expect(first.status).to.equal(200);
    expect(first.body.key).to.equal('views');
    expect(first.body.cells).to.have.length(1);
    expect(first.body.cells[0]).to.include({ family: 'cf', column: Buffer.from('n').toString('base64'), value: counter(5n), int64: '5', encoding: 'base64' });
    const big = await modify('views', { rules: [{ family: 'cf', column: 'n', increment: '9223372036854775800' }] });
    expect(big.body.cells[0].int64).to.equal('9223372036854775805');
    const wrapped = await modify('views', { rules: [{ family: 'cf', column: 'n', increment: 3 }] });
    expect(wrapped.body.cells[0].int64).to.equal('-9223372036854775808');

    expect((await read('views')).body.cells[0]).to.not.have.property('int64');
    expect((await read('views', '?int64=cf:n')).body.cells[0]).to.include({ int64: '-9223372036854775808' });
    const scanned = await app().api.get(`${v2Paths(app()).rows('coord')}?prefix=views&int64=cf`);
    expect(scanned.body.rows[0].cells[0]).to.include({ int64: '-9223372036854775808' });
    const batch = await app().api.post(`${v2Paths(app()).rows('coord')}:batchGet`, { keys: ['views'], int64: ['cf:n'] });
    expect(batch.body.rows[0].cells[0]).to.include({ int64: '-9223372036854775808' });
  });

  it('appends, and applies rules in order, answering each column touched once', async () => {
    const response = await modify('trail', { rules: [{ family: 'meta', column: 'log', append: 'a' }, { family: 'cf', column: 'n', increment: 1 }, { family: 'meta', column: 'log', append: 'b' }] });
    expect(response.body.cells.map((cell: { family: string; column: string; value: string; int64?: string }) => [cell.family, cell.column, cell.int64 ?? cell.value])).to.deep.equal([
      ['cf', Buffer.from('n').toString('base64'), '1'],
      ['meta', 'log', 'ab'],
    ]);
  });

  it('answers 400 NOT_A_COUNTER for an increment of a value that is not 8 bytes, writing nothing', async () => {
    await app().api.request('PUT', row('text'), { json: { cells: [{ family: 'cf', column: 'n', value: 'seven' }] } });
    const response = await modify('text', { rules: [{ family: 'meta', column: 'log', append: 'x' }, { family: 'cf', column: 'n', increment: 1 }] });
    expect(problemOf(response)).to.deep.equal({ status: 400, code: 'NOT_A_COUNTER' });
    const cells = (await read('text')).body.cells.map((cell: { column: string }) => cell.column);
    expect(cells).to.deep.equal(['n']);
  });

  it('refuses an increment beyond int64, a fraction, or an unsafe JSON integer, with 400', async () => {
    for (const increment of ['9223372036854775808', '-9223372036854775809', 1.5, '1.5', '01', 2 ** 60, '']) {
      const response = await modify('r', { rules: [{ family: 'cf', column: 'n', increment }] });
      expect(problemOf(response), String(increment)).to.deep.equal({ status: 400, code: 'VALIDATION_FAILED' });
      expect(response.body.errors[0].path, String(increment)).to.match(/^rules\[0\]/);
    }
  });

  it('sums racing increments exactly', async () => {
    const results = await Promise.all(Array.from({ length: 30 }, () => modify('hot', { rules: [{ family: 'cf', column: 'n', increment: 1 }] })));
    expect(results.map((result) => result.status)).to.deep.equal(results.map(() => 200));
    const values = results.map((result) => Number(result.body.cells[0].int64)).sort((x, y) => x - y);
    expect(values).to.deep.equal(Array.from({ length: 30 }, (_, i) => i + 1));
  });

  it('reports `matched` per conditional batch entry, applying the entries of one row in entry order', async () => {
    const response = await app().api.post(`${v2Paths(app()).rows('coord')}:batchWrite`, {
      entries: [
        { key: 'b1', conditions: [{ rowExists: false }], mutations: [set('v', '1')] },
        { key: 'b1', conditions: [{ rowExists: false }], mutations: [set('v', '2')], otherwise: [set('seen', 'yes', 'meta')] },
        { key: 'b2', mutations: [set('v', 'plain')] },
        { key: 'b1', conditions: [{ family: 'meta', column: 'seen', equals: 'yes' }], mutations: [set('v', '3')] },
        { key: 'b3', conditions: [{ family: 'nope', exists: true }], mutations: [set('v', 'x')] },
      ],
    });
    expect(response.status).to.equal(200);
    expect(response.body.results.map((result: { code: string; matched?: boolean }) => [result.code, result.matched])).to.deep.equal([
      ['OK', true],
      ['OK', false],
      ['OK', undefined],
      ['OK', true],
      ['COLUMN_FAMILY_NOT_FOUND', undefined],
    ]);
    expect((await read('b1')).body.cells.map((cell: { column: string; value: string }) => `${cell.column}=${cell.value}`)).to.deep.equal(['v=3', 'seen=yes']);
  });

  it('answers 404 TABLE_NOT_FOUND on a missing table', async () => {
    expect(problemOf(await check('r', { conditions: [{ rowExists: false }], mutations: [set('a', 'v')] }, 'missing'))).to.deep.equal({ status: 404, code: 'TABLE_NOT_FOUND' });
    const response = await app().api.post(`${v2Paths(app()).row('missing', 'r')}:readModifyWrite`, { rules: [{ family: 'cf', column: 'n', increment: 1 }] });
    expect(problemOf(response)).to.deep.equal({ status: 404, code: 'TABLE_NOT_FOUND' });
  });
});

describe('v2 coordination on a store without it', () => {
  const app = useTestApp({ wrapStore: (store) => publishing(store, { capabilities: { checkAndMutate: false, readModifyWrite: false } }) });

  before(async () => {
    await createTable(app(), 'plain');
  });

  it('answers 501 NOT_SUPPORTED_BY_STORE naming the capability, for each operation and for a conditional batch entry', async () => {
    const paths = v2Paths(app());
    const cases: Array<[string, unknown, string]> = [
      [`${paths.row('plain', 'r')}:checkAndMutate`, { conditions: [{ rowExists: false }], mutations: [set('a', 'v')] }, 'checkAndMutate'],
      [`${paths.row('plain', 'r')}:readModifyWrite`, { rules: [{ family: 'cf', column: 'n', increment: 1 }] }, 'readModifyWrite'],
      [`${paths.rows('plain')}:batchWrite`, { entries: [{ key: 'a', mutations: [set('a', 'v')] }, { key: 'b', conditions: [{ rowExists: false }], mutations: [set('a', 'v')] }] }, 'checkAndMutate'],
    ];
    for (const [path, body, capability] of cases) {
      expect(problemOf(await app().api.post(path, body)), path).to.deep.equal({ status: 501, code: 'NOT_SUPPORTED_BY_STORE', capability });
    }
    // Nothing was written: the plain entry of the refused batch neither.
    expect((await app().api.get(paths.row('plain', 'a'))).status).to.equal(404);
  });
});
