import { expect } from 'chai';
import type { DriverHarnessFactory } from '../support/driver-harness.ts';
import { useTestApp } from '../support/test-app.ts';

/** The create table cases of the conformance suite, run against the store `store` makes. */
export function createTableCases(store: DriverHarnessFactory): void {
  describe('POST /v1/{instanceID}/createTable', () => {
    const app = useTestApp({ store, maxBodyBytes: 2048 });
    const path = () => `/v1/${app().instance}/createTable`;

    it('returns 201 with the created table', async () => {
      const response = await app().api.post(path(), { tableName: 'orders', columnFamily: 'cf' });
      expect(response.status).to.equal(201);
      expect(response.body).to.deep.equal({ instanceID: app().instance, tableName: 'orders', columnFamily: 'cf' });
    });

    it('accepts names at the length limits (table 50, family 64 characters)', async () => {
      const tableName = `t${'x'.repeat(49)}`;
      const columnFamily = `f${'-_.'.repeat(21)}`;
      const response = await app().api.post(path(), { tableName, columnFamily });
      expect(response.status).to.equal(201);
      expect(response.body).to.include({ tableName, columnFamily });
    });

    it('returns 409 TABLE_ALREADY_EXISTS for an existing table, and leaves it unchanged', async () => {
      await app().api.post(path(), { tableName: 'twice', columnFamily: 'first' });
      const response = await app().api.post(path(), { tableName: 'twice', columnFamily: 'second' });
      expect(response.status).to.equal(409);
      expect(response.body).to.include({ code: 'TABLE_ALREADY_EXISTS', type: '/problems/table-already-exists' });

      const write = await app().api.post(`/v1/${app().instance}/insertData`, {
        tableName: 'twice',
        rowKeyId: 'r',
        data: [{ columnFamily: 'first', columnName: 'c', columnValue: 'v' }],
      });
      expect(write.status).to.equal(200);
    });

    it('returns 404 INSTANCE_NOT_FOUND for an instance the service does not serve', async () => {
      const response = await app().api.post('/v1/not-served/createTable', { tableName: 'x', columnFamily: 'cf' });
      expect(response.status).to.equal(404);
      expect(response.body).to.include({ code: 'INSTANCE_NOT_FOUND', instance: '/v1/not-served/createTable' });
    });

    it('returns 400 VALIDATION_FAILED naming every bad field', async () => {
      const response = await app().api.post(path(), { tableName: '-starts-with-dash', columnFamily: 'has space', extra: 1 });
      expect(response.status).to.equal(400);
      expect(response.body.code).to.equal('VALIDATION_FAILED');
      expect(response.body.errors.map((error: { path: string }) => error.path)).to.have.members(['tableName', 'columnFamily', 'extra']);
    });

    it('returns 400 VALIDATION_FAILED for names over the limits', async () => {
      const response = await app().api.post(path(), { tableName: 'x'.repeat(51), columnFamily: 'f'.repeat(65) });
      expect(response.status).to.equal(400);
      expect(response.body.errors.map((error: { path: string }) => error.path)).to.have.members(['tableName', 'columnFamily']);
    });

    it('returns 400 VALIDATION_FAILED for values of the wrong type, without coercing', async () => {
      const response = await app().api.post(path(), { tableName: 12345, columnFamily: ['cf'] });
      expect(response.status).to.equal(400);
      expect(response.body.errors).to.have.length(2);
    });

    it('returns 400 VALIDATION_FAILED when the body is missing', async () => {
      const response = await app().api.request('POST', path());
      expect(response.status).to.equal(400);
      expect(response.body.errors).to.deep.equal([{ path: '', message: 'request body is required' }]);
    });

    it('returns 400 MALFORMED_JSON for a body that is not JSON', async () => {
      const response = await app().api.request('POST', path(), {
        body: '{"tableName": "x",',
        headers: { 'content-type': 'application/json' },
      });
      expect(response.status).to.equal(400);
      expect(response.body.code).to.equal('MALFORMED_JSON');
    });

    it('returns 400 MALFORMED_JSON for a JSON scalar or a __proto__ key', async () => {
      for (const body of ['"a string"', '{"__proto__": {"polluted": true}, "tableName": "p", "columnFamily": "cf"}']) {
        const response = await app().api.request('POST', path(), { body, headers: { 'content-type': 'application/json' } });
        expect(response.status, body).to.equal(400);
        expect(response.body.code, body).to.equal('MALFORMED_JSON');
      }
      expect(({} as Record<string, unknown>)['polluted']).to.equal(undefined);
    });

    it('returns 415 UNSUPPORTED_MEDIA_TYPE for a body that is not application/json', async () => {
      const response = await app().api.request('POST', path(), {
        body: 'tableName=x&columnFamily=cf',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
      });
      expect(response.status).to.equal(415);
      expect(response.body.code).to.equal('UNSUPPORTED_MEDIA_TYPE');
    });

    it('returns 415 UNSUPPORTED_MEDIA_TYPE for JSON in a charset other than UTF-8', async () => {
      const response = await app().api.request('POST', path(), {
        body: Buffer.from('{"tableName":"x","columnFamily":"cf"}', 'utf16le'),
        headers: { 'content-type': 'application/json; charset=utf-16' },
      });
      expect(response.status).to.equal(415);
      expect(response.body.code).to.equal('UNSUPPORTED_MEDIA_TYPE');
    });

    it('returns 413 PAYLOAD_TOO_LARGE for a body over MAX_BODY_BYTES', async () => {
      const response = await app().api.post(path(), { tableName: 'big', columnFamily: 'cf', padding: 'x'.repeat(4096) });
      expect(response.status).to.equal(413);
      expect(response.body.code).to.equal('PAYLOAD_TOO_LARGE');
    });
  });
}
