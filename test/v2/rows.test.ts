import { expect } from 'chai';
import { useTestApp } from '../support/test-app.ts';
import { createTable, problemOf, publishing, v2Paths } from '../support/v2.ts';

describe('v2 rows', () => {
  const app = useTestApp();
  const row = (key: string) => v2Paths(app()).row('orders', key);
  const put = (key: string, cells: unknown[]) => app().api.request('PUT', row(key), { json: { cells } });
  const mutate = (key: string, mutations: unknown[]) => app().api.post(`${row(key)}:mutate`, { mutations });
  const cellsOf = (body: { cells: Array<Record<string, string>> }) => body.cells.map(({ family, column, value }) => `${family}:${column}=${value}`);

  before(async () => {
    await createTable(app(), 'orders', [{ name: 'cf', maxVersions: 3 }, { name: 'meta' }]);
  });

  it('writes cells to a row (200 with the key and the count) and reads them back, ordered by family and column', async () => {
    const written = await put('order#1', [
      { family: 'meta', column: 'by', value: 'ana' },
      { family: 'cf', column: 'total', value: '42.50' },
      { family: 'cf', column: 'status', value: 'shipped' },
    ]);
    expect(written.status).to.equal(200);
    expect(written.body).to.deep.equal({ key: 'order#1', cellsWritten: 3 });
    const read = await app().api.get(row('order#1'));
    expect(read.status).to.equal(200);
    expect(read.body.key).to.equal('order#1');
    expect(cellsOf(read.body)).to.deep.equal(['cf:status=shipped', 'cf:total=42.50', 'meta:by=ana']);
    // One timestamp for the whole write, assigned by the service.
    expect(new Set(read.body.cells.map((cell: { timestamp: string }) => cell.timestamp)).size).to.equal(1);
  });

  it('answers 404 ROW_NOT_FOUND for a row without cells, and TABLE_NOT_FOUND for a missing table', async () => {
    expect(problemOf(await app().api.get(row('nothing')))).to.deep.equal({ status: 404, code: 'ROW_NOT_FOUND' });
    expect(problemOf(await app().api.get(v2Paths(app()).row('missing', 'k')))).to.deep.equal({ status: 404, code: 'TABLE_NOT_FOUND' });
  });

  it('reads the newest versions asked for, and only the columns asked for', async () => {
    for (const status of ['placed', 'paid', 'shipped', 'delivered']) {
      await put('versions', [{ family: 'cf', column: 'status', value: status }, { family: 'meta', column: 'seen', value: status }]);
      await new Promise((resolve) => setTimeout(resolve, 2));
    }
    const latest = await app().api.get(`${row('versions')}?columns=cf:status`);
    expect(cellsOf(latest.body)).to.deep.equal(['cf:status=delivered']);
    // cf keeps three versions; meta every version.
    const three = await app().api.get(`${row('versions')}?versions=10&columns=cf,meta:seen`);
    expect(cellsOf(three.body)).to.deep.equal([
      'cf:status=delivered',
      'cf:status=shipped',
      'cf:status=paid',
      'meta:seen=delivered',
      'meta:seen=shipped',
      'meta:seen=paid',
      'meta:seen=placed',
    ]);
    const timestamps = three.body.cells.slice(0, 3).map((cell: { timestamp: string }) => cell.timestamp);
    expect(timestamps).to.deep.equal([...timestamps].sort().reverse());
    expect(problemOf(await app().api.get(`${row('versions')}?columns=nope`))).to.deep.equal({ status: 404, code: 'ROW_NOT_FOUND' });
  });

  it('takes a timestamp from the caller: a retried write then adds no version', async () => {
    const cell = { family: 'meta', column: 'note', value: 'once', timestamp: '2026-01-02T03:04:05.678Z' };
    await put('retried', [cell]);
    await put('retried', [cell]);
    const { body } = await app().api.get(`${row('retried')}?versions=5`);
    expect(body.cells).to.deep.equal([{ family: 'meta', column: 'note', value: 'once', timestamp: '2026-01-02T03:04:05.678000Z' }]);
  });

  it("refuses a timestamp finer than the store's granularity, naming the limit, and writes nothing", async () => {
    const response = await put('fine', [{ family: 'cf', column: 'c', value: 'v', timestamp: '2026-01-02T03:04:05.678901Z' }]);
    expect(problemOf(response)).to.deep.equal({ status: 400, code: 'VALIDATION_FAILED', limit: 'timestampGranularityMicros' });
    expect(response.body.errors[0].path).to.equal('cells[0].timestamp');
    expect((await app().api.get(row('fine'))).status).to.equal(404);
  });

  it('refuses two cells of the same column and timestamp in one write', async () => {
    const response = await put('twice', [
      { family: 'cf', column: 'c', value: '1' },
      { family: 'cf', column: 'c', value: '2' },
    ]);
    expect(problemOf(response)).to.deep.equal({ status: 400, code: 'VALIDATION_FAILED' });
    expect(response.body.errors[0].path).to.equal('cells[1]');
  });

  it('answers 404 COLUMN_FAMILY_NOT_FOUND for a family the table lacks, and writes none of the cells', async () => {
    const response = await put('partial', [
      { family: 'cf', column: 'c', value: 'v' },
      { family: 'nope', column: 'c', value: 'v' },
    ]);
    expect(problemOf(response)).to.deep.equal({ status: 404, code: 'COLUMN_FAMILY_NOT_FOUND' });
    expect((await app().api.get(row('partial'))).status).to.equal(404);
  });

  it('mutates a row atomically and in order: set, deleteColumn, deleteFamily, deleteRow', async () => {
    await put('mutated', [
      { family: 'cf', column: 'a', value: '1' },
      { family: 'cf', column: 'b', value: '2' },
      { family: 'meta', column: 'm', value: '3' },
    ]);
    const applied = await mutate('mutated', [
      { set: { family: 'cf', column: 'c', value: '4' } },
      { deleteColumn: { family: 'cf', column: 'a' } },
      { deleteFamily: { family: 'meta' } },
    ]);
    expect(applied.status).to.equal(200);
    expect(applied.body).to.deep.equal({ key: 'mutated', mutationsApplied: 3 });
    expect(cellsOf((await app().api.get(row('mutated'))).body)).to.deep.equal(['cf:b=2', 'cf:c=4']);

    // In order: the row is deleted, then one cell written again.
    await mutate('mutated', [{ deleteRow: {} }, { set: { family: 'cf', column: 'z', value: 'after' } }]);
    expect(cellsOf((await app().api.get(row('mutated'))).body)).to.deep.equal(['cf:z=after']);
  });

  it('applies none of the mutations when one names a missing family', async () => {
    await put('atomic', [{ family: 'cf', column: 'a', value: 'kept' }]);
    const response = await mutate('atomic', [{ deleteRow: {} }, { set: { family: 'nope', column: 'x', value: 'y' } }]);
    expect(problemOf(response)).to.deep.equal({ status: 404, code: 'COLUMN_FAMILY_NOT_FOUND' });
    expect(cellsOf((await app().api.get(row('atomic'))).body)).to.deep.equal(['cf:a=kept']);
  });

  it('refuses a mutation that is not exactly one kind', async () => {
    for (const mutation of [{}, { set: { family: 'cf', column: 'a', value: '1' }, deleteRow: {} }, { truncate: {} }]) {
      expect(problemOf(await mutate('shape', [mutation])), JSON.stringify(mutation)).to.deep.equal({ status: 400, code: 'VALIDATION_FAILED' });
    }
  });

  it('deletes a row (204), and deleting it again is no error', async () => {
    await put('gone', [{ family: 'cf', column: 'a', value: '1' }]);
    expect((await app().api.request('DELETE', row('gone'))).status).to.equal(204);
    expect((await app().api.get(row('gone'))).status).to.equal(404);
    expect((await app().api.request('DELETE', row('gone'))).status).to.equal(204);
  });

  it('takes any UTF-8 key in the path, percent-encoded, with ":" as %3A', async () => {
    const key = 'ünï/cødé: 😀?#&%';
    expect((await put(key, [{ family: 'cf', column: 'a', value: '1' }])).body.key).to.equal(key);
    expect((await app().api.get(row(key))).body.key).to.equal(key);
    expect((await mutate(key, [{ deleteRow: {} }])).status).to.equal(200);
  });

  it('refuses a raw ":" or a percent-encoding that is not UTF-8 in the path key, rather than read another row', async () => {
    const rows = v2Paths(app()).rows('orders');
    for (const raw of ['a:b', 'a%FFb', 'a%ED%A0%80', 'a%zz']) {
      const response = await app().api.get(`${rows}/${raw}`);
      expect(problemOf(response), raw).to.deep.equal({ status: 400, code: 'VALIDATION_FAILED' });
      expect(response.body.errors[0].path).to.equal('key');
    }
  });

  it('refuses a key over the store keyBytes, naming the limit', async () => {
    const response = await put('k'.repeat(4097), [{ family: 'cf', column: 'a', value: '1' }]);
    expect(problemOf(response)).to.deep.equal({ status: 400, code: 'VALIDATION_FAILED', limit: 'keyBytes' });
  });
});

