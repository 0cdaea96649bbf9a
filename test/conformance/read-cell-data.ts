import { expect } from 'chai';
import type { DriverHarnessFactory } from '../support/driver-harness.ts';
import { useTestApp } from '../support/test-app.ts';

/** The read cell data cases of the conformance suite, run against the store `store` makes. */
export function readCellDataCases(store: DriverHarnessFactory): void {
  describe('GET /v1/{instanceID}/readCellData', () => {
    const app = useTestApp({ store });
    const read = (query: string) => app().api.get(`/v1/${app().instance}/readCellData?${query}`);
    const insert = (rowKeyId: string, data: Array<Record<string, string>>) =>
      app().api.post(`/v1/${app().instance}/insertData`, { tableName: 't', rowKeyId, data });

    before(async () => {
      // The v1 API creates tables with one family; a second one, sorting first, is made through the store.
      await app().store.createTable({ instance: app().instance, table: 't' }, [{ name: 'b-family' }, { name: 'a-family' }], {
        deadline: Date.now() + 5000,
      });
    });

    it('returns 200 with the row in the shape insertData accepts', async () => {
      await insert('shape', [{ columnFamily: 'b-family', columnName: 'status', columnValue: 'shipped' }]);
      const response = await read('tableName=t&id=shape');
      expect(response.status).to.equal(200);
      expect(response.body).to.deep.include({ instanceID: app().instance, tableName: 't', rowKeyId: 'shape' });
      expect(response.body.data).to.have.length(1);
      expect(response.body.data[0]).to.have.all.keys('columnFamily', 'columnName', 'columnValue', 'timestamp');
    });

    it('orders cells by family, then by column name in byte order', async () => {
      const names = ['é', 'a', 'Z', 'aa', '_', '~', '0'];
      const response = await insert('order', [
        ...names.map((columnName) => ({ columnFamily: 'b-family', columnName, columnValue: columnName })),
        { columnFamily: 'a-family', columnName: 'zzz', columnValue: 'first' },
        { columnFamily: 'b-family', columnName: Buffer.from([0xff]).toString('base64'), columnValue: 'AA==', encoding: 'base64' },
      ]);
      expect(response.status).to.equal(200);
      const row = await read('tableName=t&id=order');
      const columns = row.body.data.map((cell: { columnFamily: string; columnName: string }) => `${cell.columnFamily}:${cell.columnName}`);
      const byteOrder = [...names].sort((x, y) => Buffer.compare(Buffer.from(x), Buffer.from(y)));
      expect(columns).to.deep.equal(['a-family:zzz', ...byteOrder.map((name) => `b-family:${name}`), 'b-family:/w==']);
    });

    it('gives timestamps in RFC 3339 with microseconds, close to the time of the write', async () => {
      const before = Date.now();
      await insert('time', [{ columnFamily: 'b-family', columnName: 'c', columnValue: 'v' }]);
      const { timestamp } = (await read('tableName=t&id=time')).body.data[0];
      expect(timestamp).to.match(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/);
      const written = Date.parse(timestamp);
      expect(written).to.be.within(before - 1, Date.now() + 1);
    });

    it('reads row keys with reserved characters, percent-encoded', async () => {
      const id = 'a b/c?d=e&f#g+h%i';
      await insert(id, [{ columnFamily: 'b-family', columnName: 'c', columnValue: 'found' }]);
      const response = await read(`tableName=t&id=${encodeURIComponent(id)}`);
      expect(response.status).to.equal(200);
      expect(response.body.rowKeyId).to.equal(id);
    });

    it('reads the version with the highest timestamp, whatever the order versions were written in', async () => {
      const ref = { instance: app().instance, table: 't' };
      const version = (value: string, timestampMicros: bigint) => ({
        type: 'set' as const,
        family: 'a-family',
        column: Buffer.from('q'),
        value: Buffer.from(value),
        timestampMicros,
      });
      const deadline = Date.now() + 5000;
      await app().store.mutateRow(ref, Buffer.from('versions'), [version('newest', 3_000_000n)], { deadline });
      await app().store.mutateRow(ref, Buffer.from('versions'), [version('oldest', 1_000_000n)], { deadline });
      await app().store.mutateRow(ref, Buffer.from('versions'), [version('middle', 2_000_000n)], { deadline });
      const { body } = await read('tableName=t&id=versions');
      expect(body.data).to.deep.equal([
        { columnFamily: 'a-family', columnName: 'q', columnValue: 'newest', timestamp: '1970-01-01T00:00:03.000000Z' },
      ]);
    });

    it('returns 404 ROW_NOT_FOUND for a row without cells', async () => {
      const response = await read('tableName=t&id=nothing-here');
      expect(response.status).to.equal(404);
      expect(response.body).to.include({ code: 'ROW_NOT_FOUND', type: '/problems/row-not-found' });
    });

    it('returns 404 TABLE_NOT_FOUND for a missing table', async () => {
      const response = await read('tableName=nope&id=r');
      expect(response.status).to.equal(404);
      expect(response.body.code).to.equal('TABLE_NOT_FOUND');
    });

    it('returns 404 INSTANCE_NOT_FOUND for an instance the service does not serve', async () => {
      const response = await app().api.get('/v1/unknown-instance/readCellData?tableName=t&id=r');
      expect(response.status).to.equal(404);
      expect(response.body.code).to.equal('INSTANCE_NOT_FOUND');
      // How to fix it: the setting, and (every caller may use them all here) the served instances.
      expect(response.body.detail).to.contain('INSTANCE_IDS').and.contain(`It serves ${app().instances.map((name) => `"${name}"`).join(', ')}.`);
    });

    describe('validation', () => {
      const invalid = async (query: string): Promise<string[]> => {
        const response = await read(query);
        expect(response.status, query).to.equal(400);
        expect(response.body.code).to.equal('VALIDATION_FAILED');
        return response.body.errors.map((error: { path: string }) => error.path);
      };

      it('requires tableName and id', async () => {
        expect(await invalid('')).to.deep.equal(['tableName', 'id']);
      });

      it('rejects a repeated parameter', async () => {
        expect(await invalid('tableName=t&id=a&id=b')).to.deep.equal(['id']);
      });

      it('rejects unknown parameters', async () => {
        expect(await invalid('tableName=t&id=a&limit=5')).to.deep.equal(['limit']);
      });

      it('rejects a row key that is not valid percent-encoded UTF-8 instead of reading another row', async () => {
        expect(await invalid('tableName=t&id=%FF')).to.deep.equal(['id']);
        expect(await invalid('tableName=t&id=%E0%A4')).to.deep.equal(['id']);
      });

      it('rejects a table name shaped like a path', async () => {
        expect(await invalid(`tableName=${encodeURIComponent('../t')}&id=r`)).to.deep.equal(['tableName']);
      });
    });
  });
}
