import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { ApiClient } from '../support/api-client.ts';
import { EventStreamClient } from '../support/event-stream-client.ts';
import { type ServiceProcess, cleanEnv, runService } from '../support/service-process.ts';

const SHUTDOWN_TIMEOUT_MS = 10_000;

/** SIGTERM to a real service process while an SSE feed is open (the embedded store). */
describe('change feeds when the service process gets SIGTERM', function () {
  this.timeout(60_000);
  let dataDir: string;
  let service: ServiceProcess | undefined;
  let stream: EventStreamClient | undefined;
  before(() => {
    dataDir = mkdtempSync(join(tmpdir(), 'kvcrud-feed-shutdown-'));
  });
  after(async () => {
    await stream?.close();
    await service?.stop('SIGKILL');
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('ends an open SSE feed with its end event and cursor, and exits 0 well within SHUTDOWN_TIMEOUT_MS', async () => {
    service = await runService(cleanEnv({ PORT: '0', DATA_DIR: dataDir, SHUTDOWN_TIMEOUT_MS: String(SHUTDOWN_TIMEOUT_MS) }));
    const api = await ApiClient.connect(service.baseUrl);
    const tables = '/v2/stores/embedded/instances/local/tables';
    expect((await api.post(tables, { name: 'orders', families: [{ name: 'cf' }] })).status).to.equal(201);
    stream = await EventStreamClient.open(`${service.baseUrl}${tables}/orders/changes`);
    await stream.until((client) => client.lastEventId !== '', 'the start of the feed');
    for (const key of ['a', 'b']) {
      expect((await api.request('PUT', `${tables}/orders/rows/${key}`, { json: { cells: [{ family: 'cf', column: 'c', value: key }] } })).status).to.equal(200);
    }
    await stream.until((client) => client.changes.length >= 2, 'two changes');
    const lastChange = stream.events.at(-1)?.id;

    const signalled = performance.now();
    let streamEndedAfter = Number.NaN;
    const ended = stream.until((client) => client.ended, 'the end of the stream', SHUTDOWN_TIMEOUT_MS).then(() => (streamEndedAfter = performance.now() - signalled));
    const code = await service.stop('SIGTERM');
    const exitedAfter = performance.now() - signalled;
    await ended;

    expect(code).to.equal(0);
    // The feed does not hold the drain: it ends at once, and the process exits long before the timeout.
    expect(exitedAfter, 'exit after SIGTERM, ms').to.be.below(SHUTDOWN_TIMEOUT_MS / 2);
    expect(streamEndedAfter, 'the stream ended before the process exited').to.be.at.most(exitedAfter);
    const end = stream.events.at(-1);
    expect(end?.event).to.equal('end');
    const data = JSON.parse(end?.data ?? '{}') as Record<string, unknown>;
    expect(data).to.deep.equal({ reason: 'SHUTTING_DOWN', cursor: end?.id });
    expect(stream.changes.map((change) => change['key'])).to.deep.equal(['a', 'b']);
    // Nothing came after the last change, so the end's cursor is still the last change's.
    expect(data['cursor']).to.equal(lastChange);
    const shutDown = service.output.map((line) => (line.startsWith('{') ? (JSON.parse(line) as Record<string, unknown>) : {})).find((line) => line['msg'] === 'shut down');
    expect(shutDown).to.include({ cutOff: false });
    expect(shutDown?.['durationMs']).to.be.below(SHUTDOWN_TIMEOUT_MS / 2);
  });
});