describe("v2 rows on a store's published limits", () => {
  // No store at hand has limits this small; a real store is wrapped to publish them, so that the
  // service's checks are what is tested. v1 is served by the same store, its limits on top of v1's.
  const app = useTestApp({
    wrapStore: (store) =>
      publishing(store, { capabilities: { multipleVersions: false }, limits: { keyBytes: 8, columnBytes: 4, valueBytes: 4, mutationsPerRow: 2, versionsPerRead: 1 } }),
  });
  const row = (key: string) => v2Paths(app()).row('t', key);

  before(async () => {
    await createTable(app(), 't', [{ name: 'cf', maxVersions: 1 }]);
  });

  it('refuses each bound with 400 naming the limit and the field, and writes nothing', async () => {
    const cases: Array<[string, unknown[], string, string]> = [
      ['k'.repeat(9), [{ family: 'cf', column: 'c', value: 'v' }], 'keyBytes', 'key'],
      ['k', [{ family: 'cf', column: 'ccccc', value: 'v' }], 'columnBytes', 'cells[0].column'],
      ['k', [{ family: 'cf', column: 'c', value: 'vvvvv' }], 'valueBytes', 'cells[0].value'],
      ['k', ['a', 'b', 'c'].map((column) => ({ family: 'cf', column, value: 'v' })), 'mutationsPerRow', 'cells'],
    ];
    for (const [key, cells, limit, path] of cases) {
      const response = await app().api.request('PUT', row(key), { json: { cells } });
      expect(problemOf(response), limit).to.deep.equal({ status: 400, code: 'VALIDATION_FAILED', limit });
      expect(response.body.errors[0].path, limit).to.equal(path);
    }
    expect((await app().api.get(v2Paths(app()).rows('t'))).body.rows).to.deep.equal([]);
  });

  it('answers 501 naming multipleVersions for a read of more versions, before checking versionsPerRead', async () => {
    expect(problemOf(await app().api.get(`${row('k')}?versions=2`))).to.deep.equal({ status: 501, code: 'NOT_SUPPORTED_BY_STORE', capability: 'multipleVersions' });
  });

  it("applies the default store's limits to v1 too, on top of v1's own", async () => {
    const { api, instance } = app();
    const insert = (rowKeyId: string, columnValue: string) =>
      api.post(`/v1/${instance}/insertData`, { tableName: 't', rowKeyId, data: [{ columnFamily: 'cf', columnName: 'c', columnValue }] });
    expect((await insert('short', 'v')).status).to.equal(200);
    const long = await insert('a-long-key', 'v');
    expect(problemOf(long)).to.deep.equal({ status: 400, code: 'VALIDATION_FAILED', limit: 'keyBytes' });
    expect(long.body.errors[0].path).to.equal('rowKeyId');
    const big = await insert('short', 'vvvvv');
    expect(big.body.errors[0].path).to.equal('data[0].columnValue');
  });
});
