import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { crashUnderLoad } from '../../support/crash-under-load.ts';
import { cleanEnv, runService, runServiceToExit, type ServiceProcess } from '../../support/service-process.ts';

/** The embedded store as a real process: what it keeps across a crash, and who may open it. */
describe('embedded store: durability and exclusive use', () => {
  let dataDir: string;
  const running: ServiceProcess[] = [];
  // No variable but the port and DATA_DIR: the default rule picks the embedded store, instance "local".
  const start = async () => {
    const service = await runService(cleanEnv({ PORT: '0', DATA_DIR: dataDir }));
    running.push(service);
    return service;
  };
  const post = (service: ServiceProcess, endpoint: string, body: unknown) =>
    fetch(`${service.baseUrl}/v1/local/${endpoint}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });

  beforeEach(() => {
    dataDir = mkdtempSync(join(tmpdir(), 'kvcrud-durability-'));
  });
  afterEach(async () => {
    await Promise.all(running.splice(0).map((service) => service.stop('SIGKILL')));
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('logs the store, the instances and the data directory at start-up', async () => {
    const service = await start();
    const line = JSON.parse(service.output.find((entry) => entry.includes('listening')) ?? '{}') as Record<string, unknown>;
    expect(line).to.deep.include({ store: 'embedded', instances: ['local'], dataDir });
  });

  it('keeps every acknowledged write when killed with SIGKILL under a mixed load', async function () {
    this.timeout(60_000);
    // Killed in the same tick as the 1,000th write is acknowledged, with 31 more requests in flight.
    const written = await crashUnderLoad({ start, instance: 'local', killAfterWrites: 1000, concurrency: 32 });
    expect(written).to.be.at.least(1000); // answers already on the wire when it died count too
  });

  it('refuses to start a second process on the same data directory, and the first keeps serving', async () => {
    const first = await start();
    const second = await runServiceToExit(cleanEnv({ PORT: '0', DATA_DIR: dataDir }));
    expect(second.code).to.equal(1);
    expect(second.stdout + second.stderr).to.contain(`data directory ${dataDir} is in use by another process`);

    expect((await post(first, 'createTable', { tableName: 'still', columnFamily: 'cf' })).status).to.equal(201);
    const written = await post(first, 'insertData', {
      tableName: 'still',
      rowKeyId: 'r',
      data: [{ columnFamily: 'cf', columnName: 'c', columnValue: 'v' }],
    });
    expect(written.status).to.equal(200);
  });

  it('lets a new process open the directory once the holder is gone, even after SIGKILL', async () => {
    const first = await start();
    await first.stop('SIGKILL');
    const second = await start();
    expect((await fetch(`${second.baseUrl}/readyz`)).status).to.equal(200);
  });
});
