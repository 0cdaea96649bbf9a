import type { AddressInfo } from 'node:net';
import { Router } from '@koa/router';
import { expect } from 'chai';
import Koa from 'koa';
import type { AppState } from '../../src/http/app-state.ts';
import { problemResponder } from '../../src/http/middleware/problem-responder.ts';
import { rateLimit } from '../../src/http/middleware/rate-limit.ts';
import { requestId } from '../../src/http/middleware/request-id.ts';
import { blackHole } from '../support/fake-backends.ts';
import { harness as embeddedHarness } from '../support/harnesses/embedded.ts';
import { type TestApp, startTestApp, useTestApp } from '../support/test-app.ts';

describe('overload: a bound on requests in flight (MAX_INFLIGHT)', () => {
  // A backend that never answers holds every request in flight until STORE_TIMEOUT_MS.
  let hole: Awaited<ReturnType<typeof blackHole>>;
  let app: TestApp;
  before(async () => {
    hole = await blackHole();
    // One caller holds every slot here (the test app's default), to reach the bound on all
    // callers; fairness.test.ts covers the bound per caller.
    app = await startTestApp({ emulatorHost: hole.host, storeTimeoutMs: 1500, maxInflight: 4 });
  });
  after(async () => {
    await hole.close();
    await app.close();
  });

  it('refuses the request past the bound at once with 503 OVERLOADED and Retry-After, and takes requests again once below it', async () => {
    const read = () => app.api.get(`/v1/${app.instance}/readCellData?tableName=t&id=r`);
    const held = Array.from({ length: 4 }, read);
    await new Promise((resolve) => setTimeout(resolve, 200)); // all four are at the backend by now

    const started = Date.now();
    const shed = await read();
    expect(Date.now() - started).to.be.below(300);
    expect(shed.status).to.equal(503);
    expect(shed.body.code).to.equal('OVERLOADED');
    expect(shed.headers.get('retry-after')).to.equal('1');
    // Logged like every request, as a warning without a cause: no error line per shed request.
    const lines = app.logs.filter((line) => line['requestId'] === shed.body.requestId);
    expect(lines).to.have.length(1);
    expect(lines[0]).to.include({ level: 'warn', code: 'OVERLOADED', status: 503 });
    expect(lines[0]).to.not.have.property('err');

    // The probes are neither shed nor counted: /healthz answers, /readyz asks the (hung) backend.
    expect((await app.api.get('/healthz')).status).to.equal(200);
    expect((await app.api.get('/readyz')).body.code).to.equal('BACKEND_UNAVAILABLE');

    const outcomes = await Promise.all(held);
    expect(outcomes.map((response) => response.body.code)).to.deep.equal(Array(4).fill('DEADLINE_EXCEEDED'));
    // The slots are free again: the next request reaches the backend (and times out there).
    expect((await read()).body.code).to.equal('DEADLINE_EXCEEDED');
  });
});

describe('overload: a rate limit per caller (RATE_LIMIT_PER_SECOND)', () => {
  // One request a second: slow enough that the test's own pace cannot refill the bucket by
  // accident on a busy machine (bursts of a larger capacity are covered by the TokenBuckets tests).
  const app = useTestApp({ store: embeddedHarness, rateLimitPerSecond: 1 });
  const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

  it('answers 429 RATE_LIMITED with Retry-After once the caller used its token, and lets the probes through', async () => {
    const path = `/v1/${app().instance}/readCellData?tableName=none&id=r`;
    await sleep(1100); // the client's own GET /openapi.json took a token: let it come back
    expect((await app().api.get(path)).status).to.equal(404); // within the limit: answered (no such table)

    const limited = await app().api.get(path);
    expect(limited.status).to.equal(429);
    expect(limited.body.code).to.equal('RATE_LIMITED');
    expect(limited.headers.get('retry-after')).to.equal('1');
    expect(limited.headers.get('content-type')).to.equal('application/problem+json');

    expect((await app().api.get('/healthz')).status).to.equal(200);
    expect((await app().api.get('/readyz')).status).to.equal(200);

    await sleep(1100);
    expect((await app().api.get(path)).status).to.equal(404);
    expect((await app().api.get(path)).status).to.equal(429);
  });
});

describe('rate limit keys', () => {
  // The middleware as createApp composes it, behind a stand-in for authentication that sets the
  // principal from a header, as the authentication middleware will.
  let server: ReturnType<Koa['listen']>;
  let baseUrl: string;
  before(async () => {
    const app = new Koa<AppState & { principal?: string }>();
    const router = new Router<AppState>();
    router.get('/thing', (ctx) => {
      ctx.body = { ok: true };
    });
    app.use(requestId());
    app.use(problemResponder());
    app.use(async (ctx, next) => {
      const principal = ctx.get('x-test-principal');
      if (principal !== '') ctx.state.principal = principal;
      await next();
    });
    app.use(rateLimit({ perSecond: 1 }));
    app.use(router.routes());
    server = await new Promise((resolve) => {
      const listening = app.listen(0, '127.0.0.1', () => resolve(listening));
    });
    baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(async () => {
    await new Promise((resolve) => server.close(resolve));
  });

  const statuses = async (principal: string | undefined, count: number) => {
    const result: number[] = [];
    for (let i = 0; i < count; i++) {
      const response = await fetch(`${baseUrl}/thing`, { headers: principal === undefined ? {} : { 'x-test-principal': principal } });
      result.push(response.status);
    }
    return result;
  };

  it('gives each authenticated principal its own bucket, and anonymous callers one per address', async () => {
    expect(await statuses('alice', 2)).to.deep.equal([200, 429]);
    expect(await statuses('bob', 2)).to.deep.equal([200, 429]);
    // Same address as alice and bob, but anonymous: a bucket of its own.
    expect(await statuses(undefined, 2)).to.deep.equal([200, 429]);
    // AUTH_MODE none names every caller "anonymous": that is the address's bucket, not one shared by all.
    expect(await statuses('anonymous', 1)).to.deep.equal([429]);
  });
});
