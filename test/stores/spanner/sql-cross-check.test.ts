import { expect } from 'chai';
import type { Database } from '@google-cloud/spanner';
import { spannerSide } from '../../support/spanner-sql.ts';
import { useTestApp } from '../../support/test-app.ts';

interface SqlCell {
  row_key: Buffer;
  family: string;
  col: Buffer;
  ts: { value: string };
  value: Buffer;
}

/**
 * The service and Spanner's own SQL must agree on what is in the database: what one writes, the
 * other reads, byte for byte. The SQL runs through a client of the test's own, as an operator's
 * `gcloud spanner databases execute-sql` would.
 */
describe('spanner: cross-checks with Spanner SQL', () => {
  const side = spannerSide();
  const app = useTestApp({ store: side.harness });
  const path = (endpoint: string) => `/v1/${app().instance}/${endpoint}`;
  const read = (tableName: string, id: string) => app().api.get(`${path('readCellData')}?tableName=${tableName}&id=${encodeURIComponent(id)}`);
  let database: Database;
  const sql = async <T>(query: string, params: Record<string, unknown> = {}): Promise<T[]> => {
    const [rows] = await database.run({ sql: query, params, json: true, jsonOptions: { wrapNumbers: true } });
    return rows as T[];
  };
  const cellsOf = (table: string) =>
    sql<SqlCell>(
      'SELECT c.row_key, c.family, c.col, c.ts, c.value FROM kvcrud_cells c JOIN kvcrud_tables t ON c.table_id = t.table_id WHERE t.name = @table ORDER BY c.row_key, c.family, c.col, c.ts DESC',
      { table },
    );

  before(async () => {
    expect((await app().api.post(path('createTable'), { tableName: 'x', columnFamily: 'cf' })).status).to.equal(201);
    database = await side.database(app().instance);
  });
  after(() => side.close());

  it('SQL finds a table created through the API in the catalog, with its families', async () => {
    const rows = await sql<{ name: string; families: string }>('SELECT name, families FROM kvcrud_tables');
    const table = rows.find((row) => row.name === 'x');
    expect(table).to.not.equal(undefined);
    expect(JSON.parse(table?.families ?? '[]')).to.deep.equal([{ name: 'cf', maxVersions: 1 }]);
  });

  it('SQL reads the cells the API wrote, including bytes that are not UTF-8, at the timestamp the API reports', async () => {
    const response = await app().api.post(path('insertData'), {
      tableName: 'x',
      rowKeyId: 'from-api',
      data: [
        { columnFamily: 'cf', columnName: 'greeting', columnValue: 'hello world' },
        { columnFamily: 'cf', columnName: Buffer.from('bin').toString('base64'), columnValue: Buffer.from([0xff, 0x00, 0x7f]).toString('base64'), encoding: 'base64' },
      ],
    });
    expect(response.status).to.equal(200);
    const cells = (await cellsOf('x')).filter((cell) => cell.row_key.equals(Buffer.from('from-api')));
    expect(cells.map((cell) => [cell.family, cell.col.toString(), cell.value.toString('hex')])).to.deep.equal([
      ['cf', 'bin', 'ff007f'],
      ['cf', 'greeting', Buffer.from('hello world').toString('hex')],
    ]);
    const api = await read('x', 'from-api');
    const stamp = (api.body as { data: Array<{ columnName: string; timestamp: string }> }).data.find((cell) => cell.columnName === 'greeting')?.timestamp ?? '';
    const micros = BigInt(Date.parse(stamp)) * 1000n + BigInt(/\.\d{3}(\d{3})Z$/.exec(stamp)?.[1] ?? '0');
    expect(cells[1]?.ts.value).to.equal(micros.toString());
  });

  it('the API reads what SQL wrote, and the newest version first', async () => {
    const [catalog] = await sql<{ table_id: string }>('SELECT table_id FROM kvcrud_tables WHERE name = @name', { name: 'x' });
    await database.runTransactionAsync(async (transaction) => {
      await transaction.runUpdate({
        // col_hash is the column's SHA-256 (the column is kept whole in col).
        sql: `INSERT INTO kvcrud_cells (table_id, row_key, family, col_hash, col, ts, value) VALUES
                (@table, b'from-sql', 'cf', SHA256(b'b'), b'b', 2000, b'2'), (@table, b'from-sql', 'cf', SHA256(b'a'), b'a', 1000, b'1'),
                (@table, b'from-sql', 'cf', SHA256(b'a'), b'a', 3000, b'newer'), (@table, b'far-future', 'cf', SHA256(b'c'), b'c', 9223372036854775000, b'v')`,
        params: { table: catalog?.table_id },
      });
      await transaction.commit();
    });
    const response = await read('x', 'from-sql');
    expect(response.status).to.equal(200);
    expect(response.body.data.map((cell: { columnName: string; columnValue: string }) => [cell.columnName, cell.columnValue])).to.deep.equal([
      ['a', 'newer'],
      ['b', '2'],
    ]);
    const far = await read('x', 'far-future');
    expect(far.body.data[0].timestamp).to.equal('+294247-01-10T04:00:54.775000Z');
  });

  it('keeps one version per column on write, as the table was created: SQL finds the older ones gone', async () => {
    for (const value of ['first', 'second', 'third']) {
      expect((await app().api.post(path('insertData'), { tableName: 'x', rowKeyId: 'versioned', data: [{ columnFamily: 'cf', columnName: 'c', columnValue: value }] })).status).to.equal(200);
      await new Promise((resolve) => setTimeout(resolve, 2));
    }
    const cells = (await cellsOf('x')).filter((cell) => cell.row_key.equals(Buffer.from('versioned')));
    expect(cells.map((cell) => cell.value.toString())).to.deep.equal(['third']);
  });

  it('a table deleted through the API leaves the catalog at once, and its cells soon after', async () => {
    expect((await app().api.post(path('createTable'), { tableName: 'short-lived', columnFamily: 'cf' })).status).to.equal(201);
    const write = { tableName: 'short-lived', rowKeyId: 'r', data: [{ columnFamily: 'cf', columnName: 'c', columnValue: 'v' }] };
    expect((await app().api.post(path('insertData'), write)).status).to.equal(200);
    const [catalog] = await sql<{ table_id: string }>('SELECT table_id FROM kvcrud_tables WHERE name = @name', { name: 'short-lived' });
    expect((await app().api.delete(path('deleteTable'), { tableList: ['short-lived'] })).status).to.equal(200);
    expect(await sql('SELECT name FROM kvcrud_tables WHERE name = @name', { name: 'short-lived' })).to.deep.equal([]);
    // The cells go first, then, in a transaction of its own, the table's entry in kvcrud_dropped.
    const started = Date.now();
    let left = Infinity;
    let dropped: unknown[] = [];
    while ((left > 0 || dropped.length > 0) && Date.now() - started < 20_000) {
      const [count] = await sql<{ n: { value: string } }>('SELECT COUNT(*) AS n FROM kvcrud_cells WHERE table_id = @table', { table: catalog?.table_id });
      left = Number(count?.n.value);
      dropped = await sql('SELECT table_id FROM kvcrud_dropped');
      if (left > 0 || dropped.length > 0) await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect(left, 'cells of the deleted table').to.equal(0);
    expect(dropped, 'tables still being dropped').to.deep.equal([]);
  });
});
