import { connect } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { expect } from 'chai';
import { ApiClient } from '../support/api-client.ts';
import { cbt } from '../support/cbt.ts';
import { emulatorHost } from '../support/emulator.ts';
import { runService, serviceEnv, type ServiceProcess } from '../support/service-process.ts';
import { SlowProxy } from '../support/slow-proxy.ts';
import { randomInstanceId } from '../support/test-app.ts';

/** Resolves with the error code of a TCP connection attempt, or 'connected'. */
function tryConnect(baseUrl: string): Promise<string> {
  const { hostname, port } = new URL(baseUrl);
  return new Promise((resolve) => {
    const socket = connect({ host: hostname, port: Number(port) });
    socket.once('connect', () => {
      socket.destroy();
      resolve('connected');
    });
    socket.once('error', (error: NodeJS.ErrnoException) => resolve(error.code ?? error.message));
  });
}

function logLines(service: ServiceProcess): Array<Record<string, unknown>> {
  return service.output.flatMap((line) => (line.startsWith('{') ? [JSON.parse(line) as Record<string, unknown>] : []));
}

describe('graceful shutdown of the service process', function () {
  this.timeout(60_000);
  let proxy: SlowProxy | undefined;
  let emulator: string;

  // The service reaches the real emulator through a proxy that can make every store call slow.
  beforeEach(async function () {
    emulator = emulatorHost(this);
    proxy = await SlowProxy.start(emulator);
  });
  afterEach(async () => {
    await proxy?.close();
  });

  async function startService(vars: Record<string, string>): Promise<{ service: ServiceProcess; api: ApiClient; instance: string }> {
    const instance = randomInstanceId();
    const service = await runService(serviceEnv(instance, proxy?.host ?? '', vars));
    return { service, api: await ApiClient.connect(service.baseUrl), instance };
  }

  it('on SIGTERM, finishes slow in-flight requests with 2xx, refuses new connections, closes the store and exits 0', async () => {
    const { service, api, instance } = await startService({ STORE_TIMEOUT_MS: '20000', SHUTDOWN_TIMEOUT_MS: '15000' });
    const v1 = `/v1/${instance}`;
    const cell = (value: string) => [{ columnFamily: 'cf', columnName: 'c', columnValue: value }];
    expect((await api.post(`${v1}/createTable`, { tableName: 't', columnFamily: 'cf' })).status).to.equal(201);
    expect((await api.post(`${v1}/insertData`, { tableName: 't', rowKeyId: 'r0', data: cell('before') })).status).to.equal(200);

    if (proxy) proxy.delayMs = 1500;
    const sentAt = performance.now();
    const inFlight = [
      api.get(`${v1}/readCellData?tableName=t&id=r0`),
      api.get(`${v1}/readCellData?tableName=t&id=r0`),
      api.post(`${v1}/insertData`, { tableName: 't', rowKeyId: 'r1', data: cell('during') }),
      api.post(`${v1}/insertData`, { tableName: 't', rowKeyId: 'r2', data: cell('during') }),
    ];
    await sleep(300);
    const exited = service.stop('SIGTERM');
    await sleep(200);
    expect(await tryConnect(service.baseUrl), 'a new connection during the drain').to.equal('ECONNREFUSED');

    const responses = await Promise.all(inFlight);
    expect(performance.now() - sentAt, 'the requests were slow').to.be.at.least(1500);
    expect(responses.map((response) => response.status)).to.deep.equal([200, 200, 200, 200]);
    expect(responses[0]?.body.data[0].columnValue).to.equal('before');
    for (const response of responses) expect(response.headers.get('connection')).to.equal('close');
    expect(await exited).to.equal(0);

    // What was written during the drain is in the store.
    const rows = await cbt(emulator, instance, 'read', 't');
    expect(rows).to.match(/^r1$/m).and.to.match(/^r2$/m);
    const messages = logLines(service).map((line) => line['msg']);
    expect(messages).to.include.members(['shutting down: finishing in-flight requests', 'shut down']);
    expect(logLines(service).find((line) => line['msg'] === 'shut down')).to.include({ cutOff: false });
  });

  it('answers a readiness probe in flight at SIGTERM with 503 SHUTTING_DOWN at once', async () => {
    const { service, api } = await startService({});
    expect((await api.get('/readyz')).status).to.equal(200);

    // The store check now takes longer than the probe's own 800 ms limit.
    if (proxy) proxy.delayMs = 5000;
    const probe = api.get('/readyz');
    await sleep(200);
    const signalledAt = performance.now();
    const exited = service.stop('SIGTERM');
    const response = await probe;
    expect(performance.now() - signalledAt).to.be.below(500);
    expect(response.status).to.equal(503);
    expect(response.body).to.include({ code: 'SHUTTING_DOWN', status: 503 });
    expect(response.headers.get('retry-after')).to.equal('1');
    expect(await exited).to.equal(0);
    // Draining is expected, not an error to log.
    expect(logLines(service).filter((line) => line['level'] === 'error')).to.deep.equal([]);
  });

  it('cuts a request still in flight after SHUTDOWN_TIMEOUT_MS and exits 0 without waiting for it', async () => {
    const { service, api, instance } = await startService({ STORE_TIMEOUT_MS: '30000', SHUTDOWN_TIMEOUT_MS: '1000' });
    expect((await api.post(`/v1/${instance}/createTable`, { tableName: 't', columnFamily: 'cf' })).status).to.equal(201);

    if (proxy) proxy.delayMs = 20_000;
    const stuck = api.get(`/v1/${instance}/readCellData?tableName=t&id=r`).then(
      (response) => `answered ${response.status}`,
      (error: Error) => `failed: ${error.message}`,
    );
    await sleep(300);
    const signalledAt = performance.now();
    expect(await service.stop('SIGTERM')).to.equal(0);
    const took = performance.now() - signalledAt;
    expect(took, 'waited for SHUTDOWN_TIMEOUT_MS').to.be.at.least(1000);
    expect(took, 'did not wait for the request').to.be.below(5000);
    expect(await stuck).to.match(/^failed: /);
    const timeout = logLines(service).find((line) => line['msg'] === 'shutdown timeout: cutting the connections still open');
    expect(timeout).to.include({ timeoutMs: 1000, connections: 1 });
    expect(logLines(service).find((line) => line['msg'] === 'shut down')).to.include({ cutOff: true });
  });
});
