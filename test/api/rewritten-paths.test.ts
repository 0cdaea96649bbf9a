/**
 * Paths that URL parsers rewrite never reach another resource. fetch (like browsers, curl and
 * generated clients) removes the dot segments `.` and `..`, also sent as %2E, so a row path with
 * such a key arrives as the table's path or the rows' with a trailing slash: routing is strict, so
 * that is 404, never the table, a scan or another row. The same keys sent as they are (a raw
 * client) are refused with the way to send them; the rows themselves are reached with
 * ?encoding=base64 and batch bodies. Run on two stores, with authentication off and with an
 * admin's key, since each was seen losing a table.
 */
import { join } from 'node:path';
import { writeFileSync } from 'node:fs';
import { expect } from 'chai';
import { type KeyEntry, keysFile, newApiKey, tempDirectory } from '../support/access-files.ts';
import type { ApiClient, ApiResponse } from '../support/api-client.ts';
import { sendRaw } from '../support/raw-http.ts';
import type { DriverHarnessFactory } from '../support/driver-harness.ts';
import { harness as embeddedHarness } from '../support/harnesses/embedded.ts';
import { harness as redisHarness } from '../support/harnesses/redis.ts';
import { type TestAppOptions, useTestApp } from '../support/test-app.ts';
import { v2Paths } from '../support/v2.ts';

const STORES: ReadonlyArray<[string, DriverHarnessFactory]> = [
  ['embedded', embeddedHarness],
  ['redis', redisHarness],
];

/** How fetch sends each row path: the key removed, the path ending in "/". */
const REWRITTEN_KEYS: ReadonlyArray<[string, 'table' | 'rows']> = [
  ['..', 'table'],
  ['%2E%2E', 'table'],
  ['.%2e', 'table'],
  ['.', 'rows'],
  ['%2E', 'rows'],
];

/** The dot keys as a raw client sends them, each reaching the service intact. */
const RAW_DOT_KEYS: ReadonlyArray<[string, string]> = [
  ['..', '..'],
  ['%2E%2E', '..'],
  ['%2e.', '..'],
  ['.', '.'],
  ['%2e', '.'],
];

function routeNotFound(response: ApiResponse, what: string): void {
  expect([response.status, response.body.code], `${what}: ${JSON.stringify(response.body)}`).to.deep.equal([404, 'ROUTE_NOT_FOUND']);
}

