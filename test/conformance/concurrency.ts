import { expect } from 'chai';
import type { DriverHarnessFactory } from '../support/driver-harness.ts';
import { useTestApp } from '../support/test-app.ts';

/** Concurrent callers: the cases of the conformance suite that race requests against each other. */
export function concurrencyCases(store: DriverHarnessFactory): void {
  describe('concurrent requests', () => {
    const app = useTestApp({ store });
    const path = (endpoint: string) => `/v1/${app().instance}/${endpoint}`;
    const insert = (rowKeyId: string, value: string) =>
      app().api.post(path('insertData'), {
        tableName: 'race',
        rowKeyId,
        data: ['a', 'b', 'c'].map((columnName) => ({ columnFamily: 'cf', columnName, columnValue: value })),
      });
    const read = (id: string) => app().api.get(`${path('readCellData')}?tableName=race&id=${encodeURIComponent(id)}`);

    before(async () => {
      expect((await app().api.post(path('createTable'), { tableName: 'race', columnFamily: 'cf' })).status).to.equal(201);
    });

    it('acknowledges every write of many writers to different rows, and keeps them all', async () => {
      const rows = Array.from({ length: 200 }, (_, i) => `row-${i}`);
      const written = await Promise.all(rows.map((row) => insert(row, row)));
      expect(written.map((response) => response.status)).to.deep.equal(rows.map(() => 200));
      const reads = await Promise.all(rows.map((row) => read(row)));
      for (const [index, response] of reads.entries()) {
        expect(response.body.data.map((cell: { columnValue: string }) => cell.columnValue)).to.deep.equal(Array(3).fill(rows[index]));
      }
    });

    it('never mixes the cells of racing writes to one row: each write is atomic', async () => {
      const values = Array.from({ length: 50 }, (_, i) => `writer-${i}`);
      const written = await Promise.all(values.map((value) => insert('contended', value)));
      expect(written.every((response) => response.status === 200)).to.equal(true);
      const { body } = await read('contended');
      const seen = new Set(body.data.map((cell: { columnValue: string }) => cell.columnValue));
      expect(seen.size, JSON.stringify(body.data)).to.equal(1);
      expect(values).to.include([...seen][0]);
    });

    it('creates a table once when many callers race to create it', async () => {
      const responses = await Promise.all(
        Array.from({ length: 10 }, () => app().api.post(path('createTable'), { tableName: 'once', columnFamily: 'cf' })),
      );
      const statuses = responses.map((response) => response.status).sort();
      expect(statuses).to.deep.equal([201, ...Array(9).fill(409)]);
    });
  });
}
