/**
 * The authorization matrix: every auth mode × role × grant scope × instance × endpoint of v1, and
 * of v2 on the default store, over
 * HTTP against the real app and store, with real API keys and real signed tokens. Each answer is
 * checked against the served OpenAPI document by the ApiClient. v1 serves the default store, so
 * a grant covers a v1 instance when it names it bare or with the default store's name, or names
 * all of that store's instances, or everything; a grant on another store covers none.
 */
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'chai';
import type { AuthMode } from '../../src/config.ts';
import { type KeyEntry, keysFile, newApiKey, tempDirectory } from '../support/access-files.ts';
import type { ApiClient, ApiResponse } from '../support/api-client.ts';
import { TEST_AUDIENCE, TestIssuer } from '../support/test-issuer.ts';
import { randomInstanceId, useTestApp } from '../support/test-app.ts';

type Role = 'reader' | 'writer' | 'admin';
type Endpoint = 'createTable' | 'insertData' | 'readCellData' | 'deleteTable';
type V2Endpoint =
  | 'tables.list'
  | 'tables.create'
  | 'tables.get'
  | 'rows.write'
  | 'rows.get'
  | 'rows.mutate'
  | 'rows.scan'
  | 'rows.batchGet'
  | 'rows.batchWrite'
  | 'rows.checkAndMutate'
  | 'rows.readModifyWrite'
  | 'tables.changes'
  | 'rows.delete'
  | 'tables.delete'
  | 'tables.batchDelete';
type Form = 'X-API-Key' | 'Bearer API key' | 'Bearer RS256 token' | 'Bearer ES256 token';

// The contract, written out again rather than imported: the test must not share the code's mistakes.
const RANK: Record<Role, number> = { reader: 0, writer: 1, admin: 2 };
const NEEDS: Record<Endpoint | V2Endpoint, Role> = {
  createTable: 'admin',
  insertData: 'writer',
  readCellData: 'reader',
  deleteTable: 'admin',
  'tables.list': 'reader',
  'tables.create': 'admin',
  'tables.get': 'reader',
  'rows.write': 'writer',
  'rows.get': 'reader',
  'rows.mutate': 'writer',
  'rows.scan': 'reader',
  'rows.batchGet': 'reader',
  'rows.batchWrite': 'writer',
  'rows.checkAndMutate': 'writer',
  'rows.readModifyWrite': 'writer',
  'tables.changes': 'reader',
  'rows.delete': 'writer',
  'tables.delete': 'admin',
  'tables.batchDelete': 'admin',
};
const ROLES: readonly Role[] = ['reader', 'writer', 'admin'];
const SCOPES = ['first instance', 'all instances', "first instance, with the store's name", "the store's every instance", 'another store'] as const;
type Scope = (typeof SCOPES)[number];

/** The grant's `instances` for a scope, on the served instances of the store named `store`. */
function scopeEntries(scope: Scope, instances: readonly string[], store: string): string[] {
  const first = instances[0] ?? '';
  switch (scope) {
    case 'first instance':
      return [first];
    case 'all instances':
      return ['*'];
    case "first instance, with the store's name":
      return [`${store}/${first}`];
    case "the store's every instance":
      return [`${store}/*`];
    case 'another store':
      return ['cache/*', `cache/${first}`];
  }
}

/** Whether the scope covers an instance of the default store (written out, not computed from the entries). */
function scopeCovers(scope: Scope, instance: string, served: readonly string[]): boolean {
  switch (scope) {
    case 'first instance':
    case "first instance, with the store's name":
      return instance === served[0];
    case 'all instances':
    case "the store's every instance":
      return true;
    case 'another store':
      return false;
  }
}

interface Principal {
  readonly role: Role;
  readonly scope: Scope;
  readonly id: string;
  readonly key: string;
  readonly subject: string;
}

const PRINCIPALS: readonly Principal[] = ROLES.flatMap((role) =>
  SCOPES.map((scope) => {
    const id = `${role}-${SCOPES.indexOf(scope)}`;
    return { role, scope, id, key: newApiKey(), subject: `system:serviceaccount:test:${id}` };
  }),
);