for (const [storeName, store] of STORES) {
  for (const mode of ['none', 'apikey'] as const) {
    describe(`paths that URL parsers rewrite (${storeName}, AUTH_MODE ${mode})`, () => {
      const files = tempDirectory();
      after(() => files.remove());
      const admin: KeyEntry = { name: 'admin', key: newApiKey(), role: 'admin', instances: ['*'] };
      const auth: TestAppOptions['auth'] =
        mode === 'none'
          ? undefined
          : () => {
              const apiKeysFile = join(files.path, 'keys.json');
              writeFileSync(apiKeysFile, keysFile([admin]));
              return { config: { modes: ['apikey'], apiKeysFile, protectDocs: false } };
            };
      const app = useTestApp({ store, ...(auth === undefined ? {} : { auth }) });
      const credential: ReadonlyArray<[string, string]> = mode === 'none' ? [] : [['x-api-key', admin.key]];
      const api = (): ApiClient => (mode === 'none' ? app().api : app().api.as({ 'x-api-key': admin.key }));
      const raw = (method: string, path: string) => sendRaw(app().baseUrl, { method, path, headers: credential }, app().api);

      /** Table `t` with the rows `a`, `.` and `..`, written in a batch body. */
      before(async () => {
        const paths = v2Paths(app());
        expect((await api().post(paths.tables, { name: 't', families: [{ name: 'cf', maxVersions: 1 }] })).status).to.equal(201);
        const entries = ['a', '.', '..'].map((key) => ({ key, mutations: [{ set: { family: 'cf', column: 'c', value: key } }] }));
        const written = await api().post(`${paths.rows('t')}:batchWrite`, { entries });
        expect(written.body.results.map((result: { code: string }) => result.code)).to.deep.equal(['OK', 'OK', 'OK']);
      });

      /** Whether the table is there with its three rows, read in a batch body. */
      async function tableSurvives(): Promise<void> {
        const paths = v2Paths(app());
        expect((await api().get(paths.table('t'))).status, 'the table').to.equal(200);
        const read = await api().post(`${paths.rows('t')}:batchGet`, { keys: ['a', '.', '..'] });
        expect(read.body.rows.map((row: { key: string; found: boolean }) => [row.key, row.found])).to.deep.equal([
          ['a', true],
          ['.', true],
          ['..', true],
        ]);
      }

      it('answers 404 ROUTE_NOT_FOUND to the row paths fetch rewrites, for every method, and the table survives', async () => {
        const { rows, table } = v2Paths(app());
        for (const [key, becomes] of REWRITTEN_KEYS) {
          const path = `${rows('t')}/${key}`;
          // What fetch sends: the key is gone and the path ends in "/".
          expect(new URL(path, app().baseUrl).pathname, key).to.equal(becomes === 'table' ? `${table('t')}/` : `${rows('t')}/`);
          for (const method of ['GET', 'DELETE']) {
            const response = await api().request(method, path);
            routeNotFound(response, `${method} ${key}`);
            expect(response.body.detail).to.contain('?encoding=base64');
          }
          routeNotFound(await api().request('PUT', path, { json: { cells: [{ family: 'cf', column: 'c', value: 'x' }] } }), `PUT ${key}`);
          routeNotFound(await api().request('POST', `${path}?encoding=base64`), `POST ${key}`);
        }
        await tableSurvives();
      });

      it('answers 404 ROUTE_NOT_FOUND to a trailing slash, on v2 and v1, and deletes nothing', async () => {
        const { rows, table, tables } = v2Paths(app());
        for (const [method, path] of [
          ['DELETE', `${rows('t')}/a/`],
          ['GET', `${rows('t')}/a/`],
          ['POST', `${rows('t')}/a:mutate/`],
          ['GET', `${rows('t')}/`],
          ['DELETE', `${table('t')}/`],
          ['GET', `${tables}/`],
          ['DELETE', `/v1/${app().instance}/deleteTable/`],
          ['POST', `/v1/${app().instance}/createTable/`],
          ['GET', `/v1/${app().instance}/readCellData/?tableName=t&id=a`],
        ] as const) {
          routeNotFound(await raw(method, path), `raw ${method} ${path}`);
          routeNotFound(await api().request(method, path, method === 'GET' ? {} : { json: { tableList: ['t'] } }), `fetch ${method} ${path}`);
        }
        await tableSurvives();
      });

      it('refuses the keys "." and ".." sent as they are, however encoded, saying how to send them', async () => {
        const { rows } = v2Paths(app());
        for (const [sent, key] of RAW_DOT_KEYS) {
          for (const [method, suffix] of [['GET', ''], ['DELETE', ''], ['POST', ':mutate']] as const) {
            const response = await raw(method, `${rows('t')}/${sent}${suffix}`);
            expect([response.status, response.body.code], `${method} ${sent}`).to.deep.equal([400, 'VALIDATION_FAILED']);
            expect(response.body.errors[0].path).to.equal('key');
            expect(response.body.detail).to.contain(`"${key}"`).and.to.contain('?encoding=base64');
          }
        }
        await tableSurvives();
      });

      it('refuses a raw "\\" in a key, which fetch would send as "/", and hints %2F for a "/"', async () => {
        const { rows } = v2Paths(app());
        const backslash = await raw('DELETE', `${rows('t')}/a\\b`);
        expect([backslash.status, backslash.body.code]).to.deep.equal([400, 'VALIDATION_FAILED']);
        expect(backslash.body.detail).to.contain('%5C');
        // fetch turns the "\" into "/": a path no endpoint has.
        const split = await api().request('DELETE', `${rows('t')}/a\\b`);
        routeNotFound(split, 'a\\b by fetch');
        expect(split.body.detail).to.contain('%2F');
        const slash = await raw('DELETE', `${rows('t')}/a/b`);
        routeNotFound(slash, 'a/b');
        expect(slash.body.detail).to.contain('A "/" in a row key must be sent percent-encoded, as %2F');
        await tableSurvives();
      });

      it('reaches the rows "." and ".." with ?encoding=base64, and deletes only them', async () => {
        const { rows, table } = v2Paths(app());
        for (const [key, base64url] of [['.', 'Lg'], ['..', 'Li4']] as const) {
          const read = await api().get(`${rows('t')}/${base64url}?encoding=base64`);
          expect([read.status, read.body.key], key).to.deep.equal([200, Buffer.from(key).toString('base64')]);
        }
        expect((await api().request('DELETE', `${rows('t')}/Li4?encoding=base64`)).status).to.equal(204);
        expect((await api().get(`${rows('t')}/Li4?encoding=base64`)).body.code).to.equal('ROW_NOT_FOUND');
        expect((await api().get(table('t'))).status, 'the table').to.equal(200);
        expect((await api().get(`${rows('t')}/a`)).status, 'row a').to.equal(200);
        const entries = [{ key: '..', mutations: [{ set: { family: 'cf', column: 'c', value: '..' } }] }];
        expect((await api().post(`${rows('t')}:batchWrite`, { entries })).body.results[0].code).to.equal('OK');
      });
    });
  }
}
