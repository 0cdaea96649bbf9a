import { expect } from 'chai';
import type { DriverHarnessFactory } from '../support/driver-harness.ts';
import { useTestApp } from '../support/test-app.ts';

/** The insert data cases of the conformance suite, run against the store `store` makes. */
export function insertDataCases(store: DriverHarnessFactory): void {
  describe('POST /v1/{instanceID}/insertData', () => {
    const app = useTestApp({ store });
    const insert = (body: unknown) => app().api.post(`/v1/${app().instance}/insertData`, body);
    const read = (tableName: string, id: string) =>
      app().api.get(`/v1/${app().instance}/readCellData?tableName=${tableName}&id=${encodeURIComponent(id)}`);
    const cell = (columnName: string, columnValue: string, columnFamily = 'cf') => ({ columnFamily, columnName, columnValue });

    before(async () => {
      for (const tableName of ['t', 'limits']) {
        const response = await app().api.post(`/v1/${app().instance}/createTable`, { tableName, columnFamily: 'cf' });
        expect(response.status).to.equal(201);
      }
    });

    it('returns 200 with the number of cells written', async () => {
      const response = await insert({ tableName: 't', rowKeyId: 'row-1', data: [cell('a', '1'), cell('b', '2')] });
      expect(response.status).to.equal(200);
      expect(response.body).to.deep.equal({ instanceID: app().instance, tableName: 't', rowKeyId: 'row-1', cellsWritten: 2 });
      const row = await read('t', 'row-1');
      expect(row.body.data.map((c: { columnValue: string }) => c.columnValue)).to.deep.equal(['1', '2']);
    });

    it('writes all cells of a request with one timestamp', async () => {
      await insert({ tableName: 't', rowKeyId: 'same-time', data: [cell('a', '1'), cell('b', '2'), cell('c', '3')] });
      const row = await read('t', 'same-time');
      expect(new Set(row.body.data.map((c: { timestamp: string }) => c.timestamp)).size).to.equal(1);
    });

    it('returns 404 COLUMN_FAMILY_NOT_FOUND and writes nothing when one cell names a missing family', async () => {
      const response = await insert({
        tableName: 't',
        rowKeyId: 'atomic',
        data: [cell('a', 'written?'), cell('b', 'x', 'no-such-family'), cell('c', 'written?')],
      });
      expect(response.status).to.equal(404);
      expect(response.body).to.include({ code: 'COLUMN_FAMILY_NOT_FOUND' });
      expect(response.body.detail).to.contain('no-such-family');
      const row = await read('t', 'atomic');
      expect(row.status).to.equal(404);
      expect(row.body.code).to.equal('ROW_NOT_FOUND');
    });

    it('leaves an existing row as it was when a write is rejected', async () => {
      await insert({ tableName: 't', rowKeyId: 'kept', data: [cell('a', 'old')] });
      const rejected = await insert({ tableName: 't', rowKeyId: 'kept', data: [cell('a', 'new'), cell('z', 'x', 'nope')] });
      expect(rejected.status).to.equal(404);
      const row = await read('t', 'kept');
      expect(row.body.data).to.have.length(1);
      expect(row.body.data[0].columnValue).to.equal('old');
    });

    it('returns 404 TABLE_NOT_FOUND for a missing table', async () => {
      const response = await insert({ tableName: 'missing', rowKeyId: 'r', data: [cell('a', '1')] });
      expect(response.status).to.equal(404);
      expect(response.body).to.include({ code: 'TABLE_NOT_FOUND' });
    });

    it('returns 404 INSTANCE_NOT_FOUND for an instance the service does not serve', async () => {
      const response = await app().api.post('/v1/elsewhere/insertData', { tableName: 't', rowKeyId: 'r', data: [cell('a', '1')] });
      expect(response.status).to.equal(404);
      expect(response.body.code).to.equal('INSTANCE_NOT_FOUND');
    });

    it('keeps earlier versions and reads back the latest', async () => {
      await insert({ tableName: 't', rowKeyId: 'versions', data: [cell('a', 'v1')] });
      await new Promise((resolve) => setTimeout(resolve, 5));
      await insert({ tableName: 't', rowKeyId: 'versions', data: [cell('a', 'v2'), cell('b', 'only')] });
      const row = await read('t', 'versions');
      expect(row.body.data.map((c: { columnName: string; columnValue: string }) => `${c.columnName}=${c.columnValue}`)).to.deep.equal([
        'a=v2',
        'b=only',
      ]);
    });

    it('stores bytes sent as base64 exactly, and returns them as base64', async () => {
      const name = Buffer.from([0x00, 0xff, 0xfe, 0x80]);
      const value = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
      const response = await insert({
        tableName: 't',
        rowKeyId: 'bytes',
        data: [{ columnFamily: 'cf', columnName: name.toString('base64'), columnValue: value.toString('base64'), encoding: 'base64' }],
      });
      expect(response.status).to.equal(200);
      const row = await read('t', 'bytes');
      expect(row.body.data[0]).to.include({ encoding: 'base64', columnName: name.toString('base64'), columnValue: value.toString('base64') });
    });

    it('reads base64 that happens to be UTF-8 back as text', async () => {
      await insert({
        tableName: 't',
        rowKeyId: 'b64-text',
        data: [{ columnFamily: 'cf', columnName: Buffer.from('né').toString('base64'), columnValue: Buffer.from('ü').toString('base64'), encoding: 'base64' }],
      });
      const row = await read('t', 'b64-text');
      expect(row.body.data[0]).to.deep.include({ columnName: 'né', columnValue: 'ü' });
      expect(row.body.data[0]).to.not.have.property('encoding');
    });

    it('keeps text exactly: empty strings, NUL, emoji and combining characters', async () => {
      const data = [cell('', 'empty name'), cell('e\u0301', ''), cell('nul\u0000', 'a\u0000b'), cell('😀', '\u{1F600}\u00e9')];
      const response = await insert({ tableName: 't', rowKeyId: 'text', data });
      expect(response.status).to.equal(200);
      const row = await read('t', 'text');
      const byName = Object.fromEntries(row.body.data.map((c: { columnName: string; columnValue: string }) => [c.columnName, c.columnValue]));
      expect(byName).to.deep.equal(Object.fromEntries(data.map((c) => [c.columnName, c.columnValue])));
    });

    it('accepts a row key of 4096 bytes and a column name of 16 KiB', async () => {
      const rowKeyId = 'é'.repeat(2048); // 4096 bytes in UTF-8
      const columnName = 'q'.repeat(16 * 1024);
      const response = await insert({ tableName: 'limits', rowKeyId, data: [cell(columnName, 'v')] });
      expect(response.status).to.equal(200);
      const row = await read('limits', rowKeyId);
      expect(row.status).to.equal(200);
      expect(row.body.data[0].columnName).to.equal(columnName);
    });

    it('accepts 100,000 cells in one request, or, where the store publishes a lower mutationsPerRow, refuses them naming it and accepts that many', async function () {
      this.timeout(120_000);
      const most = app().store.limits.mutationsPerRow;
      if (most < 100_000) {
        // A store whose backend commits fewer changes at once (Spanner: 80,000 mutations) says so
        // in its limits, and holds a request to them before anything is written.
        const data = Array.from({ length: 100_000 }, (_, i) => cell(`c${i}`, String(i)));
        const refused = await insert({ tableName: 'limits', rowKeyId: 'widest', data });
        expect(refused.status).to.equal(400);
        expect(refused.body).to.include({ code: 'VALIDATION_FAILED', limit: 'mutationsPerRow' });
        expect((await read('limits', 'widest')).status).to.equal(404);
        const fits = await insert({ tableName: 'limits', rowKeyId: 'widest', data: data.slice(0, most) });
        expect(fits.status).to.equal(200);
        expect(fits.body.cellsWritten).to.equal(most);
        return;
      }
      if (app().traits.fastWideWrites) {
        const data = Array.from({ length: 100_000 }, (_, i) => cell(`c${String(i).padStart(6, '0')}`, String(i)));
        const response = await insert({ tableName: 'limits', rowKeyId: 'widest', data });
        expect(response.status).to.equal(200);
        expect(response.body.cellsWritten).to.equal(100_000);
        const row = await read('limits', 'widest');
        expect(row.body.data).to.have.length(100_000);
        expect(row.body.data[99_999]).to.include({ columnName: 'c099999', columnValue: '99999' });
        return;
      }
      // The emulator takes over 30 s to apply 100,000 mutations (production Bigtable does not), so
      // the last cell names a missing family: the request passes validation, reaches the store, and
      // is rejected there before anything is written.
      const data = Array.from({ length: 100_000 }, (_, i) => cell(`c${i}`, String(i), i === 99_999 ? 'absent' : 'cf'));
      const response = await insert({ tableName: 'limits', rowKeyId: 'widest', data });
      expect(response.status).to.equal(404);
      expect(response.body.code).to.equal('COLUMN_FAMILY_NOT_FOUND');
    });

    it('writes and reads back a wide row (10,000 cells) and a tall cell (4 MiB)', async function () {
      this.timeout(60_000);
      const data = Array.from({ length: 10_000 }, (_, i) => cell(`c${String(i).padStart(5, '0')}`, String(i)));
      const wide = await insert({ tableName: 'limits', rowKeyId: 'wide', data });
      expect(wide.status).to.equal(200);
      expect(wide.body.cellsWritten).to.equal(10_000);
      const row = await read('limits', 'wide');
      expect(row.body.data).to.have.length(10_000);
      expect(row.body.data[9_999]).to.include({ columnName: 'c09999', columnValue: '9999' });

      // Tall text is made into bytes a slice at a time: a pair of surrogates lies across each slice's end.
      const big = `v${'😀'.repeat(1024 * 1024 - 1)}`;
      expect((await insert({ tableName: 'limits', rowKeyId: 'tall', data: [cell('big', big)] })).status).to.equal(200);
      expect((await read('limits', 'tall')).body.data[0].columnValue).to.equal(big);

      // Large values that JSON must escape, and bytes that are not UTF-8 (answered in base64).
      const quoted = `"${'w'.repeat(128 * 1024)}\\\n`;
      const binary = Buffer.concat([Buffer.from([0xff]), Buffer.alloc(128 * 1024, 7)]).toString('base64');
      const both = [cell('quoted', quoted), { columnFamily: 'cf', columnName: Buffer.from('binary').toString('base64'), columnValue: binary, encoding: 'base64' }];
      expect((await insert({ tableName: 'limits', rowKeyId: 'escaped', data: both })).status).to.equal(200);
      const escaped = (await read('limits', 'escaped')).body.data;
      expect(escaped.map((each: { columnValue: string }) => each.columnValue)).to.deep.equal([binary, quoted]);
      expect(escaped[0]).to.include({ columnName: Buffer.from('binary').toString('base64'), encoding: 'base64' });
    });

    describe('validation', () => {
      const invalid = async (body: unknown): Promise<Array<{ path: string; message: string }>> => {
        const response = await insert(body);
        expect(response.status).to.equal(400);
        expect(response.body.code).to.equal('VALIDATION_FAILED');
        return response.body.errors;
      };

      it('names the path of each bad cell field', async () => {
        const errors = await invalid({
          tableName: 't',
          rowKeyId: 'r',
          data: [cell('a', '1'), { columnFamily: 'cf', columnName: 'b' }, { columnFamily: 'cf', columnName: 'c', columnValue: 3 }],
        });
        expect(errors.map((e) => e.path)).to.deep.equal(['data[1].columnValue', 'data[2].columnValue']);
      });

      it('rejects unknown fields', async () => {
        const errors = await invalid({ tableName: 't', rowKeyId: 'r', data: [{ ...cell('a', '1'), ttl: 5 }], extra: true });
        expect(errors.map((e) => e.path)).to.have.members(['data[0].ttl', 'extra']);
      });

      it('rejects an empty data list and more than 100,000 cells', async () => {
        expect((await invalid({ tableName: 't', rowKeyId: 'r', data: [] }))[0]?.path).to.equal('data');
        const tooMany = Array.from({ length: 100_001 }, (_, i) => cell(`c${i}`, ''));
        expect((await invalid({ tableName: 't', rowKeyId: 'r', data: tooMany }))[0]?.path).to.equal('data');
      });

      it('rejects two cells for the same column, also when one is base64', async () => {
        const errors = await invalid({
          tableName: 't',
          rowKeyId: 'r',
          data: [cell('a', '1'), cell('b', '2'), { columnFamily: 'cf', columnName: Buffer.from('a').toString('base64'), columnValue: '', encoding: 'base64' }],
        });
        expect(errors).to.deep.equal([{ path: 'data[2]', message: 'data[2] writes the same column as data[0]' }]);
        const binary = (name: string) => ({ columnFamily: 'cf', columnName: name, columnValue: '', encoding: 'base64' });
        const twice = await invalid({ tableName: 't', rowKeyId: 'r', data: [binary('/w=='), binary('/v8='), cell('\u00ff', ''), cell('\u0001/w==', ''), binary('/w==')] });
        expect(twice).to.deep.equal([{ path: 'data[4]', message: 'data[4] writes the same column as data[0]' }]);
      });

      it('rejects a row key over 4096 bytes and a column name over 16 KiB', async () => {
        const errors = await invalid({ tableName: 't', rowKeyId: 'é'.repeat(2048) + 'x', data: [cell('q'.repeat(16 * 1024 + 1), '')] });
        expect(errors.map((e) => e.path)).to.deep.equal(['rowKeyId', 'data[0].columnName']);
      });

      it('rejects an empty row key', async () => {
        expect((await invalid({ tableName: 't', rowKeyId: '', data: [cell('a', '')] }))[0]?.path).to.equal('rowKeyId');
      });

      it('rejects lone UTF-16 surrogates, which have no UTF-8 form', async () => {
        const errors = await invalid({ tableName: 't', rowKeyId: 'r\ud800', data: [cell('a\udc00', 'v\ud83d')] });
        expect(errors.map((e) => e.path)).to.deep.equal(['rowKeyId', 'data[0].columnName', 'data[0].columnValue']);
      });

      it('rejects base64 that is not strict RFC 4648 and an unknown encoding', async () => {
        const errors = await invalid({
          tableName: 't',
          rowKeyId: 'r',
          data: [
            { columnFamily: 'cf', columnName: 'not base64!', columnValue: 'AA==', encoding: 'base64' },
            { columnFamily: 'cf', columnName: 'AA==', columnValue: 'AA', encoding: 'base64' },
            { columnFamily: 'cf', columnName: 'x', columnValue: 'y', encoding: 'hex' },
          ],
        });
        expect(errors.map((e) => e.path)).to.deep.equal(['data[0].columnName', 'data[1].columnValue', 'data[2].encoding']);
      });

      it('rejects a bad table name and family name', async () => {
        const errors = await invalid({ tableName: 'a/b', rowKeyId: 'r', data: [cell('a', '1', 'fam ily')] });
        expect(errors.map((e) => e.path)).to.deep.equal(['tableName', 'data[0].columnFamily']);
      });
    });
  });
}
