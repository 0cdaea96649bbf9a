import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
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

  it('keeps every acknowledged write when killed with SIGKILL right after the last one', async function () {
    this.timeout(60_000);
    const first = await start();
    expect((await post(first, 'createTable', { tableName: 'crash', columnFamily: 'cf' })).status).to.equal(201);

    const total = 1000;
    let acknowledged = 0;
    let next = 0;
    // 32 writers; the process is killed in the same tick as the last 200 arrives.
    const writer = async () => {
      while (next < total) {
        const row = next++;
        const response = await post(first, 'insertData', {
          tableName: 'crash',
          rowKeyId: `row-${row}`,
          data: [{ columnFamily: 'cf', columnName: 'n', columnValue: String(row) }],
        });
        expect(response.status).to.equal(200);
        acknowledged += 1;
        if (acknowledged === total) process.kill(first.process.pid ?? 0, 'SIGKILL');
      }
    };
    await Promise.all(Array.from({ length: 32 }, writer));
    const exit = await first.stop('SIGKILL');
    expect(exit).to.equal(null); // killed, not exited

    const second = await start();
    for (let row = 0; row < total; row++) {
      const response = await fetch(`${second.baseUrl}/v1/local/readCellData?tableName=crash&id=row-${row}`);
      expect(response.status, `row-${row}`).to.equal(200);
      const body = (await response.json()) as { data: Array<{ columnValue: string }> };
      expect(body.data[0]?.columnValue).to.equal(String(row));
    }
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
