/**
 * GET /readyz with several stores: each is asked, and the answer depends on how many answer.
 * The stores are real: embedded ones in temporary directories, and Bigtable clients pointed at
 * a port where nothing listens (a backend that is down).
 */
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { createApp } from '../../src/app.ts';
import { loadConfig } from '../../src/config.ts';
import { createHttpServer } from '../../src/http/server/http-server.ts';
import { closeStores, openStores } from '../../src/store/open-store.ts';
import type { StoreSet } from '../../src/store/store-set.ts';
import { createLogger } from '../../src/telemetry/logger.ts';
import { ApiClient } from '../support/api-client.ts';
import { closedPort } from '../support/fake-backends.ts';

interface RunningApp {
  readonly api: ApiClient;
  readonly logs: Array<Record<string, unknown>>;
  close(): Promise<void>;
}

/** Serves the stores a STORES_FILE names, opened as the service opens them. */
async function serve(storesFile: string): Promise<RunningApp> {
  const directory = mkdtempSync(join(tmpdir(), 'kvcrud-readiness-'));
  writeFileSync(join(directory, 'stores.yaml'), storesFile.replaceAll('DIR', directory));
  const config = loadConfig({ STORES_FILE: join(directory, 'stores.yaml'), STORE_TIMEOUT_MS: '2000' });
  const logs: Array<Record<string, unknown>> = [];
  const logger = createLogger('debug', { write: (line: string) => void logs.push(JSON.parse(line) as Record<string, unknown>) });
  const stores: StoreSet = await openStores(config.stores, { logger });
  const app = createApp({ config, stores, logger });
  const server: Server = await new Promise((resolve) => {
    const listening = createHttpServer(app).listen(0, '127.0.0.1', () => resolve(listening));
  });
  const api = await ApiClient.connect(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
  return {
    api,
    logs,
    async close() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
      await closeStores(stores);
      rmSync(directory, { recursive: true, force: true });
    },
  };
}

describe('GET /readyz with several stores', () => {
  describe('when every store answers', () => {
    let app: RunningApp;
    before(async () => {
      app = await serve(`
default: main
stores:
  main: { driver: embedded, dataDir: DIR/main, instances: [local] }
  archive: { driver: embedded, dataDir: DIR/archive, instances: [old] }
`);
    });
    after(() => app.close());

    it('answers 200 ready', async () => {
      const response = await app.api.get('/readyz');
      expect(response.status).to.equal(200);
      expect(response.body).to.deep.equal({ status: 'ready' });
    });
  });

  describe('when one of them does not answer', () => {
    let app: RunningApp;
    before(async () => {
      app = await serve(`
default: main
stores:
  main: { driver: embedded, dataDir: DIR/main, instances: [local] }
  remote: { driver: bigtable, projectId: kvcrud-test, emulatorHost: "127.0.0.1:${await closedPort()}", instances: [remote-inst] }
`);
    });
    after(() => app.close());

    it('answers 200 degraded, names no store in the answer, and logs which store once', async () => {
      for (let probe = 0; probe < 2; probe += 1) {
        const response = await app.api.get('/readyz');
        expect(response.status).to.equal(200);
        expect(response.body).to.deep.equal({ status: 'degraded' });
      }
      const warnings = app.logs.filter((line) => String(line['msg']).startsWith('not answering readiness checks'));
      expect(warnings).to.have.length(1);
      expect(warnings[0]).to.deep.include({ stores: ['remote'], msg: 'not answering readiness checks: remote' });
    });

    it('still serves v1 on the default store', async () => {
      expect((await app.api.post('/v1/local/createTable', { tableName: 't', columnFamily: 'cf' })).status).to.equal(201);
    });
  });

  describe('when none answers', () => {
    let app: RunningApp;
    before(async () => {
      app = await serve(`
default: first
stores:
  first: { driver: bigtable, projectId: kvcrud-test, emulatorHost: "127.0.0.1:${await closedPort()}", instances: [first-inst] }
  second: { driver: bigtable, projectId: kvcrud-test, emulatorHost: "127.0.0.1:${await closedPort()}", instances: [second-inst] }
`);
    });
    after(() => app.close());

    it('answers 503 BACKEND_UNAVAILABLE within a second, and logs both stores', async () => {
      const started = Date.now();
      const response = await app.api.get('/readyz');
      expect(Date.now() - started).to.be.below(1000);
      expect(response.status).to.equal(503);
      expect(response.body).to.include({ code: 'BACKEND_UNAVAILABLE', detail: 'The data stores did not answer the readiness check.' });
      expect(app.logs.find((line) => String(line['msg']).startsWith('not answering readiness checks'))).to.deep.include({ stores: ['first', 'second'] });
    });
  });
});
