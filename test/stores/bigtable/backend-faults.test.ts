import { expect } from 'chai';
import { blackHole, closedPort } from '../../support/fake-backends.ts';
import type { DataStore } from '../../../src/store/store.ts';
import { withOverrides } from '../../support/store-faults.ts';
import { type TestApp, startTestApp, useTestApp } from '../../support/test-app.ts';

const CELL = { columnFamily: 'cf', columnName: 'c', columnValue: 'v' };

describe('when the backend cannot be reached', () => {
  let app: TestApp;
  before(async () => {
    app = await startTestApp({ emulatorHost: `127.0.0.1:${await closedPort()}`, storeTimeoutMs: 1000 });
  });
  after(async () => {
    await app.close();
  });

  it('answers 503 BACKEND_UNAVAILABLE with Retry-After, within the deadline', async () => {
    const started = Date.now();
    const response = await app.api.post(`/v1/${app.instance}/insertData`, { tableName: 't', rowKeyId: 'r', data: [CELL] });
    expect(response.status).to.equal(503);
    expect(response.body.code).to.equal('BACKEND_UNAVAILABLE');
    expect(response.headers.get('retry-after')).to.equal('1');
    expect(Date.now() - started).to.be.below(1000 + 500);
  });

  it('answers 503 BACKEND_UNAVAILABLE on every endpoint', async () => {
    const responses = await Promise.all([
      app.api.post(`/v1/${app.instance}/createTable`, { tableName: 't', columnFamily: 'cf' }),
      app.api.get(`/v1/${app.instance}/readCellData?tableName=t&id=r`),
      app.api.delete(`/v1/${app.instance}/deleteTable`, { tableList: ['t'] }),
    ]);
    expect(responses.map((response) => response.body.code)).to.deep.equal(Array(3).fill('BACKEND_UNAVAILABLE'));
  });

  it('turns /readyz 503 while /healthz stays 200', async () => {
    const ready = await app.api.get('/readyz');
    expect(ready.status).to.equal(503);
    expect(ready.body.code).to.equal('BACKEND_UNAVAILABLE');
    const health = await app.api.get('/healthz');
    expect(health.status).to.equal(200);
    expect(health.body).to.deep.equal({ status: 'ok' });
  });

  it('logs the cause, while the caller sees no backend detail', async () => {
    const response = await app.api.get(`/v1/${app.instance}/readCellData?tableName=t&id=r`, {
      headers: { 'x-request-id': 'trace-me-503' },
    });
    expect(JSON.stringify(response.body)).to.not.match(/ECONNREFUSED|grpc|14 UNAVAILABLE|127\.0\.0\.1/i);
    const logged = app.logs.find((line) => line['requestId'] === 'trace-me-503');
    expect(logged, 'log line for the request').to.not.equal(undefined);
    expect(JSON.stringify(logged?.['err'])).to.match(/UNAVAILABLE/);
  });
});

describe('when the backend accepts connections but never answers', () => {
  let hole: Awaited<ReturnType<typeof blackHole>>;
  let app: TestApp;
  before(async () => {
    hole = await blackHole();
    app = await startTestApp({ emulatorHost: hole.host, storeTimeoutMs: 700 });
  });
  after(async () => {
    await hole.close();
    await app.close();
  });

  it('answers 504 DEADLINE_EXCEEDED once STORE_TIMEOUT_MS has passed', async () => {
    const started = Date.now();
    const response = await app.api.get(`/v1/${app.instance}/readCellData?tableName=t&id=r`);
    const elapsed = Date.now() - started;
    expect(response.status).to.equal(504);
    expect(response.body.code).to.equal('DEADLINE_EXCEEDED');
    expect(elapsed).to.be.within(650, 700 + 800);
  });

  it('answers 504 DEADLINE_EXCEEDED for a write', async () => {
    const response = await app.api.post(`/v1/${app.instance}/insertData`, { tableName: 't', rowKeyId: 'r', data: [CELL] });
    expect(response.status).to.equal(504);
    expect(response.body.code).to.equal('DEADLINE_EXCEEDED');
  });

  it('turns /readyz 503 within a second', async () => {
    const started = Date.now();
    const response = await app.api.get('/readyz');
    expect(response.status).to.equal(503);
    expect(Date.now() - started).to.be.below(1000);
  });
});

describe('when an adapter fails unexpectedly', () => {
  // A bug inside an adapter cannot be caused for real; the real store is wrapped to throw one.
  const app = useTestApp({
    wrapStore: (store) =>
      withOverrides(store, {
        readRows: () => Promise.reject(new TypeError('Cannot read properties of undefined (reading "secretInternalField")')),
      }),
  });

  it('answers 500 INTERNAL without the error message, and logs it with the request id', async () => {
    const response = await app().api.get(`/v1/${app().instance}/readCellData?tableName=t&id=r`);
    expect(response.status).to.equal(500);
    expect(response.body.code).to.equal('INTERNAL');
    expect(JSON.stringify(response.body)).to.not.contain('secretInternalField');
    const logged = app().logs.find((line) => line['requestId'] === response.body.requestId);
    expect(JSON.stringify(logged?.['err'])).to.contain('secretInternalField');
  });
});

