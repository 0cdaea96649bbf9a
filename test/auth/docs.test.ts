import { writeFileSync } from 'node:fs';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { expect } from 'chai';
import { createApp } from '../../src/app.ts';
import { type Authenticator, openAuthenticator } from '../../src/auth/authenticator.ts';
import { createHttpServer } from '../../src/http/server/http-server.ts';
import { createStoreSet } from '../../src/store/store-set.ts';
import type { DataStore } from '../../src/store/store.ts';
import { createLogger } from '../../src/telemetry/logger.ts';
import { type KeyEntry, keysFile, newApiKey, tempDirectory } from '../support/access-files.ts';
import { ApiClient } from '../support/api-client.ts';
import type { DriverHarness } from '../support/driver-harness.ts';
import { harness as embeddedHarness } from '../support/harnesses/embedded.ts';
import { useTestApp } from '../support/test-app.ts';

describe('with AUTH_PROTECT_DOCS=true', () => {
  const files = tempDirectory();
  const reader: KeyEntry = { name: 'reader', key: newApiKey(), role: 'reader', instances: ['some-other-instance'] };
  const app = useTestApp({
    auth: () => {
      const apiKeysFile = join(files.path, 'keys.json');
      writeFileSync(apiKeysFile, keysFile([reader]));
      return { config: { modes: ['apikey'], apiKeysFile, protectDocs: true }, docsHeaders: { 'x-api-key': reader.key } };
    },
  });
  after(() => files.remove());

  it('answers 401 for the explorer and the OpenAPI document without a credential', async () => {
    for (const path of ['/docs', '/openapi.json']) {
      const response = await app().api.get(path);
      expect(response.status, path).to.equal(401);
      expect(response.body.code).to.equal('UNAUTHENTICATED');
    }
  });

  it('serves them to any caller with a grant, whatever its role and instances', async () => {
    const api = app().api.as({ 'x-api-key': reader.key });
    const explorer = await api.get('/docs');
    expect(explorer.status).to.equal(200);
    expect(explorer.headers.get('content-type')).to.match(/^text\/html/);
    expect((await api.get('/openapi.json')).body.openapi).to.equal('3.1.0');
  });

  it('leaves the probes, the explorer assets and the problem pages open', async () => {
    const { api } = app();
    expect((await api.get('/healthz')).status).to.equal(200);
    expect((await api.get('/readyz')).status).to.equal(200);
    expect((await api.get('/problems/unauthenticated')).body).to.include({ code: 'UNAUTHENTICATED', status: 401 });
    expect((await api.get('/problems/permission-denied')).body).to.include({ code: 'PERMISSION_DENIED', status: 403 });
    // The explorer's assets are swagger-ui's public code: open, so nothing about the service leaks.
    const page = (await api.as({ 'x-api-key': reader.key }).get('/docs')).body as string;
    const bundle = /src="(\/docs\/assets\/[^"]+\/swagger-ui-bundle\.js)"/.exec(page)?.[1];
    expect(bundle, 'the bundle the page loads').to.be.a('string');
    expect((await fetch(`${app().baseUrl}${bundle ?? ''}`)).status).to.equal(200);
  });
});

describe('the OpenAPI document with authentication on', () => {
  const files = tempDirectory();
  const app = useTestApp({
    auth: () => {
      const apiKeysFile = join(files.path, 'keys.json');
      writeFileSync(apiKeysFile, keysFile([]));
      return { config: { modes: ['apikey'], apiKeysFile, protectDocs: false } };
    },
  });
  after(() => files.remove());

  it('declares the bearer and X-API-Key schemes and requires one of them on every v1 operation and /metrics', () => {
    const document = app().api.contract.document as Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
    expect(document['components']['securitySchemes']).to.deep.include({
      apiKey: { type: 'apiKey', in: 'header', name: 'X-API-Key', description: 'An API key in the `X-API-Key` header.' },
    });
    expect(document['components']['securitySchemes']['bearer']).to.include({ type: 'http', scheme: 'bearer' });
    const roles: Record<string, string> = { createTable: 'admin', insertData: 'writer', readCellData: 'reader', deleteTable: 'admin' };
    for (const item of Object.values(document['paths'] as Record<string, Record<string, any>>)) { // eslint-disable-line @typescript-eslint/no-explicit-any
      for (const operation of Object.values(item)) {
        const role = roles[operation.operationId as string];
        if (operation.tags?.includes('v2') === true) {
          // Every v2 operation needs a credential; listing the stores shows only what the caller may use.
          expect(operation.security, operation.operationId).to.deep.equal([{ bearer: [] }, { apiKey: [] }]);
          continue;
        }
        if (operation.operationId === 'metrics') {
          // On the API port the metrics need a credential too (with a grant on every store).
          expect(operation.security).to.deep.equal([{ bearer: [] }, { apiKey: [] }]);
          continue;
        }
        if (role === undefined) {
          expect(operation.security, operation.operationId).to.equal(undefined);
          continue;
        }
        expect(operation.security).to.deep.equal([{ bearer: [] }, { apiKey: [] }]);
        expect(operation.description).to.contain(`Needs the \`${role}\` role`);
        expect(operation.responses['401'].headers).to.have.property('WWW-Authenticate');
        expect(operation.responses['403'].content['application/problem+json'].schema.allOf[1].properties.code.enum).to.deep.equal(['PERMISSION_DENIED']);
      }
    }
  });
});

