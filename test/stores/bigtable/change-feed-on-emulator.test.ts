import { expect } from 'chai';
import { ApiClient } from '../../support/api-client.ts';
import { emulatorHost } from '../../support/emulator.ts';
import { type ServiceProcess, runService, serviceEnv } from '../../support/service-process.ts';
import { randomInstanceId } from '../../support/test-app.ts';
import { problemOf } from '../../support/v2.ts';

/**
 * The service as a process on the real Bigtable emulator, which does not serve change streams
 * (it crashes on GenerateInitialChangeStreamPartitions): the store publishes `changeFeed: false`
 * and the feed is refused with 501 before any change stream call, so the emulator serves on.
 */
describe('bigtable store on the emulator: no change feed, end to end', function () {
  this.timeout(60_000);
  let service: ServiceProcess | undefined;
  after(async () => {
    await service?.stop('SIGKILL');
  });

  it('shows changeFeed: false in GET /v2/stores and answers /changes with 501 naming changeFeed, as JSON and to an SSE request', async function () {
    const host = emulatorHost(this);
    const instance = randomInstanceId();
    service = await runService(serviceEnv(instance, host));
    const api = await ApiClient.connect(service.baseUrl);

    const stores = (await api.get('/v2/stores')).body.stores as Array<{ name: string; driver: string; capabilities: Record<string, boolean>; limits: Record<string, number> }>;
    const bigtable = stores.find((store) => store.driver === 'bigtable');
    expect(bigtable?.capabilities['changeFeed']).to.equal(false);
    const tables = `/v2/stores/${bigtable?.name ?? ''}/instances/${instance}/tables`;
    expect((await api.post(tables, { name: 'orders', families: [{ name: 'cf' }] })).status).to.equal(201);

    const refused = await api.get(`${tables}/orders/changes`);
    expect(problemOf(refused)).to.deep.equal({ status: 501, code: 'NOT_SUPPORTED_BY_STORE', capability: 'changeFeed' });
    expect(refused.body.detail).to.include('changeFeed');
    const sse = await fetch(`${service.baseUrl}${tables}/orders/changes`, { headers: { accept: 'text/event-stream' } });
    expect(sse.status).to.equal(501);
    expect(sse.headers.get('content-type')).to.match(/^application\/problem\+json/);
    expect(await sse.json()).to.include({ code: 'NOT_SUPPORTED_BY_STORE', capability: 'changeFeed' });

    // The emulator was never asked for a change stream: it still serves.
    expect((await api.request('PUT', `${tables}/orders/rows/k`, { json: { cells: [{ family: 'cf', column: 'c', value: 'v' }] } })).status).to.equal(200);
    expect((await api.get(`${tables}/orders/rows/k`)).body.cells[0].value).to.equal('v');
  });
});
