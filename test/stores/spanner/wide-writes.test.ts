import { expect } from 'chai';
import { pino } from 'pino';
import type { Database } from '@google-cloud/spanner';
import { spannerSide } from '../../support/spanner-sql.ts';
import { useTestApp } from '../../support/test-app.ts';

/**
 * A write of many columns of one row reads their stored versions as one range of the row's family
 * (stored-versions.ts), or one range per column when the family holds many more: either way,
 * retention must trim exactly the written columns' older versions.
 */
describe('spanner: retention on writes of many columns of one row', () => {
  const storeLogs: Array<Record<string, unknown>> = [];
  const side = spannerSide(pino({ level: 'warn' }, { write: (line: string) => void storeLogs.push(JSON.parse(line) as Record<string, unknown>) }));
  // Two writes of 1,200 cells each: on a loaded 2-core machine the emulator has taken more than
  // the default 5 s deadline for one.
  const app = useTestApp({ store: side.harness, storeTimeoutMs: 30_000 });
  const path = (endpoint: string) => `/v1/${app().instance}/${endpoint}`;
  let database: Database;
  const insert = async (rowKeyId: string, columns: number[], value: string) => {
    const data = columns.map((column) => ({ columnFamily: 'cf', columnName: `c${column}`, columnValue: `${value} ${column}` }));
    const response = await app().api.post(path('insertData'), { tableName: 'wide', rowKeyId, data });
    expect(response.status, JSON.stringify(response.body)).to.equal(200);
    // Each write gets the wall clock's millisecond: the next one is newer.
    await new Promise((resolve) => setTimeout(resolve, 2));
  };
  /** Each column of the row with the values of its stored versions, newest first, as SQL finds them. */
  const stored = async (rowKeyId: string) => {
    const [rows] = await database.run({
      sql: 'SELECT c.col, c.value FROM kvcrud_cells c JOIN kvcrud_tables t ON c.table_id = t.table_id WHERE t.name = @table AND c.row_key = @key ORDER BY c.col, c.ts DESC',
      params: { table: 'wide', key: Buffer.from(rowKeyId) },
      json: true,
    });
    const columns = new Map<string, string[]>();
    for (const row of rows as Array<{ col: Buffer; value: Buffer }>) {
      const values = columns.get(row.col.toString()) ?? [];
      values.push(row.value.toString());
      columns.set(row.col.toString(), values);
    }
    return columns;
  };
  const range = (from: number, to: number) => Array.from({ length: to - from }, (_, index) => from + index);

  before(async () => {
    expect((await app().api.post(path('createTable'), { tableName: 'wide', columnFamily: 'cf' })).status).to.equal(201);
    database = await side.database(app().instance);
  });
  after(() => side.close());

  it('keeps the newest version of each of 1,200 columns written twice, and no other', async () => {
    await insert('twice', range(0, 1200), 'first');
    await insert('twice', range(0, 1200), 'second');
    const columns = await stored('twice');
    expect(columns.size).to.equal(1200);
    expect([...columns].filter(([name, values]) => values.length !== 1 || values[0] !== `second ${name.slice(1)}`)).to.deep.equal([]);
  });

  it('encodes the commits as their mutations are queued: the store does not warn that the client serializes them', () => {
    const warnings = storeLogs.filter((line) => String(line['msg']).includes('commits are serialized by the client'));
    expect(warnings).to.deep.equal([]);
  });

  it('reads the 1,200 columns back in byte order, though they are stored in hash order', async () => {
    const response = await app().api.get(`${path('readCellData')}?tableName=wide&id=twice`);
    expect(response.status).to.equal(200);
    const names = (response.body as { data: Array<{ columnName: string }> }).data.map((cell) => cell.columnName);
    expect(names).to.deep.equal(range(0, 1200).map((column) => `c${column}`).sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b))));
  });

  it('trims only the written columns of a family that holds many more, and leaves the others alone', async () => {
    await insert('mostly-untouched', range(0, 5000), 'first');
    await insert('mostly-untouched', range(2000, 3000), 'second');
    const columns = await stored('mostly-untouched');
    expect(columns.size).to.equal(5000);
    const expected = (column: number) => `${column >= 2000 && column < 3000 ? 'second' : 'first'} ${column}`;
    expect([...columns].filter(([name, values]) => values.length !== 1 || values[0] !== expected(Number(name.slice(1))))).to.deep.equal([]);
  });
});