const MODES: ReadonlyArray<{ modes: AuthMode[]; forms: Form[] }> = [
  { modes: ['apikey'], forms: ['X-API-Key', 'Bearer API key'] },
  { modes: ['oidc'], forms: ['Bearer RS256 token', 'Bearer ES256 token'] },
  { modes: ['apikey', 'oidc'], forms: ['X-API-Key', 'Bearer API key', 'Bearer RS256 token', 'Bearer ES256 token'] },
];

/** What the answer must be: the operation's success, 403, or (granted, but not served) 404. */
function expectedOutcome(principal: Principal, endpoint: Endpoint | V2Endpoint, instance: string, served: readonly string[]): 'allowed' | 403 | 404 {
  if (RANK[principal.role] < RANK[NEEDS[endpoint]] || !scopeCovers(principal.scope, instance, served)) return 403;
  return served.includes(instance) ? 'allowed' : 404;
}

for (const { modes, forms } of MODES) {
  describe(`authorization matrix with AUTH_MODE ${modes.join(',')}`, function () {
    this.timeout(120_000);
    let issuer: TestIssuer;
    const files = tempDirectory();
    before(async () => {
      issuer = await TestIssuer.start();
    });
    const app = useTestApp({
      instanceCount: 2,
      auth: (instances, store) => {
        const grantsOf = (principal: Principal) => scopeEntries(principal.scope, instances, store);
        const keys: KeyEntry[] = PRINCIPALS.map((p) => ({ name: p.id, key: p.key, role: p.role, instances: grantsOf(p) }));
        writeFileSync(join(files.path, 'keys.json'), keysFile(keys));
        const grants = PRINCIPALS.map((p) => ({ subject: p.subject, role: p.role, instances: grantsOf(p) }));
        writeFileSync(join(files.path, 'grants.json'), JSON.stringify({ grants }));
        return {
          config: {
            modes,
            protectDocs: false,
            ...(modes.includes('apikey') ? { apiKeysFile: join(files.path, 'keys.json') } : {}),
            ...(modes.includes('oidc')
              ? { oidc: { issuer: issuer.issuer, audiences: [TEST_AUDIENCE], grantsFile: join(files.path, 'grants.json') } }
              : {}),
          },
        };
      },
    });
    after(async () => {
      await issuer?.close();
      files.remove();
    });

    const unknownInstance = randomInstanceId();
    const sent: string[] = [];
    async function credential(form: Form, principal: Principal): Promise<Record<string, string>> {
      let value: string;
      let headers: Record<string, string>;
      switch (form) {
        case 'X-API-Key':
          value = principal.key;
          headers = { 'x-api-key': value };
          break;
        case 'Bearer API key':
          value = principal.key;
          headers = { authorization: `Bearer ${value}` };
          break;
        case 'Bearer RS256 token':
        case 'Bearer ES256 token':
          value = await issuer.sign(principal.subject, { alg: form === 'Bearer RS256 token' ? 'RS256' : 'ES256' });
          headers = { authorization: `Bearer ${value}` };
      }
      sent.push(value);
      return headers;
    }
    const callerName = (form: Form, principal: Principal) => (form.endsWith('token') ? `oidc:${principal.subject}` : `apikey:${principal.id}`);
    const admin = () => PRINCIPALS.find((p) => p.role === 'admin' && p.scope === 'all instances') as Principal;

    before(async () => {
      const api = app().api.as(await credential(forms[0] as Form, admin()));
      for (const instance of app().instances) {
        expect((await api.post(`/v1/${instance}/createTable`, { tableName: 'matrix', columnFamily: 'cf' })).status).to.equal(201);
        const cells = [{ columnFamily: 'cf', columnName: 'seed', columnValue: 'v' }];
        expect((await api.post(`/v1/${instance}/insertData`, { tableName: 'matrix', rowKeyId: 'r', data: cells })).status).to.equal(200);
      }
    });

    function expectAnswer(response: ApiResponse, outcome: 'allowed' | 403 | 404, success: number, caller: string, what: string): void {
      if (outcome === 'allowed') {
        expect(response.status, `${what}: ${JSON.stringify(response.body)}`).to.equal(success);
      } else if (outcome === 403) {
        expect(response.status, what).to.equal(403);
        expect(response.body.code, what).to.equal('PERMISSION_DENIED');
        expect(response.body.detail, what).to.contain(caller);
      } else {
        expect(response.status, what).to.equal(404);
        expect(response.body.code, what).to.equal('INSTANCE_NOT_FOUND');
        // Only callers who may use every served instance get this far, so the detail names them.
        expect(response.body.detail, what).to.contain('INSTANCE_IDS').and.contain(`It serves ${app().instances.map((name) => `"${name}"`).join(', ')}.`);
      }
    }

    /** As expectAnswer, for v2: an instance the caller may use but that is not served is INSTANCE_NOT_FOUND. */
    function expectV2Answer(response: ApiResponse, outcome: 'allowed' | 403 | 404, success: number, caller: string, what: string): void {
      if (outcome === 404) {
        expect(response.status, what).to.equal(404);
        expect(response.body.code, what).to.equal('INSTANCE_NOT_FOUND');
      } else {
        expectAnswer(response, outcome, success, caller, what);
      }
    }

    for (const form of forms) {
      for (const principal of PRINCIPALS) {
        it(`${form}: ${principal.role} on ${principal.scope} may do exactly what the role allows, where it is granted`, async () => {
          const { instances } = app();
          const api: ApiClient = app().api.as(await credential(form, principal));
          const caller = callerName(form, principal);
          for (const instance of [...instances, unknownInstance]) {
            const v1 = `/v1/${instance}`;
            const outcome = (endpoint: Endpoint) => expectedOutcome(principal, endpoint, instance, instances);
            const where = (endpoint: Endpoint) => `${form} ${principal.id} ${endpoint} on ${instance === instances[0] ? 'first' : instance === unknownInstance ? 'unknown' : 'second'}`;
            const table = `t-${randomBytes(4).toString('hex')}`;

            const created = await api.post(`${v1}/createTable`, { tableName: table, columnFamily: 'cf' });
            expectAnswer(created, outcome('createTable'), 201, caller, where('createTable'));

            const cells = [{ columnFamily: 'cf', columnName: principal.id, columnValue: form }];
            const inserted = await api.post(`${v1}/insertData`, { tableName: 'matrix', rowKeyId: 'r', data: cells });
            expectAnswer(inserted, outcome('insertData'), 200, caller, where('insertData'));

            const read = await api.get(`${v1}/readCellData?tableName=matrix&id=r`);
            expectAnswer(read, outcome('readCellData'), 200, caller, where('readCellData'));
            if (outcome('readCellData') === 'allowed') expect(read.body.rowKeyId).to.equal('r');

            // The table this case created when allowed to; otherwise the shared one, which a wrong 200 would destroy.
            const tableList = outcome('createTable') === 'allowed' ? [table] : ['matrix'];
            const deleted = await api.delete(`${v1}/deleteTable`, { tableList });
            expectAnswer(deleted, outcome('deleteTable'), 200, caller, where('deleteTable'));

            // The same instance through v2, on the default store (the one v1 serves).
            const v2Outcome = (endpoint: V2Endpoint) => expectedOutcome(principal, endpoint, instance, instances);
            const v2 = async (endpoint: V2Endpoint, success: number, call: (tables: string) => Promise<ApiResponse>) => {
              const response = await call(`/v2/stores/${app().storeName}/instances/${instance}/tables`);
              expectV2Answer(response, v2Outcome(endpoint), success, caller, `${where('readCellData').replace('readCellData', endpoint)}`);
              return response;
            };
            const cell = { family: 'cf', column: principal.id, value: form };
            await v2('tables.list', 200, (tables) => api.get(tables));
            for (const name of [table, `${table}-b`]) await v2('tables.create', 201, (tables) => api.post(tables, { name, families: [{ name: 'cf' }] }));
            await v2('tables.get', 200, (tables) => api.get(`${tables}/matrix`));
            await v2('rows.write', 200, (tables) => api.request('PUT', `${tables}/matrix/rows/v2`, { json: { cells: [cell] } }));
            await v2('rows.get', 200, (tables) => api.get(`${tables}/matrix/rows/r`));
            await v2('rows.mutate', 200, (tables) => api.post(`${tables}/matrix/rows/v2:mutate`, { mutations: [{ set: cell }] }));
            await v2('rows.scan', 200, (tables) => api.get(`${tables}/matrix/rows?pageSize=10`));
            await v2('rows.batchGet', 200, (tables) => api.post(`${tables}/matrix/rows:batchGet`, { keys: ['r'] }));
            await v2('rows.batchWrite', 200, (tables) => api.post(`${tables}/matrix/rows:batchWrite`, { entries: [{ key: 'v2', mutations: [{ set: cell }] }] }));
            await v2('rows.checkAndMutate', 200, (tables) =>
              api.post(`${tables}/matrix/rows/v2:checkAndMutate`, { conditions: [{ rowExists: true }], mutations: [{ set: cell }] }),
            );
            await v2('rows.readModifyWrite', 200, (tables) =>
              api.post(`${tables}/matrix/rows/counter:readModifyWrite`, { rules: [{ family: 'cf', column: principal.id, increment: 1 }] }),
            );
            await v2('tables.changes', 200, (tables) => api.get(`${tables}/matrix/changes`));
            await v2('rows.delete', 204, (tables) => api.request('DELETE', `${tables}/matrix/rows/gone`));
            // The tables this case created when allowed to; otherwise the shared one, which a wrong answer would destroy.
            const madeTables = v2Outcome('tables.create') === 'allowed';
            await v2('tables.batchDelete', 200, (tables) => api.post(`${tables}:batchDelete`, { tables: [madeTables ? `${table}-b` : 'matrix'] }));
            await v2('tables.delete', 204, (tables) => api.request('DELETE', `${tables}/${madeTables ? table : 'matrix'}`));
          }
        });
      }
    }

    it('answers 401 without a credential on every endpoint, the same whether the instance exists or not', async () => {
      const { api, instances } = app();
      const details = new Set<string>();
      for (const instance of [...instances, unknownInstance]) {
        const responses = [
          await api.post(`/v1/${instance}/createTable`, { tableName: 't', columnFamily: 'cf' }),
          await api.post(`/v1/${instance}/insertData`, { tableName: 't', rowKeyId: 'r', data: [] }),
          await api.get(`/v1/${instance}/readCellData?tableName=t&id=r`),
          await api.delete(`/v1/${instance}/deleteTable`, { tableList: ['t'] }),
        ];
        for (const response of responses) {
          expect(response.status).to.equal(401);
          expect(response.body.code).to.equal('UNAUTHENTICATED');
          expect(response.headers.get('www-authenticate')).to.equal('Bearer realm="kvcrud"');
          details.add(response.body.detail);
        }
      }
      expect([...details]).to.have.length(1);
    });

    it('answers 401 before looking at the body: an unauthenticated caller gets no validation errors', async () => {
      const response = await app().api.request('POST', `/v1/${app().instance}/insertData`, {
        body: 'not json',
        headers: { 'content-type': 'application/json' },
      });
      expect(response.status).to.equal(401);
    });

    it('answers 401 invalid_token for an unknown credential', async () => {
      const forged = modes.includes('apikey') ? newApiKey() : await issuer.sign('x', { strangerKid: 'rsa-1' });
      const response = await app().api.get(`/v1/${app().instance}/readCellData?tableName=matrix&id=r`, {
        headers: { authorization: `Bearer ${forged}` },
      });
      expect(response.status).to.equal(401);
      expect(response.headers.get('www-authenticate')).to.equal('Bearer realm="kvcrud", error="invalid_token"');
      expect(response.body.detail).to.equal('The credential was not accepted.');
    });

    if (modes.length === 1) {
      it(`refuses the credentials of the mode that is off`, async () => {
        const { api, instance } = app();
        const path = `/v1/${instance}/readCellData?tableName=matrix&id=r`;
        const principal = admin();
        const others = modes[0] === 'apikey'
          ? [{ authorization: `Bearer ${await issuer.sign(principal.subject)}` }]
          : [{ 'x-api-key': principal.key }, { authorization: `Bearer ${principal.key}` }];
        for (const headers of others) {
          const response = await api.get(path, { headers });
          expect(response.status, JSON.stringify(Object.keys(headers))).to.equal(401);
        }
      });
    }

    it('never writes a credential it was sent to the logs', () => {
      const logged = JSON.stringify(app().logs);
      expect(sent.length).to.be.greaterThan(0);
      for (const value of sent) expect(logged.includes(value), 'a credential is in the logs').to.equal(false);
    });
  });
}
