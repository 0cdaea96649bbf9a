/**
 * Query parameters are text, converted only from the form the document gives them: every integer
 * and boolean query parameter of every operation (found in the operations' own schemas, so a new
 * one is covered too) refuses the spellings joi would otherwise read as the same value.
 */
import { expect } from 'chai';
import { API_OPERATIONS } from '../../src/http/api.ts';
import { useTestApp } from '../support/test-app.ts';
import { createTable, v2Paths } from '../support/v2.ts';

/** Each spelled as a client would put it in a URL, and each read as 1 (or true) without the check. */
const NOT_DECIMAL = ['%201', '1%20', '01', '001', '1e0', '1.0', '%2B1', '1.'];
const NOT_BOOLEAN = ['%20true', 'true%20', 'TRUE', '1'];

/** The query parameters of `type` of each operation, with the operation's path and method. */
function parametersOf(type: 'number' | 'boolean'): Array<{ operation: string; method: string; path: string; name: string }> {
  return API_OPERATIONS.flatMap((operation) => {
    const keys = (operation.query?.describe().keys ?? {}) as Record<string, { type: string }>;
    return Object.entries(keys)
      .filter(([, key]) => key.type === type)
      .map(([name]) => ({ operation: operation.operationId, method: operation.method.toUpperCase(), path: operation.path, name }));
  });
}

describe('query parameters are not coerced', () => {
  const app = useTestApp();
  const url = (path: string) =>
    path
      .replace('{instanceID}', app().instance)
      .replace('{store}', app().storeName)
      .replace('{instance}', app().instance)
      .replace('{table}', 'numbers')
      .replace('{key}', 'r');

  before(async () => {
    await createTable(app(), 'numbers');
    const written = await app().api.request('PUT', `${v2Paths(app()).rows('numbers')}/r`, { json: { cells: [{ family: 'cf', column: 'c', value: 'v' }] } });
    expect(written.status).to.equal(200);
  });

  it('finds the integer query parameters of v1 and v2 (the check below covers each)', () => {
    expect(parametersOf('number').map(({ operation, name }) => `${operation} ${name}`)).to.deep.equal([
      'rows.get versions',
      'rows.scan limit',
      'rows.scan pageSize',
      'rows.scan versions',
      'tables.changes wait',
    ]);
  });

  it('refuses an integer not written in decimal digits with 400 VALIDATION_FAILED naming the parameter, and takes the digits', async () => {
    for (const { method, path, name } of parametersOf('number')) {
      for (const value of NOT_DECIMAL) {
        const response = await app().api.request(method, `${url(path)}?${name}=${value}`);
        expect([response.status, response.body.code], `${name}=${value}`).to.deep.equal([400, 'VALIDATION_FAILED']);
        expect(response.body.errors, `${name}=${value}`).to.deep.equal([{ path: name, message: `${name} must be decimal digits only (no sign, leading zero, exponent, fraction or space)` }]);
      }
      expect((await app().api.request(method, `${url(path)}?${name}=1`)).status, `${name}=1`).to.equal(200);
    }
  });

  it('refuses a boolean other than true or false as they are', async () => {
    expect(parametersOf('boolean').map(({ operation, name }) => `${operation} ${name}`)).to.deep.equal(['rows.scan reverse']);
    for (const { method, path, name } of parametersOf('boolean')) {
      for (const value of NOT_BOOLEAN) {
        const response = await app().api.request(method, `${url(path)}?${name}=${value}`);
        expect([response.status, response.body.code, response.body.errors?.[0]?.path], `${name}=${value}`).to.deep.equal([400, 'VALIDATION_FAILED', name]);
      }
      for (const value of ['true', 'false']) expect((await app().api.request(method, `${url(path)}?${name}=${value}`)).status).to.equal(200);
    }
  });
});
