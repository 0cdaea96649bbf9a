import { connect, type Socket } from 'node:net';
import { expect } from 'chai';
import { harness as embeddedHarness } from '../support/harnesses/embedded.ts';
import { useTestApp } from '../support/test-app.ts';

/** Opens a raw TCP connection to the app, collecting what the server sends until it closes. */
async function rawConnection(baseUrl: string): Promise<{ socket: Socket; received: () => string; closed: Promise<number> }> {
  const { hostname, port } = new URL(baseUrl);
  const socket = connect(Number(port), hostname);
  await new Promise((resolve) => socket.once('connect', resolve));
  const opened = Date.now();
  let text = '';
  socket.on('data', (chunk: Buffer) => (text += chunk.toString('latin1')));
  socket.on('error', () => {});
  const closed = new Promise<number>((resolve) => socket.once('close', () => resolve(Date.now() - opened)));
  return { socket, received: () => text, closed };
}

describe('HTTP server limits', () => {
  describe('with the production limits', () => {
    const app = useTestApp({ store: embeddedHarness });

    it('accepts a 16 KiB bearer token in Authorization', async () => {
      const token = 'x'.repeat(16 * 1024);
      const response = await app().api.get('/healthz', { headers: { authorization: `Bearer ${token}`, 'x-other': 'y'.repeat(2000) } });
      expect(response.status).to.equal(200);
    });

    it('answers 431 HEADERS_TOO_LARGE, a problem document with a request id, to headers far over the limit', async () => {
      const response = await fetch(`${app().baseUrl}/healthz`, { headers: { authorization: `Bearer ${'x'.repeat(200 * 1024)}` } });
      expect(response.status).to.equal(431);
      expect(response.headers.get('content-type')).to.equal('application/problem+json');
      expect(response.headers.get('connection')).to.equal('close');
      const requestId = response.headers.get('x-request-id');
      expect(requestId).to.match(/^[0-9a-f-]{36}$/);
      const problem = (await response.json()) as Record<string, unknown>;
      expect(problem).to.include({ type: '/problems/headers-too-large', status: 431, code: 'HEADERS_TOO_LARGE', requestId });
      expect(problem['detail']).to.contain(String(64 * 1024));
      // The id leads to the log line, as for every other failure.
      expect(app().logs.find((line) => line['requestId'] === requestId)).to.include({ code: 'HEADERS_TOO_LARGE', status: 431, reason: 'HPE_HEADER_OVERFLOW' });
    });

    it('answers 400 MALFORMED_REQUEST, a problem document, to bytes that are not HTTP', async () => {
      for (const request of ['GET /healthz HTTP/1.1\r\nHost: x\r\nBad Header: 1\r\n\r\n', 'NOT HTTP AT ALL\r\n\r\n']) {
        const connection = await rawConnection(app().baseUrl);
        connection.socket.write(request);
        await connection.closed;
        const [head = '', body = ''] = connection.received().split('\r\n\r\n');
        expect(head, request).to.match(/^HTTP\/1\.1 400 Bad Request\r\n/);
        expect(head).to.match(/\r\ncontent-type: application\/problem\+json\r\n/i).and.to.match(/\r\nx-request-id: [0-9a-f-]{36}/i);
        expect(JSON.parse(body)).to.include({ status: 400, code: 'MALFORMED_REQUEST' });
      }
    });
  });

  describe('with short timeouts', () => {
    const app = useTestApp({
      store: embeddedHarness,
      serverLimits: { headersTimeoutMs: 400, requestTimeoutMs: 800, keepAliveTimeoutMs: 300, connectionsCheckingIntervalMs: 100 },
    });

    it('drops a client that trickles its headers, once headersTimeout has passed (408)', async () => {
      const connection = await rawConnection(app().baseUrl);
      connection.socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n');
      const trickle = setInterval(() => connection.socket.write('X-Slow: 1\r\n'), 100);
      const elapsed = await connection.closed;
      clearInterval(trickle);
      expect(elapsed).to.be.within(300, 1500);
      expect(connection.received()).to.match(/^HTTP\/1\.1 408/);
      const [head = '', body = ''] = connection.received().split('\r\n\r\n');
      expect(head).to.match(/\r\ncontent-type: application\/problem\+json\r\n/i);
      expect(JSON.parse(body)).to.include({ status: 408, code: 'REQUEST_TIMEOUT' });
    });

    it('drops a client that trickles its body, once requestTimeout has passed (408)', async () => {
      const connection = await rawConnection(app().baseUrl);
      connection.socket.write(
        `POST /v1/${app().instance}/createTable HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{`,
      );
      const trickle = setInterval(() => connection.socket.write(' '), 100);
      const elapsed = await connection.closed;
      clearInterval(trickle);
      expect(elapsed).to.be.within(700, 2500);
      const [head = '', body = ''] = connection.received().split('\r\n\r\n');
      expect(head).to.match(/^HTTP\/1\.1 408 /);
      // The request was read this far: its id and path are those of its problem.
      const problem = JSON.parse(body) as Record<string, unknown>;
      expect(problem).to.include({ status: 408, code: 'REQUEST_TIMEOUT', instance: `/v1/${app().instance}/createTable` });
      expect(head).to.contain(`\r\nX-Request-Id: ${String(problem['requestId'])}`);
    });

    it('closes an idle keep-alive connection after keepAliveTimeout', async () => {
      const connection = await rawConnection(app().baseUrl);
      connection.socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
      const elapsed = await connection.closed;
      expect(connection.received()).to.match(/^HTTP\/1\.1 200/);
      expect(elapsed).to.be.within(250, 1500);
    });
  });
});
