import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { traceRuntime } from '../../scripts/trace-runtime.ts';
import { ApiClient } from '../support/api-client.ts';
import { emulatorHost } from '../support/emulator.ts';
import { closedPort } from '../support/fake-backends.ts';
import { spannerTestInstance } from '../support/harnesses/spanner.ts';
import { type RedisServer, requireRedis, spawnRedis } from '../support/redis-server.ts';
import { cleanEnv, runService } from '../support/service-process.ts';
import { requireSpanner, sharedSpannerEmulator } from '../support/spanner-emulator.ts';
import { TEST_PROJECT, randomInstanceId } from '../support/test-app.ts';

const execFileAsync = promisify(execFile);
const ROOT = new URL('../../', import.meta.url).pathname;

/**
 * The image ships only the files scripts/trace-runtime.ts finds the service loading. A file it
 * missed would fail only when that path runs, so the traced copy is run here, alone (it cannot
 * reach this checkout's node_modules), on every store and with tracing on.
 */
describe('the traced runtime files the image ships', function () {
  this.timeout(180_000);
  let directory: string;
  let traced: string;
  let redis: RedisServer | undefined;

  before(async function () {
    requireRedis(this);
    requireSpanner(this);
    await execFileAsync('npm', ['run', 'build', '--silent'], { cwd: ROOT });
    directory = mkdtempSync(join(tmpdir(), 'kvcrud-traced-'));
    traced = join(directory, 'app');
    await traceRuntime(traced);
    redis = await spawnRedis();
  });
  after(async () => {
    await redis?.stop();
    if (directory !== undefined) rmSync(directory, { recursive: true, force: true });
  });

  it('keep the source map of every compiled file, for the service runs with --enable-source-maps', () => {
    const compiled = readdirSync(join(traced, 'dist'), { recursive: true, encoding: 'utf8' }).filter((file) => file.endsWith('.js'));
    expect(compiled).to.not.be.empty;
    expect(compiled.filter((file) => !existsSync(join(traced, 'dist', `${file}.map`)))).to.deep.equal([]);
  });

  it('serve v1 and v2 on the embedded, Bigtable, Redis and Spanner stores, with tracing over every OTLP protocol', async function () {
    const instance = randomInstanceId();
    const spanner = await sharedSpannerEmulator();
    const storesFile = join(directory, 'stores.yaml');
    writeFileSync(
      storesFile,
      `default: local\nstores:\n` +
        `  local: { driver: embedded, dataDir: "${join(directory, 'data')}", instances: [${instance}] }\n` +
        `  main: { driver: bigtable, projectId: ${TEST_PROJECT}, emulatorHost: "${emulatorHost(this)}", instances: [${instance}] }\n` +
        `  cache: { driver: redis, url: "${redis?.url ?? ''}", instances: [${instance}] }\n` +
        `  ledger: { driver: spanner, projectId: ${TEST_PROJECT}, instance: ${spannerTestInstance()}, emulatorHost: "${spanner.host}", instances: [${instance}] }\n`,
    );
    const collector = `http://127.0.0.1:${await closedPort()}`;
    for (const protocol of ['http/protobuf', 'http/json', 'grpc']) {
      const service = await runService(
        cleanEnv({ PORT: '0', STORES_FILE: storesFile, OTEL_EXPORTER_OTLP_ENDPOINT: collector, OTEL_EXPORTER_OTLP_PROTOCOL: protocol }),
        [process.execPath, join(traced, 'dist/index.js')],
      );
      try {
        const api = await ApiClient.connect(service.baseUrl);
        // The explorer and the assets it loads, read from swagger-ui-dist at run time.
        const page = await (await fetch(new URL('/docs', service.baseUrl))).text();
        const assets = [...page.matchAll(/(?:src|href)="(\/docs\/assets\/[^"]+)"/g)].map((match) => match[1] ?? '');
        expect(assets).to.have.length.at.least(3);
        for (const asset of assets) {
          expect((await fetch(new URL(asset, service.baseUrl))).status, asset).to.equal(200);
        }
        const table = `t${protocol.replace(/\W/g, '')}`;
        expect((await api.post(`/v1/${instance}/createTable`, { tableName: table, columnFamily: 'cf' })).status, protocol).to.equal(201);
        for (const store of ['main', 'cache', 'ledger']) {
          const tables = `/v2/stores/${store}/instances/${instance}/tables`;
          expect((await api.post(tables, { name: table, families: [{ name: 'cf', maxVersions: 1 }] })).status, `${store} ${protocol}`).to.equal(201);
          expect((await api.request('PUT', `${tables}/${table}/rows/r`, { json: { cells: [{ family: 'cf', column: 'c', value: 'v' }] } })).status).to.equal(200);
          expect((await api.get(`${tables}/${table}/rows/r`)).body.cells[0].value, store).to.equal('v');
        }
      } finally {
        expect(await service.stop()).to.equal(0);
      }
      expect(service.output.join('\n'), protocol).to.not.match(/Cannot find (module|package)|ERR_MODULE_NOT_FOUND|ENOENT/);
    }
  });
});