describe('when the caller disconnects while its backend call is pending', () => {
  const STORE_TIMEOUT_MS = 5000;

  /** Wraps the store to record when its calls end, and with what error. */
  function recordEnds() {
    const ends: Array<{ at: number; error: unknown }> = [];
    const settle = <T>(call: Promise<T>): Promise<T> =>
      call.then(
        (value) => {
          ends.push({ at: Date.now(), error: undefined });
          return value;
        },
        (error: unknown) => {
          ends.push({ at: Date.now(), error });
          throw error;
        },
      );
    const wrapStore = (store: DataStore): DataStore =>
      withOverrides(store, {
        readRows: (...args) => settle(store.readRows(...args)),
        mutateRow: (...args) => settle(store.mutateRow(...args)),
      });
    return { ends, wrapStore };
  }

  /**
   * Sends a request, hangs up after `afterMs`, and returns how long after the hang-up its store
   * call ended and why, and the request's log line.
   */
  async function hangUp(
    app: TestApp,
    ends: Array<{ at: number; error: unknown }>,
    path: string,
    init: RequestInit,
    afterMs: number,
  ): Promise<{ endedAfterMs: number; error: string; line: Record<string, unknown> | undefined }> {
    ends.length = 0;
    const requestId = `hang-up-${Math.random().toString(16).slice(2)}`;
    const controller = new AbortController();
    const request = fetch(`${app.baseUrl}${path}`, {
      ...init,
      headers: { ...(init.headers as Record<string, string>), 'x-request-id': requestId },
      signal: controller.signal,
    }).catch(() => undefined);
    await new Promise((resolve) => setTimeout(resolve, afterMs));
    controller.abort();
    const hungUp = Date.now();
    await request;
    for (;;) {
      const ended = ends[0];
      if (ended !== undefined) {
        return {
          endedAfterMs: ended.at - hungUp,
          error: (ended.error as Error | undefined)?.message ?? 'no error',
          line: app.logs.find((entry) => entry['requestId'] === requestId),
        };
      }
      if (Date.now() - hungUp > STORE_TIMEOUT_MS + 2000) throw new Error('the store call never ended');
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }

  const write = () => ({
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ tableName: 't', rowKeyId: 'r', data: [CELL] }),
  });

  /** The request's line: a warning that the caller left, not an error with a stack. */
  const expectAbandoned = (line: Record<string, unknown> | undefined) => {
    expect(line).to.include({ level: 'warn', aborted: true });
    expect(line).to.not.have.property('err');
  };

  describe('to a backend that never answers', () => {
    let hole: Awaited<ReturnType<typeof blackHole>>;
    let app: TestApp;
    const recorder = recordEnds();
    before(async () => {
      hole = await blackHole();
      app = await startTestApp({ emulatorHost: hole.host, storeTimeoutMs: STORE_TIMEOUT_MS, wrapStore: recorder.wrapStore });
    });
    after(async () => {
      await hole.close();
      await app.close();
    });

    it('cancels a read (a gRPC stream) at once instead of waiting for the deadline', async () => {
      const ended = await hangUp(app, recorder.ends, `/v1/${app.instance}/readCellData?tableName=t&id=r`, {}, 300);
      expect(ended.endedAfterMs).to.be.below(1000);
      expect(ended.error).to.contain('caller disconnected');
      expectAbandoned(ended.line);
    });

    it('cancels a write (unary calls) at once instead of waiting for the deadline', async () => {
      const ended = await hangUp(app, recorder.ends, `/v1/${app.instance}/insertData`, write(), 300);
      expect(ended.endedAfterMs).to.be.below(1000);
      expect(ended.error).to.contain('caller disconnected');
      expectAbandoned(ended.line);
    });
  });

  describe('to a backend that cannot be reached', () => {
    let app: TestApp;
    const recorder = recordEnds();
    before(async () => {
      app = await startTestApp({ emulatorHost: `127.0.0.1:${await closedPort()}`, storeTimeoutMs: STORE_TIMEOUT_MS, wrapStore: recorder.wrapStore });
    });
    after(async () => {
      await app.close();
    });

    it('stops retrying at once', async () => {
      const ended = await hangUp(app, recorder.ends, `/v1/${app.instance}/insertData`, write(), 500);
      expect(ended.endedAfterMs).to.be.below(1000);
      expect(ended.error).to.contain('caller disconnected');
      expectAbandoned(ended.line);
    });
  });
});
