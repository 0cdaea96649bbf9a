import { expect } from 'chai';
import { ERROR_CODES } from '../../src/service/errors.ts';
import { useTestApp } from '../support/test-app.ts';

describe('routing, request ids and problem documents', () => {
  const app = useTestApp();

  it('returns 404 ROUTE_NOT_FOUND for an unknown path', async () => {
    for (const path of ['/nope', '/v1', `/v1/${app().instance}/dropEverything`, '/v2/x/createTable']) {
      const response = await app().api.get(path);
      expect(response.status, path).to.equal(404);
      expect(response.body).to.include({ code: 'ROUTE_NOT_FOUND', instance: path });
      expect(response.headers.get('content-type')).to.equal('application/problem+json');
    }
  });

  it('returns 405 METHOD_NOT_ALLOWED with an Allow header for a known path', async () => {
    const response = await app().api.get(`/v1/${app().instance}/createTable`);
    expect(response.status).to.equal(405);
    expect(response.body.code).to.equal('METHOD_NOT_ALLOWED');
    expect(response.headers.get('allow')).to.equal('POST');

    const put = await app().api.request('PUT', `/v1/${app().instance}/readCellData`);
    expect(put.status).to.equal(405);
    expect(put.headers.get('allow')).to.contain('GET');
  });

  it('returns 405 METHOD_NOT_ALLOWED for a method no route has, on a known path', async () => {
    const response = await app().api.request('PATCH', `/v1/${app().instance}/deleteTable`);
    expect(response.status).to.equal(405);
    expect(response.headers.get('allow')).to.equal('DELETE');
  });

  it("echoes the caller's X-Request-Id in the header and the problem", async () => {
    const response = await app().api.get('/nope', { headers: { 'x-request-id': 'caller-id-42' } });
    expect(response.headers.get('x-request-id')).to.equal('caller-id-42');
    expect(response.body.requestId).to.equal('caller-id-42');
  });

  it('replaces an unusable X-Request-Id with a fresh UUID', async () => {
    for (const id of ['has spaces', 'x'.repeat(129), '']) {
      const response = await app().api.get('/nope', { headers: { 'x-request-id': id } });
      expect(response.body.requestId).to.match(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    }
  });

  it('gives every success a request id header too', async () => {
    const response = await app().api.get('/healthz');
    expect(response.headers.get('x-request-id')).to.match(/^[0-9a-f-]{36}$/);
  });

  it('documents each problem type at its type URI', async () => {
    for (const code of ERROR_CODES) {
      const slug = code.toLowerCase().replaceAll('_', '-');
      const response = await app().api.get(`/problems/${slug}`);
      expect(response.status, code).to.equal(200);
      expect(response.body).to.include({ type: `/problems/${slug}`, code });
    }
    const unknown = await app().api.get('/problems/no-such-problem');
    expect(unknown.status).to.equal(404);
  });
});

describe('health endpoints', () => {
  const app = useTestApp();

  it('GET /healthz answers 200 {status: ok}', async () => {
    const response = await app().api.get('/healthz');
    expect(response.status).to.equal(200);
    expect(response.body).to.deep.equal({ status: 'ok' });
  });

  it('GET /readyz answers 200 {status: ready} when the store answers', async () => {
    const response = await app().api.get('/readyz');
    expect(response.status).to.equal(200);
    expect(response.body).to.deep.equal({ status: 'ready' });
  });
});