describe('which instances the OpenAPI document names', () => {
  const files = tempDirectory();
  after(() => files.remove());
  const keys: Record<string, KeyEntry> = {};
  const app = useTestApp({
    instanceCount: 3,
    auth: (instances) => {
      keys['one'] = { name: 'one', key: newApiKey(), role: 'reader', instances: [instances[1] ?? ''] };
      keys['all'] = { name: 'all', key: newApiKey(), role: 'admin', instances: ['*'] };
      keys['elsewhere'] = { name: 'elsewhere', key: newApiKey(), role: 'admin', instances: ['not-served-here'] };
      const apiKeysFile = join(files.path, 'keys.json');
      writeFileSync(apiKeysFile, keysFile(Object.values(keys)));
      return { config: { modes: ['apikey'], apiKeysFile, protectDocs: true }, docsHeaders: { 'x-api-key': keys['all']?.key ?? '' } };
    },
  });
  const namedIn = async (key: string) => {
    const text = JSON.stringify((await app().api.as({ 'x-api-key': key }).get('/openapi.json')).body);
    return app().instances.filter((instance) => text.includes(instance));
  };

  it('names to each caller only the served instances its grants cover', async () => {
    expect(await namedIn(keys['one']?.key ?? '')).to.deep.equal([app().instances[1]]);
    expect(await namedIn(keys['all']?.key ?? '')).to.deep.equal(app().instances);
    expect(await namedIn(keys['elsewhere']?.key ?? '')).to.deep.equal([]);
  });
});

describe('the OpenAPI document open to all with authentication on', () => {
  const files = tempDirectory();
  after(() => files.remove());
  const app = useTestApp({
    instanceCount: 2,
    auth: () => {
      const apiKeysFile = join(files.path, 'keys.json');
      writeFileSync(apiKeysFile, keysFile([]));
      return { config: { modes: ['apikey'], apiKeysFile, protectDocs: false } };
    },
  });

  it('names no instance: a caller without a credential learns nothing about which exist', async () => {
    const response = await app().api.get('/openapi.json');
    expect(response.status).to.equal(200);
    const text = JSON.stringify(response.body);
    for (const instance of app().instances) expect(text).to.not.contain(instance);
    expect(response.body.components.parameters.instanceID).to.not.have.property('example');
  });
});

describe('/metrics on the API port with authentication on', () => {
  const files = tempDirectory();
  const stores: DataStore[] = [];
  let harness: DriverHarness | undefined;
  const keys = {
    both: { name: 'prometheus', key: newApiKey(), role: 'reader', instances: ['one/local', 'two/*'] },
    one: { name: 'one-store', key: newApiKey(), role: 'admin', instances: ['one/*'] },
    elsewhere: { name: 'elsewhere', key: newApiKey(), role: 'reader', instances: ['not-served-here'] },
  } satisfies Record<string, KeyEntry>;
  let server: Server | undefined;
  let authenticator: Authenticator | undefined;
  let api: ApiClient;

  // Two stores, so that a caller may be granted one of them.
  before(async function () {
    harness = await embeddedHarness.make(this);
    for (let i = 0; i < 2; i++) stores.push(await harness.open(['local']));
    const served = createStoreSet(
      stores.map((store, index) => ({ name: index === 0 ? 'one' : 'two', driver: 'embedded', instances: ['local'], store })),
      'one',
    );
    const apiKeysFile = join(files.path, 'keys.json');
    writeFileSync(apiKeysFile, keysFile(Object.values(keys)));
    const logger = createLogger('silent');
    authenticator = openAuthenticator({ modes: ['apikey'], apiKeysFile, protectDocs: false }, { logger, stores: served });
    const app = createApp({
      config: { maxBodyBytes: 1024 * 1024, storeTimeoutMs: 5000, maxInflight: 16, rateLimitPerSecond: undefined },
      stores: served,
      logger,
      auth: { authenticator, protectDocs: false },
    });
    const listening = createHttpServer(app);
    await new Promise<void>((resolve) => listening.listen(0, '127.0.0.1', resolve));
    server = listening;
    api = await ApiClient.connect(`http://127.0.0.1:${(listening.address() as AddressInfo).port}`);
  });
  after(async () => {
    server?.closeAllConnections();
    await new Promise((resolve) => server?.close(resolve));
    authenticator?.close();
    await Promise.all(stores.map((store) => harness?.close(store) ?? store.close()));
    files.remove();
  });

  it('needs a credential, whatever AUTH_PROTECT_DOCS says', async () => {
    const refused = await api.get('/metrics');
    expect([refused.status, refused.body.code]).to.deep.equal([401, 'UNAUTHENTICATED']);
  });

  it('needs a grant on every store, since the metrics name them all; and never names the ones a caller lacks', async () => {
    // Traffic on both stores, so that both names are in the metrics.
    for (const store of ['one', 'two']) {
      expect((await api.as({ 'x-api-key': keys.both.key }).get(`/v2/stores/${store}/instances/local/tables`)).status).to.equal(200);
    }
    for (const caller of [keys.one, keys.elsewhere]) {
      const refused = await api.get('/metrics', { headers: { 'x-api-key': caller.key } });
      expect([refused.status, refused.body.code], caller.name).to.deep.equal([403, 'PERMISSION_DENIED']);
      expect(refused.body.detail).to.contain('METRICS_PORT').and.not.to.contain('two');
    }
    const served = await api.get('/metrics', { headers: { 'x-api-key': keys.both.key } });
    expect(served.status).to.equal(200);
    expect(served.body).to.contain('store="one"').and.to.contain('store="two"');
  });
});
