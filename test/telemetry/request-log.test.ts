import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import Koa from 'koa';
import type { AppState } from '../../src/http/app-state.ts';
import { requestId } from '../../src/http/middleware/request-id.ts';
import { requestTelemetry } from '../../src/http/middleware/request-telemetry.ts';
import { createLogger, errorForLog } from '../../src/telemetry/logger.ts';
import { createMetrics } from '../../src/telemetry/metrics.ts';
import { withOverrides } from '../support/store-faults.ts';
import { type TestApp, useTestApp } from '../support/test-app.ts';

type Line = Record<string, unknown>;

/** The log lines of one request. */
function linesOf(app: TestApp, id: string | null): Line[] {
  return app.logs.filter((line) => line['requestId'] === id);
}

describe('the request log', () => {
  describe('of the service', () => {
    const app = useTestApp();
    const v1 = () => `/v1/${app().instance}`;

    before(async () => {
      await app().api.post(`${v1()}/createTable`, { tableName: 'orders', columnFamily: 'cf' });
    });

    it('is one JSON line per request: method, route template, store, status, duration, request id, trace id', async () => {
      const response = await app().api.get(`${v1()}/readCellData?tableName=orders&id=r1`, { headers: { 'x-request-id': 'log-line-1' } });
      expect(response.status).to.equal(404);
      const lines = linesOf(app(), 'log-line-1');
      expect(lines).to.have.length(1);
      const [line] = lines;
      expect(line).to.include({
        service: 'kvcrud',
        requestId: 'log-line-1',
        method: 'GET',
        route: '/v1/:instanceID/readCellData',
        // v1 works on the default store, named by its name.
        store: app().storeName,
        status: 404,
        code: 'ROW_NOT_FOUND',
        msg: 'GET /v1/:instanceID/readCellData 404',
      });
      expect(line?.['durationMs']).to.be.a('number').and.to.be.above(0);
      expect(line?.['traceId']).to.match(/^[0-9a-f]{32}$/);
      expect(line?.['time']).to.match(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
      expect(line).to.not.have.property('err');
    });

    it('logs successes at info, 4xx at warn (with the code), successful probes at debug', async () => {
      const levels: Record<string, unknown> = {};
      for (const [id, path] of [
        ['ok', '/openapi.json'],
        ['client-error', `${v1()}/readCellData?tableName=orders`],
        ['unmatched', '/nowhere'],
        ['probe', '/healthz'],
        ['scrape', '/metrics'],
      ] as const) {
        await app().api.get(path, { headers: { 'x-request-id': `level-${id}` } });
        const [line] = linesOf(app(), `level-${id}`);
        levels[id] = [line?.['level'], line?.['severity'], line?.['route'], line?.['code']];
      }
      expect(levels).to.deep.equal({
        ok: ['info', 'INFO', '/openapi.json', undefined],
        'client-error': ['warn', 'WARNING', '/v1/:instanceID/readCellData', 'VALIDATION_FAILED'],
        unmatched: ['warn', 'WARNING', '(unmatched)', 'ROUTE_NOT_FOUND'],
        probe: ['debug', 'DEBUG', '/healthz', undefined],
        scrape: ['debug', 'DEBUG', '/metrics', undefined],
      });
    });

    it('never logs bodies, cell values, row keys, queries or credentials', async () => {
      const secrets = {
        headers: { authorization: 'Bearer token-secret-1', 'x-api-key': 'api-key-secret-2', cookie: 'session=cookie-secret-3' },
      };
      const cells = [{ columnFamily: 'cf', columnName: 'column-secret-4', columnValue: 'value-secret-5' }];
      await app().api.request('POST', `${v1()}/insertData`, { ...secrets, json: { tableName: 'orders', rowKeyId: 'row-secret-6', data: cells } });
      await app().api.request('POST', `${v1()}/insertData`, { ...secrets, json: { tableName: 'orders', rowKeyId: 'row-secret-6', data: [{ ...cells[0], columnFamily: 'nope' }] } });
      await app().api.request('GET', `${v1()}/readCellData?tableName=orders&id=row-secret-6`, secrets);
      await app().api.request('GET', `${v1()}/readCellData?tableName=orders&id=row-secret-6&bad=query-secret-7`, secrets);
      expect(JSON.stringify(app().logs)).to.not.match(/secret-\d/);
    });
  });

  describe('of a server-side failure', () => {
    // A client library error carrying its request, as gaxios errors do: the token must not be logged.
    const failure = Object.assign(new Error('token refresh failed', { cause: Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' }) }), {
      code: 'ERR_AUTH',
      config: { headers: { Authorization: 'Bearer ya29.token-secret' }, body: 'assertion=jwt-secret' },
      response: { data: { access_token: 'token-secret' } },
    });
    const app = useTestApp({ wrapStore: (store) => withOverrides(store, { readRows: () => Promise.reject(failure) }) });

    it('is logged at error with its cause chain, and nothing else the error carries', async () => {
      const response = await app().api.get(`/v1/${app().instance}/readCellData?tableName=t&id=r`);
      expect(response.status).to.equal(500);
      const [line] = linesOf(app(), response.headers.get('x-request-id'));
      expect(line).to.include({ level: 'error', severity: 'ERROR', status: 500, code: 'INTERNAL' });
      expect(line?.['err']).to.deep.include({ type: 'Error', message: 'token refresh failed', code: 'ERR_AUTH' });
      expect((line?.['err'] as Line)['cause']).to.deep.include({ type: 'Error', message: 'socket hang up', code: 'ECONNRESET' });
      expect(JSON.stringify(line)).to.not.match(/secret/);
    });
  });

  describe('of requests the middleware sees alone', () => {
    let server: Server;
    let baseUrl: string;
    const logs: Line[] = [];
    const metrics = createMetrics();

    before(async () => {
      const logger = createLogger('info', { write: (line: string) => void logs.push(JSON.parse(line) as Line) });
      const app = new Koa<AppState>();
      app.use(requestId());
      app.use(requestTelemetry({ logger, metrics }));
      // As an authentication middleware will: the caller's name on ctx.state.
      app.use(async (ctx, next) => {
        const name = ctx.get('x-test-principal');
        if (name !== '') (ctx.state as { principal?: unknown }).principal = name === 'object' ? { name } : name;
        await next();
      });
      app.use(async (ctx) => {
        if (ctx.path === '/slow') await new Promise((resolve) => setTimeout(resolve, 300));
        ctx.body = { ok: true };
      });
      server = await new Promise((resolve) => {
        const listening = app.listen(0, '127.0.0.1', () => resolve(listening));
      });
      baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    });
    after(async () => {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    });

    it("names the caller's principal when authentication left one, never anything else of it", async () => {
      await fetch(`${baseUrl}/a`, { headers: { 'x-request-id': 'principal-1', 'x-test-principal': 'svc-orders' } });
      await fetch(`${baseUrl}/a`, { headers: { 'x-request-id': 'principal-2', 'x-test-principal': 'object' } });
      await fetch(`${baseUrl}/a`, { headers: { 'x-request-id': 'principal-3' } });
      const principal = (id: string) => logs.find((line) => line['requestId'] === id)?.['principal'];
      expect([principal('principal-1'), principal('principal-2'), principal('principal-3')]).to.deep.equal(['svc-orders', undefined, undefined]);
    });

    it('marks a request whose caller hung up before the answer, and counts it out of flight', async () => {
      const aborted = new AbortController();
      const request = fetch(`${baseUrl}/slow`, { headers: { 'x-request-id': 'hung-up' }, signal: aborted.signal }).catch(() => undefined);
      setTimeout(() => aborted.abort(), 50);
      await request;
      await new Promise((resolve) => setTimeout(resolve, 400));
      const line = logs.find((logged) => logged['requestId'] === 'hung-up');
      expect(line).to.include({ aborted: true, route: '(unmatched)' });
      expect(line?.['msg']).to.contain('connection closed before the response was sent');
      expect((await metrics.httpRequestsInFlight.get()).values[0]?.value).to.equal(0);
    });
  });
});

describe('errorForLog', () => {
  it('keeps type, message, stack, code and gRPC details, and follows causes', () => {
    const grpc = Object.assign(new Error('14 UNAVAILABLE: connect ECONNREFUSED'), { code: 14, details: 'connect ECONNREFUSED', metadata: { internalRepr: new Map() } });
    const logged = errorForLog(new TypeError('outer', { cause: grpc }));
    expect(logged).to.deep.include({ type: 'TypeError', message: 'outer' });
    expect(logged.stack).to.match(/^TypeError: outer\n/);
    expect(logged.cause).to.deep.include({ type: 'Error', message: '14 UNAVAILABLE: connect ECONNREFUSED', code: 14, details: 'connect ECONNREFUSED' });
    expect(logged.cause).to.not.have.property('metadata');
  });

  it('describes a thrown value that is not an Error', () => {
    expect(errorForLog('just a string')).to.deep.equal({ type: 'string', message: 'just a string' });
  });

  it('reads the same fields from an object that is not an Error, and nothing else of it', () => {
    const rejected = { name: 'ReplyError', message: 'WRONGPASS invalid username-password pair', code: 'WRONGPASS', password: 'hunter2', cause: { message: 'inner' } };
    expect(errorForLog(rejected)).to.deep.equal({ type: 'ReplyError', message: 'WRONGPASS invalid username-password pair', code: 'WRONGPASS', cause: { type: 'Object', message: 'inner' } });
    expect(errorForLog({ options: { password: 'hunter2' } })).to.deep.equal({ type: 'Object', message: 'no message; fields: options' });
  });

  it("keeps an AggregateError's errors, and words its message from theirs when it has none", () => {
    const refused = (address: string) => Object.assign(new Error(`connect ECONNREFUSED ${address}`), { code: 'ECONNREFUSED' });
    const logged = errorForLog(new AggregateError([refused('::1:6380'), refused('127.0.0.1:6380')], ''));
    expect(logged).to.deep.include({ type: 'AggregateError', message: 'connect ECONNREFUSED ::1:6380; connect ECONNREFUSED 127.0.0.1:6380' });
    expect(logged.errors?.map((inner) => inner.code)).to.deep.equal(['ECONNREFUSED', 'ECONNREFUSED']);
  });

  it('stops following causes after a few, so a cycle cannot loop', () => {
    const error = new Error('a');
    (error as { cause?: unknown }).cause = error;
    let depth = 0;
    for (let logged = errorForLog(error); logged.cause !== undefined; logged = logged.cause) depth += 1;
    expect(depth).to.equal(5);
  });
});
