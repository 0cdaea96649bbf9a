import { createServer as createHttpServer } from 'node:http';
import { type AddressInfo, type Server, type Socket, createServer as createNetServer } from 'node:net';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { expect } from 'chai';
import { type ServiceProcess, cleanEnv, runService } from '../support/service-process.ts';
import { TEST_PROJECT } from '../support/test-app.ts';

/** A store call's deadline here: a call that waits for credentials fails at it, not later. */
const STORE_TIMEOUT_MS = 2000;

/** A metadata server that takes connections and never answers. */
async function silentMetadataServer(sockets: Set<Socket>): Promise<Server> {
  const server = createNetServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return server;
}

/** A metadata server that answers every request 500 (as the GKE metadata server does when it fails). */
async function failingMetadataServer(): Promise<Server> {
  const server = createHttpServer((_request, response) => {
    response.writeHead(500, { 'metadata-flavor': 'Google', 'content-type': 'text/plain' });
    response.end('internal error');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return server;
}

interface CredentialsCase {
  readonly name: string;
  /** The variables and the store's extra settings that make its credentials fail. */
  readonly prepare: (directory: string) => Promise<{ env: Record<string, string>; settings: string }>;
  /** What the log says of the cause. */
  readonly cause: RegExp;
}

describe('a Google Cloud store whose credentials cannot be had, in a service process', function () {
  this.timeout(120_000);
  let directory: string;
  const servers: Server[] = [];
  const sockets = new Set<Socket>();
  const running: ServiceProcess[] = [];

  before(() => {
    directory = mkdtempSync(join(tmpdir(), 'kvcrud-credentials-'));
  });
  afterEach(async () => {
    await Promise.all(running.splice(0).map((service) => service.stop()));
    for (const socket of sockets) socket.destroy();
    await Promise.all(servers.splice(0).map((server) => new Promise((resolve) => server.close(resolve))));
  });
  after(() => {
    rmSync(directory, { recursive: true, force: true });
  });

  // No emulator, an empty HOME (no gcloud credentials) and no GOOGLE_APPLICATION_CREDENTIALS in
  // any case: each then closes the last way to credentials differently.
  const cases: CredentialsCase[] = [
    {
      name: 'no credentials at all (no key file, no metadata server)',
      prepare: () => Promise.resolve({ env: { METADATA_SERVER_DETECTION: 'none' }, settings: '' }),
      cause: /Could not load the default credentials/,
    },
    // The client libraries read a key file only when a call needs a token: the failure is then
    // that call's (grpc-js reports it as UNAVAILABLE), or, without a network, the name lookup's.
    {
      name: 'a credentials file that is not a key',
      prepare: (dir) => {
        const file = join(dir, 'key.json');
        writeFileSync(file, 'this is not a service account key\n');
        return Promise.resolve({ env: { METADATA_SERVER_DETECTION: 'none' }, settings: `, credentialsFile: ${file}` });
      },
      cause: /UNAVAILABLE|credentials|key/i,
    },
    {
      name: 'a metadata server that takes connections and never answers',
      prepare: async () => {
        const server = await silentMetadataServer(sockets);
        servers.push(server);
        return { env: { GCE_METADATA_HOST: `127.0.0.1:${(server.address() as AddressInfo).port}` }, settings: '' };
      },
      cause: /did not start before the deadline|Could not load the default credentials/,
    },
    {
      name: 'a metadata server that answers 500',
      prepare: async () => {
        const server = await failingMetadataServer();
        servers.push(server);
        return { env: { GCE_METADATA_HOST: `127.0.0.1:${(server.address() as AddressInfo).port}` }, settings: '' };
      },
      cause: /Could not load the default credentials|did not start before the deadline/,
    },
  ];

  const drivers = [
    { driver: 'bigtable', store: (settings: string) => `{ driver: bigtable, projectId: ${TEST_PROJECT}, instances: [orders-prod]${settings} }`, instance: 'orders-prod' },
    { driver: 'spanner', store: (settings: string) => `{ driver: spanner, projectId: ${TEST_PROJECT}, instance: kvcrud-prod, instances: [orders]${settings} }`, instance: 'orders' },
  ];

  for (const { driver, store, instance } of drivers) {
    for (const { name, prepare, cause } of cases) {
      it(`${driver}, with ${name}: keeps running, answers 503 BACKEND_UNAVAILABLE within the deadline, and says why in the log`, async () => {
        const home = mkdtempSync(join(directory, 'home-'));
        const { env, settings } = await prepare(home);
        const storesFile = join(home, 'stores.yaml');
        writeFileSync(storesFile, `default: main\nstores:\n  main: ${store(settings)}\n`);
        const service = await runService(cleanEnv({ PORT: '0', HOME: home, STORES_FILE: storesFile, STORE_TIMEOUT_MS: String(STORE_TIMEOUT_MS), ...env }));
        running.push(service);

        // Past the start-up check, when the unhandled rejection used to end the process.
        await sleep(2500);
        for (let attempt = 0; attempt < 3; attempt++) {
          const started = Date.now();
          const response = await fetch(new URL(`/v1/${instance}/readCellData?tableName=orders&id=k`, service.baseUrl));
          const elapsed = Date.now() - started;
          expect(response.status).to.equal(503);
          expect(response.headers.get('retry-after')).to.be.a('string');
          const problem = (await response.json()) as { code: string; detail: string };
          expect(problem.code).to.equal('BACKEND_UNAVAILABLE');
          expect(problem.detail).not.to.match(/credential|metadata/i);
          expect(elapsed, 'bounded by the deadline').to.be.below(STORE_TIMEOUT_MS + 1500);

          const ready = await fetch(new URL('/readyz', service.baseUrl));
          expect(ready.status).to.equal(503);
          expect(((await ready.json()) as { code: string }).code).to.equal('BACKEND_UNAVAILABLE');
        }
        const write = await fetch(new URL(`/v1/${instance}/createTable`, service.baseUrl), {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ tableName: 'orders', columnFamily: 'cf' }),
        });
        expect(write.status).to.equal(503);
        await sleep(500);

        expect(service.process.exitCode, service.output.join('\n')).to.equal(null);
        expect(service.output.join('\n')).not.to.match(/unhandled|triggerUncaughtException/i);
        const logged = service.output.filter((line) => line.includes('"not answering readiness checks') || line.includes('STORE NOT REACHABLE'));
        expect(logged.join('\n')).to.match(cause);
      });
    }
  }
});
