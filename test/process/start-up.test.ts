import { createServer, type IncomingMessage } from 'node:http';
import { type AddressInfo, createServer as createNetServer } from 'node:net';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir, totalmem } from 'node:os';
import { dirname, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { expect } from 'chai';
import { heapChoice, heapFlags } from '../../src/heap-size.ts';
import { THREAD_RESOURCE_LIMITS } from '../../src/store/embedded/embedded-store.ts';
import { ApiClient } from '../support/api-client.ts';
import { emulatorHost } from '../support/emulator.ts';
import { closedPort } from '../support/fake-backends.ts';
import { cleanEnv, runService, runServiceToExit, serviceEnv } from '../support/service-process.ts';
import { TEST_PROJECT, randomInstanceId } from '../support/test-app.ts';

const EX_CONFIG = 78;

describe('the service process', () => {
  describe('with invalid configuration', () => {
    it('exits 78 with one line naming the missing variable', async () => {
      const { code, stdout, stderr } = await runServiceToExit(cleanEnv({ GOOGLE_CLOUD_PROJECT: TEST_PROJECT }));
      expect(code).to.equal(EX_CONFIG);
      expect(stdout).to.equal('');
      expect(stderr).to.equal('kvcrud: invalid configuration: INSTANCE_IDS is required\n');
    });

    it('exits 78 with one line naming each wrong variable and what is wrong', async () => {
      const { code, stderr } = await runServiceToExit(
        cleanEnv({ GOOGLE_CLOUD_PROJECT: TEST_PROJECT, INSTANCE_IDS: 'inst-a', PORT: 'eighty', DATA_STORE: 'mongo' }),
      );
      expect(code).to.equal(EX_CONFIG);
      expect(stderr).to.equal('kvcrud: invalid configuration: PORT must be a number\nkvcrud: invalid configuration: DATA_STORE must be one of [bigtable, embedded]\n');
    });

    it('exits 78 when the credentials file cannot be read', async () => {
      const { code, stderr } = await runServiceToExit(
        cleanEnv({ GOOGLE_CLOUD_PROJECT: TEST_PROJECT, INSTANCE_IDS: 'inst-a', GOOGLE_APPLICATION_CREDENTIALS: '/nonexistent/key.json' }),
      );
      expect(code).to.equal(EX_CONFIG);
      expect(stderr).to.match(/^kvcrud: invalid configuration: GOOGLE_APPLICATION_CREDENTIALS file "\/nonexistent\/key.json" cannot be read\n$/);
    });
  });

  describe('when it cannot start', () => {
    it('exits 1 with one plain line naming PORT when the port is taken, leaving a fresh data directory empty', async () => {
      const taken = createNetServer().listen(0, '0.0.0.0');
      await new Promise((resolve) => taken.once('listening', resolve));
      const dataDir = join(mkdtempSync(join(tmpdir(), 'kvcrud-port-')), 'data');
      try {
        const port = (taken.address() as AddressInfo).port;
        const { code, stdout, stderr } = await runServiceToExit(cleanEnv({ PORT: String(port), DATA_DIR: dataDir }));
        expect(code).to.equal(1);
        expect(stdout).to.equal('');
        expect(stderr).to.equal(`kvcrud: cannot listen on port ${port}: another process is using it. Set PORT to a free port.\n`);
        expect(existsSync(dataDir), 'the data directory').to.equal(false);
      } finally {
        taken.close();
        rmSync(dirname(dataDir), { recursive: true, force: true });
      }
    });

    it('exits 1 with one plain line naming DATA_DIR when the data directory cannot be made', async () => {
      const parent = mkdtempSync(join(tmpdir(), 'kvcrud-datadir-'));
      const file = join(parent, 'a-file');
      writeFileSync(file, '');
      try {
        const { code, stdout, stderr } = await runServiceToExit(cleanEnv({ PORT: '0', DATA_DIR: join(file, 'data') }));
        expect(code).to.equal(1);
        expect(stdout).to.equal('');
        expect(stderr).to.match(/^kvcrud: cannot open the embedded store: cannot create data directory .*: ENOTDIR\. Set DATA_DIR .*\n$/);
        expect(stderr.split('\n')).to.have.length(2);
      } finally {
        rmSync(parent, { recursive: true, force: true });
      }
    });

    it('starts anyway when a store cannot be reached, and warns loudly at once, naming it', async function () {
      this.timeout(30_000);
      const port = await closedPort();
      const service = await runService(serviceEnv(randomInstanceId(), `127.0.0.1:${port}`));
      try {
        const listening = service.output.find((line) => line.includes('listening')) ?? '';
        expect(listening).to.contain(`emulatorHost 127.0.0.1:${port}`).and.contain(`projectId ${TEST_PROJECT}`);
        const started = Date.now();
        while (!service.output.some((line) => line.includes('STORE NOT REACHABLE')) && Date.now() - started < 5000) await new Promise((resolve) => setTimeout(resolve, 50));
        const warning = JSON.parse(service.output.find((line) => line.includes('STORE NOT REACHABLE')) ?? '{}') as { level?: string; store?: string };
        expect(warning).to.include({ level: 'warn', store: 'bigtable' });
        expect((await fetch(new URL('/healthz', service.baseUrl))).status).to.equal(200);
      } finally {
        await service.stop();
      }
    });
  });

  describe('with a STORES_FILE', () => {
    let directory: string;
    before(() => {
      directory = mkdtempSync(join(tmpdir(), 'kvcrud-stores-file-'));
    });
    after(() => rmSync(directory, { recursive: true, force: true }));

    it('serves every store it names, v1 on the default one, and describes each in the start-up line', async function () {
      const host = emulatorHost(this);
      const remote = randomInstanceId();
      writeFileSync(
        join(directory, 'stores.yaml'),
        [
          'default: local',
          'stores:',
          `  local: { driver: embedded, dataDir: ${join(directory, 'local')}, instances: [local] }`,
          `  remote: { driver: bigtable, projectId: ${TEST_PROJECT}, emulatorHost: "${host}", instances: [${remote}] }`,
        ].join('\n'),
      );
      const service = await runService(cleanEnv({ PORT: '0', STORES_FILE: join(directory, 'stores.yaml') }));
      try {
        const line = JSON.parse(service.output[0] ?? '{}') as Record<string, unknown>;
        expect(line).to.deep.include({
          store: 'local',
          instances: ['local'],
          stores: {
            local: { driver: 'embedded', instances: ['local'], dataDir: join(directory, 'local') },
            remote: { driver: 'bigtable', instances: [remote], projectId: TEST_PROJECT, emulatorHost: host },
          },
        });
        const api = await ApiClient.connect(service.baseUrl);
        expect((await api.get('/readyz')).body).to.deep.equal({ status: 'ready' });
        expect((await api.post('/v1/local/createTable', { tableName: 't', columnFamily: 'cf' })).status).to.equal(201);
        // v1 is the default store's: the other store's instances are not among its instances.
        expect((await api.post(`/v1/${remote}/createTable`, { tableName: 't', columnFamily: 'cf' })).body.code).to.equal('INSTANCE_NOT_FOUND');
      } finally {
        expect(await service.stop()).to.equal(0);
      }
    });

    it('exits 78 with one line for each problem of a misspelt driver field', async () => {
      writeFileSync(join(directory, 'typo.yaml'), 'stores:\n  main:\n    drver: embedded\n    instances: [local]\n');
      const { code, stderr } = await runServiceToExit(cleanEnv({ STORES_FILE: join(directory, 'typo.yaml') }));
      expect(code).to.equal(EX_CONFIG);
      expect(stderr).to.equal(
        'kvcrud: invalid configuration: STORES_FILE: stores.main.driver is required\n' +
          'kvcrud: invalid configuration: STORES_FILE: stores.main.drver is an unknown field (did you mean driver?)\n',
      );
    });

    it('exits 78 naming the store and the field of every problem, and each variable it cannot be combined with', async () => {
      writeFileSync(join(directory, 'bad.json'), JSON.stringify({ default: 'main', stores: { main: { driver: 'bigtable', instances: ['orders-prod'] } } }));
      const { code, stdout, stderr } = await runServiceToExit(cleanEnv({ STORES_FILE: join(directory, 'bad.json'), DATA_DIR: './data' }));
      expect(code).to.equal(EX_CONFIG);
      expect(stdout).to.equal('');
      expect(stderr).to.equal(
        "kvcrud: invalid configuration: DATA_DIR cannot be set with STORES_FILE: set dataDir in the store's entry instead\n" +
          'kvcrud: invalid configuration: STORES_FILE: stores.main.projectId is required\n',
      );
    });
  });

  describe('against the emulator', () => {
    it('serves every endpoint without a single metadata-server or credential look-up', async function () {
      // Anything that looks for application default credentials asks the metadata server,
      // which the client libraries find at GCE_METADATA_HOST / GCE_METADATA_IP.
      const lookups: string[] = [];
      const metadata = createServer((request: IncomingMessage, response) => {
        lookups.push(`${request.method} ${request.url}`);
        response.writeHead(404).end();
      });
      await new Promise<void>((resolve) => metadata.listen(0, '127.0.0.1', resolve));
      const metadataHost = `127.0.0.1:${(metadata.address() as AddressInfo).port}`;
      const instance = randomInstanceId();
      const service = await runService(
        serviceEnv(instance, emulatorHost(this), {
          GOOGLE_APPLICATION_CREDENTIALS: '/nonexistent/never-read.json',
          GCE_METADATA_HOST: metadataHost,
          GCE_METADATA_IP: metadataHost,
        }),
      );
      try {
        const api = await ApiClient.connect(service.baseUrl);
        const v1 = `/v1/${instance}`;
        expect((await api.get('/readyz')).status).to.equal(200);
        expect((await api.post(`${v1}/createTable`, { tableName: 't', columnFamily: 'cf' })).status).to.equal(201);
        const cells = [{ columnFamily: 'cf', columnName: 'c', columnValue: 'v' }];
        expect((await api.post(`${v1}/insertData`, { tableName: 't', rowKeyId: 'r', data: cells })).status).to.equal(200);
        expect((await api.get(`${v1}/readCellData?tableName=t&id=r`)).status).to.equal(200);
        expect((await api.delete(`${v1}/deleteTable`, { tableList: ['t'] })).status).to.equal(200);
        expect(lookups).to.deep.equal([]);
      } finally {
        await service.stop();
        metadata.close();
      }
    });

    it('logs one start-up line naming the port, the store and the instances', async function () {
      const instance = randomInstanceId();
      const host = emulatorHost(this);
      const service = await runService(serviceEnv(instance, host));
      try {
        const line = JSON.parse(service.output[0] ?? '{}') as Record<string, unknown>;
        // In words too: the project and the emulator, for whoever reads the log rather than parses it.
        expect(line).to.include({
          store: 'bigtable',
          msg: `kvcrud listening on port ${new URL(service.baseUrl).port}: store bigtable (bigtable, projectId ${TEST_PROJECT}, emulatorHost ${host}) serving ${instance}`,
        });
        expect(line['instances']).to.deep.equal([instance]);
      } finally {
        await service.stop();
      }
    });

    it('exits 0 on SIGTERM', async function () {
      const service = await runService(
        serviceEnv(randomInstanceId(), emulatorHost(this)),
      );
      expect(await service.stop('SIGTERM')).to.equal(0);
    });

    it('on SIGTERM, lets an in-flight request finish before exiting 0', async () => {
      // A backend that accepts connections and never answers keeps the request in flight until
      // STORE_TIMEOUT_MS.
      const silent = createNetServer(() => {});
      await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
      const instance = randomInstanceId();
      const service = await runService(
        serviceEnv(instance, `127.0.0.1:${(silent.address() as AddressInfo).port}`, { STORE_TIMEOUT_MS: '1500' }),
      );
      try {
        const inFlight = fetch(`${service.baseUrl}/v1/${instance}/readCellData?tableName=t&id=r`);
        await new Promise((resolve) => setTimeout(resolve, 300));
        const exited = service.stop('SIGTERM');
        const response = await inFlight;
        expect(response.status).to.equal(504);
        expect(await exited).to.equal(0);
      } finally {
        silent.close();
      }
    });

    it('sizes its heap and sets the allocator itself, unless NODE_OPTIONS or the environment does, and says which in the start-up line', async function () {
      this.timeout(60_000);
      const dataDir = mkdtempSync(join(tmpdir(), 'kvcrud-heap-'));
      const startLine = async (vars: Record<string, string>) => {
        const service = await runService(cleanEnv({ PORT: '0', DATA_DIR: dataDir, ...vars }));
        try {
          const line = service.output.find((candidate) => candidate.includes('listening')) ?? '';
          // The environment the process replaced itself with.
          const environment = readFileSync(`/proc/${service.process.pid}/environ`, 'utf8').split('\0');
          const argv = readFileSync(`/proc/${service.process.pid}/cmdline`, 'utf8').split('\0');
          return { heap: (JSON.parse(line) as { heap: Record<string, unknown> }).heap, pid: service.process.pid, environment, argv };
        } finally {
          await service.stop();
        }
      };
      try {
        // The service runs under the same memory limit as this test, if any.
        const expected = heapChoice(process.constrainedMemory(), totalmem());
        const chosen = await startLine({});
        expect(chosen.heap).to.include({ heapChosenBy: `kvcrud, for ${expected.budgetMiB} MiB (${expected.source})`, maxOldSpaceMiB: expected.maxOldSpaceMiB });
        // The limit V8 reports is the old generation's plus the young generation's.
        expect(chosen.heap['heapLimitMiB']).to.be.within(expected.maxOldSpaceMiB, expected.maxOldSpaceMiB + 4 * expected.maxSemiSpaceMiB);
        expect(chosen.environment).to.include('MALLOC_MMAP_THRESHOLD_=131072');
        expect(chosen.argv).to.include.members(heapFlags(expected));
        expect(chosen.heap).to.include({ heapGrowingPercent: expected.heapGrowingPercent });
        const own = await startLine({ NODE_OPTIONS: '--max-old-space-size=700' });
        expect(own.heap).to.include({ heapChosenBy: 'NODE_OPTIONS or node flags' });
        expect(own.heap['heapLimitMiB']).to.be.within(700, 1000);
        expect(own.argv.filter((argument) => argument.startsWith('--heap-growing-percent'))).to.deep.equal([]);
        const threshold = await startLine({ MALLOC_MMAP_THRESHOLD_: '1048576' });
        expect(threshold.environment).to.include('MALLOC_MMAP_THRESHOLD_=1048576');
      } finally {
        rmSync(dataDir, { recursive: true, force: true });
      }
    });

    it("gives each SQLite thread the heap the embedded store sizes for it, whoever sized the main thread's", async function () {
      this.timeout(60_000);
      const dataDir = mkdtempSync(join(tmpdir(), 'kvcrud-thread-heaps-'));
      const lines = (file: string) => (existsSync(file) ? readFileSync(file, 'utf8').trim().split('\n') : []);
      const threadHeapsMiB = async (nodeOptions: string) => {
        const file = join(dataDir, 'thread-heaps');
        rmSync(file, { force: true });
        const imported = `--import ${join(dirname(new URL(import.meta.url).pathname), '../support/thread-heaps.ts')}`;
        const service = await runService(cleanEnv({ PORT: '0', DATA_DIR: dataDir, THREAD_HEAPS_FILE: file, NODE_OPTIONS: `${imported} ${nodeOptions}` }));
        try {
          // The threads are running once the service listens; their figures follow as they answer.
          for (let waited = 0; waited < 5000 && lines(file).length < 3; waited += 50) await sleep(50);
          return lines(file).map(Number);
        } finally {
          await service.stop();
        }
      };
      try {
        const { maxOldGenerationSizeMb = 0, maxYoungGenerationSizeMb = 0 } = THREAD_RESOURCE_LIMITS;
        // The limit V8 reports is the old generation's plus the young generation's.
        for (const nodeOptions of ['', '--max-old-space-size=700 --max-semi-space-size=32']) {
          const limits = await threadHeapsMiB(nodeOptions);
          expect(limits, nodeOptions).to.have.length(3);
          for (const limit of limits) expect(limit, nodeOptions).to.be.within(maxOldGenerationSizeMb, maxOldGenerationSizeMb + maxYoungGenerationSizeMb);
        }
      } finally {
        rmSync(dataDir, { recursive: true, force: true });
      }
    });

    it('`npm start` with no configuration compiles what changed and serves the embedded store', async function () {
      this.timeout(120_000);
      const dataDir = mkdtempSync(join(tmpdir(), 'kvcrud-npm-start-'));
      // Only the port (free) and the data directory (fresh) differ from a fresh clone's `npm start`.
      const service = await runService(cleanEnv({ PORT: '0', DATA_DIR: dataDir }), ['npm', 'start', '--silent']);
      try {
        const api = await ApiClient.connect(service.baseUrl);
        expect((await api.get('/readyz')).status).to.equal(200);
        expect((await api.post('/v1/local/createTable', { tableName: 't', columnFamily: 'cf' })).status).to.equal(201);
        const root = new URL('../../', import.meta.url);
        for (const file of ['index', 'app', 'http/v1/operations', 'store/bigtable/bigtable-store', 'store/embedded/embedded-store']) {
          const built = statSync(new URL(`dist/${file}.js`, root)).mtimeMs;
          expect(built, file).to.be.at.least(statSync(new URL(`src/${file}.ts`, root)).mtimeMs);
        }
      } finally {
        expect(await service.stop()).to.be.oneOf([0, null]);
        rmSync(dataDir, { recursive: true, force: true });
      }
    });
  });
});
