import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { randomInstanceId } from '../../support/driver-harness.ts';
import { spannerTestInstance } from '../../support/harnesses/spanner.ts';
import { type ServiceProcess, cleanEnv, runService } from '../../support/service-process.ts';
import { requireSpanner, sharedSpannerEmulator } from '../../support/spanner-emulator.ts';
import { TEST_PROJECT } from '../../support/emulator.ts';

/**
 * The service as it runs in production (its own process, configured by a STORES_FILE) with a
 * Spanner store on the emulator as its default: v1 and v2 both serve from it.
 */
describe('spanner: the service with a Spanner store as its default, from a STORES_FILE', () => {
  let service: ServiceProcess | undefined;
  let directory: string | undefined;
  const instance = randomInstanceId();
  after(async () => {
    await service?.stop();
    if (directory !== undefined) rmSync(directory, { recursive: true, force: true });
  });

  it('serves v1 and v2 from it', async function () {
    this.timeout(90_000);
    requireSpanner(this);
    const emulator = await sharedSpannerEmulator();
    directory = mkdtempSync(join(tmpdir(), 'kvcrud-spanner-stores-'));
    const storesFile = join(directory, 'stores.yaml');
    writeFileSync(storesFile, `stores:\n  ledger: { driver: spanner, projectId: ${TEST_PROJECT}, instance: ${spannerTestInstance()}, emulatorHost: "${emulator.host}", instances: [${instance}] }\n`);
    service = await runService(cleanEnv({ PORT: '0', STORES_FILE: storesFile }));
    const url = (path: string) => new URL(path, service?.baseUrl).toString();
    const json = { 'content-type': 'application/json' };

    expect((await fetch(url(`/v1/${instance}/createTable`), { method: 'POST', headers: json, body: JSON.stringify({ tableName: 't', columnFamily: 'cf' }) })).status).to.equal(201);
    const insert = await fetch(url(`/v1/${instance}/insertData`), {
      method: 'POST',
      headers: json,
      body: JSON.stringify({ tableName: 't', rowKeyId: 'r1', data: [{ columnFamily: 'cf', columnName: 'c', columnValue: 'v1' }] }),
    });
    expect(insert.status).to.equal(200);
    const read = (await (await fetch(url(`/v1/${instance}/readCellData?tableName=t&id=r1`))).json()) as { data: Array<{ columnValue: string }> };
    expect(read.data.map((cell) => cell.columnValue)).to.deep.equal(['v1']);

    const store = (await (await fetch(url('/v2/stores/ledger'))).json()) as { driver: string; default: boolean; instances: string[] };
    expect(store).to.include({ driver: 'spanner', default: true });
    expect(store.instances).to.deep.equal([instance]);
    const row = await fetch(url(`/v2/stores/ledger/instances/${instance}/tables/t/rows/r1`));
    expect(row.status).to.equal(200);
    expect((await fetch(url('/readyz'))).status).to.equal(200);
  });
});
