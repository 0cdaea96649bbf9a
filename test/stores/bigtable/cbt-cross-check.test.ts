import { expect } from 'chai';
import { cbt } from '../../support/cbt.ts';
import { emulatorHost } from '../../support/emulator.ts';
import { harness as bigtableHarness } from '../../support/harnesses/bigtable.ts';
import { useTestApp } from '../../support/test-app.ts';

/**
 * The service and Google's own `cbt` CLI must agree on what is in Bigtable: what one writes, the
 * other reads, byte for byte.
 */
describe('cross-checks with the cbt CLI', () => {
  const app = useTestApp({ store: bigtableHarness });
  let host: string;
  const path = (endpoint: string) => `/v1/${app().instance}/${endpoint}`;
  const read = (tableName: string, id: string) => app().api.get(`${path('readCellData')}?tableName=${tableName}&id=${encodeURIComponent(id)}`);

  before(async function () {
    host = emulatorHost(this);
    expect((await app().api.post(path('createTable'), { tableName: 'x', columnFamily: 'cf' })).status).to.equal(201);
  });

  it('cbt lists a table created through the API', async () => {
    const output = await cbt(host, app().instance, 'ls');
    expect(output.split('\n')).to.include('x');
  });

  it('cbt reads the cells the API wrote, including bytes that are not UTF-8', async () => {
    const response = await app().api.post(path('insertData'), {
      tableName: 'x',
      rowKeyId: 'from-api',
      data: [
        { columnFamily: 'cf', columnName: 'greeting', columnValue: 'hello world' },
        { columnFamily: 'cf', columnName: Buffer.from('bin').toString('base64'), columnValue: Buffer.from([0xff, 0x00, 0x7f]).toString('base64'), encoding: 'base64' },
      ],
    });
    expect(response.status).to.equal(200);
    const output = await cbt(host, app().instance, 'read', 'x', 'prefix=from-api');
    expect(output).to.contain('from-api');
    expect(output).to.match(/cf:greeting\s+@ \d{4}\/\d{2}\/\d{2}-/);
    expect(output).to.contain('"hello world"');
    expect(output).to.contain('cf:bin');
    expect(output).to.contain('"\\xff\\x00\\x7f"');
  });

  it('cbt sees earlier versions the API keeps', async () => {
    for (const value of ['first', 'second']) {
      await app().api.post(path('insertData'), { tableName: 'x', rowKeyId: 'versioned', data: [{ columnFamily: 'cf', columnName: 'c', columnValue: value }] });
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    const output = await cbt(host, app().instance, 'read', 'x', 'prefix=versioned');
    expect(output.indexOf('"second"')).to.be.within(0, output.indexOf('"first"'));
  });

  it('the API reads what cbt wrote', async () => {
    await cbt(host, app().instance, 'set', 'x', 'from-cbt', 'cf:b=2', 'cf:a=1');
    const response = await read('x', 'from-cbt');
    expect(response.status).to.equal(200);
    expect(response.body.data.map((cell: { columnName: string; columnValue: string }) => [cell.columnName, cell.columnValue])).to.deep.equal([
      ['a', '1'],
      ['b', '2'],
    ]);
  });

  it('the API reads timestamps near the int64 limit, as reverse timestamps use', async () => {
    await cbt(host, app().instance, 'set', 'x', 'far-future', 'cf:c=v@9223372036854775000');
    const response = await read('x', 'far-future');
    expect(response.status).to.equal(200);
    expect(response.body.data[0].timestamp).to.equal('+294247-01-10T04:00:54.775000Z');
  });

  it('the API writes to a family cbt added after the table was first used', async () => {
    await cbt(host, app().instance, 'createfamily', 'x', 'later');
    const response = await app().api.post(path('insertData'), {
      tableName: 'x',
      rowKeyId: 'new-family',
      data: [{ columnFamily: 'later', columnName: 'c', columnValue: 'v' }],
    });
    expect(response.status).to.equal(200);
  });

  it('the API reports COLUMN_FAMILY_NOT_FOUND for a family cbt deleted', async () => {
    await cbt(host, app().instance, 'createfamily', 'x', 'doomed');
    const write = { tableName: 'x', rowKeyId: 'doomed-row', data: [{ columnFamily: 'doomed', columnName: 'c', columnValue: 'v' }] };
    expect((await app().api.post(path('insertData'), write)).status).to.equal(200);
    await cbt(host, app().instance, 'deletefamily', 'x', 'doomed');
    const response = await app().api.post(path('insertData'), write);
    expect(response.status).to.equal(404);
    expect(response.body.code).to.equal('COLUMN_FAMILY_NOT_FOUND');
  });

  it('the API reports TABLE_NOT_FOUND for a table cbt deleted', async () => {
    await app().api.post(path('createTable'), { tableName: 'gone', columnFamily: 'cf' });
    const write = { tableName: 'gone', rowKeyId: 'r', data: [{ columnFamily: 'cf', columnName: 'c', columnValue: 'v' }] };
    expect((await app().api.post(path('insertData'), write)).status).to.equal(200);
    await cbt(host, app().instance, 'deletetable', 'gone');
    const response = await app().api.post(path('insertData'), write);
    expect(response.status).to.equal(404);
    expect(response.body.code).to.equal('TABLE_NOT_FOUND');
    expect((await read('gone', 'r')).body.code).to.equal('TABLE_NOT_FOUND');
  });

  it('cbt no longer lists tables deleted through the API', async () => {
    await app().api.post(path('createTable'), { tableName: 'short-lived', columnFamily: 'cf' });
    expect((await app().api.delete(path('deleteTable'), { tableList: ['short-lived'] })).status).to.equal(200);
    expect((await cbt(host, app().instance, 'ls')).split('\n')).to.not.include('short-lived');
  });
});
