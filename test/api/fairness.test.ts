/**
 * One abusive caller cannot starve another: slow bodies, many requests at once and floods of
 * forged tokens from one caller leave the others served, with MAX_INFLIGHT small enough that a
 * shared pool would be exhausted. Attackers connect from other loopback addresses (127.0.0.x),
 * so anonymous callers are told apart as real clients would be. And the bound per caller is
 * work-conserving: one busy caller is not refused while the service has room.
 */
import { writeFileSync } from 'node:fs';
import { type Socket, connect } from 'node:net';
import { join } from 'node:path';
import { expect } from 'chai';
import { type KeyEntry, keysFile, newApiKey, tempDirectory } from '../support/access-files.ts';
import { type RawResponse, sendRaw } from '../support/raw-http.ts';
import { withOverrides } from '../support/store-faults.ts';
import { harness as embeddedHarness } from '../support/harnesses/embedded.ts';
import { loadConfig } from '../../src/config.ts';
import { TEST_AUDIENCE, TestIssuer } from '../support/test-issuer.ts';
import { type TestApp, useTestApp } from '../support/test-app.ts';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Opens a connection from `localAddress` and starts a request whose body trickles a byte every 100 ms, until stopped. */
async function slowBody(app: TestApp, localAddress: string, headers: string): Promise<{ stop: () => void; answer: Promise<string> }> {
  const { hostname, port } = new URL(app.baseUrl);
  const socket: Socket = connect({ port: Number(port), host: hostname, localAddress });
  let received = '';
  socket.on('data', (chunk: Buffer) => (received += chunk.toString('latin1')));
  socket.on('error', () => {});
  // The status line of the answer, once its headers are in (the connection may stay open).
  const answer = new Promise<string>((resolve) => {
    const check = () => {
      if (received.includes('\r\n\r\n')) resolve(received);
    };
    socket.on('data', check);
    socket.once('close', () => resolve(received));
  });
  await new Promise((resolve) => socket.once('connect', resolve));
  socket.write(
    `POST /v1/${app.instance}/createTable HTTP/1.1\r\nHost: x\r\n${headers}Content-Type: application/json\r\nContent-Length: 10000\r\n\r\n{`,
  );
  const trickle = setInterval(() => socket.write(' '), 100);
  socket.once('close', () => clearInterval(trickle));
  return {
    stop: () => {
      clearInterval(trickle);
      socket.destroy();
    },
    answer,
  };
}

/** Statuses of `count` reads one after the other, from `localAddress` with `headers`. */
async function reads(app: TestApp, count: number, localAddress: string, headers: ReadonlyArray<readonly [string, string]> = []): Promise<number[]> {
  const statuses: number[] = [];
  for (let i = 0; i < count; i++) {
    const response = await sendRaw(app.baseUrl, { method: 'GET', path: `/v1/${app.instance}/readCellData?tableName=absent&id=r`, headers, localAddress }, app.api);
    statuses.push(response.status);
  }
  return statuses;
}

async function shedCount(app: TestApp, limit: string, headers: Record<string, string> = {}): Promise<number> {
  const response = await app.api.get('/metrics', { headers });
  expect(response.status).to.equal(200);
  const text = response.body as string;
  return Number(new RegExp(`kvcrud_http_requests_shed_total\\{limit="${limit}"\\} (\\d+)`).exec(text)?.[1] ?? 0);
}

describe('fairness between callers (MAX_INFLIGHT 4)', () => {
  describe('anonymous callers (AUTH_MODE none), told apart by address', () => {
    // MAX_INFLIGHT_PER_CALLER's default: half of MAX_INFLIGHT.
    const app = useTestApp({ store: embeddedHarness, maxInflight: 4, maxInflightPerCaller: 2 });

    it('serves every request of one caller while another holds every slot it may take with slow bodies', async function () {
      this.timeout(30_000);
      const attack = await Promise.all(Array.from({ length: 4 }, () => slowBody(app(), '127.0.0.2', '')));
      try {
        await sleep(200); // the slow requests hold their slots now
        expect(await reads(app(), 20, '127.0.0.1')).to.deep.equal(Array(20).fill(404));
        // The attacker's third request took a slot nobody else was using; its fourth came with
        // the service near its limit (3 of 4 in flight) and was refused at once. The three
        // are cut off after the grace second, for arriving below MIN_BODY_BYTES_PER_SECOND.
        const answers = await Promise.all(attack.map((connection) => connection.answer));
        const statuses = answers.map((text) => /^HTTP\/1\.1 (\d{3})/.exec(text)?.[1]).sort();
        expect(statuses).to.deep.equal(['408', '408', '408', '429']);
      } finally {
        attack.forEach((connection) => connection.stop());
      }
      expect(await shedCount(app(), 'inflight_per_caller')).to.equal(1);
      expect(await shedCount(app(), 'body_rate')).to.equal(3);
    });

    it('answers 429 RATE_LIMITED to a caller over its own bound, and 503 OVERLOADED once the service is full', async function () {
      this.timeout(30_000);
      const held = [
        ...(await Promise.all([0, 1].map(() => slowBody(app(), '127.0.0.3', '')))),
        await slowBody(app(), '127.0.0.4', ''),
      ];
      try {
        await sleep(200);
        const third = await sendRaw(app().baseUrl, { method: 'GET', path: `/v1/${app().instance}/readCellData?tableName=t&id=r`, localAddress: '127.0.0.3' }, app().api);
        expect(third.status).to.equal(429);
        expect(third.body.code).to.equal('RATE_LIMITED');
        expect(third.headers.get('retry-after')).to.equal('1');
        held.push(await slowBody(app(), '127.0.0.4', ''));
        await sleep(200);
        const other: RawResponse = await sendRaw(app().baseUrl, { method: 'GET', path: `/v1/${app().instance}/readCellData?tableName=t&id=r`, localAddress: '127.0.0.5' }, app().api);
        expect(other.status).to.equal(503);
        expect(other.body.code).to.equal('OVERLOADED');
        // The probes are neither counted nor shed.
        expect((await app().api.get('/healthz')).status).to.equal(200);
        expect((await app().api.get('/readyz')).status).to.equal(200);
      } finally {
        held.forEach((connection) => connection.stop());
      }
    });
  });

  describe('anonymous callers behind a trusted proxy (TRUSTED_PROXIES 127.0.0.2)', () => {
    const app = useTestApp({ store: embeddedHarness, maxInflight: 4, maxInflightPerCaller: 2, trustedProxies: ['127.0.0.2'] });
    const behindProxy = (client: string): ReadonlyArray<readonly [string, string]> => [['x-forwarded-for', client]];

    it('tells the clients of the proxy apart by X-Forwarded-For, read from the right, and ignores it from anyone else', async function () {
      this.timeout(30_000);
      const attack = await Promise.all(Array.from({ length: 4 }, () => slowBody(app(), '127.0.0.2', 'X-Forwarded-For: 10.0.0.1\r\n')));
      try {
        await sleep(200);
        // Another client of the proxy is another caller, also when it names the attacker first:
        // the proxy appended the address it got the request from.
        expect(await reads(app(), 10, '127.0.0.2', behindProxy('10.0.0.2'))).to.deep.equal(Array(10).fill(404));
        expect(await reads(app(), 5, '127.0.0.2', behindProxy('10.0.0.1, 10.0.0.2'))).to.deep.equal(Array(5).fill(404));
        // A client that is not the proxy cannot pass for the attacker (nor for anyone else).
        expect(await reads(app(), 5, '127.0.0.3', behindProxy('10.0.0.1'))).to.deep.equal(Array(5).fill(404));
        const answers = await Promise.all(attack.map((connection) => connection.answer));
        expect(answers.map((text) => /^HTTP\/1\.1 (\d{3})/.exec(text)?.[1]).sort()).to.deep.equal(['408', '408', '408', '429']);
      } finally {
        attack.forEach((connection) => connection.stop());
      }
    });
  });

  describe('callers with API keys, told apart by key', () => {
    const files = tempDirectory();
    const abuser: KeyEntry = { name: 'abuser', key: newApiKey(), role: 'admin', instances: ['*'] };
    const victim: KeyEntry = { name: 'victim', key: newApiKey(), role: 'reader', instances: ['*'] };
    const app = useTestApp({
      store: embeddedHarness,
      maxInflight: 4,
      maxInflightPerCaller: 2,
      auth: () => {
        const apiKeysFile = join(files.path, 'keys.json');
        writeFileSync(apiKeysFile, keysFile([abuser, victim]));
        return { config: { modes: ['apikey'], apiKeysFile, protectDocs: false } };
      },
    });
    after(() => files.remove());

    it('serves every request of one key while another, from the same address, holds four slow bodies', async function () {
      this.timeout(30_000);
      const attack = await Promise.all(Array.from({ length: 4 }, () => slowBody(app(), '127.0.0.1', `X-API-Key: ${abuser.key}\r\n`)));
      try {
        await sleep(200);
        expect(await reads(app(), 20, '127.0.0.1', [['x-api-key', victim.key]])).to.deep.equal(Array(20).fill(404));
      } finally {
        attack.forEach((connection) => connection.stop());
      }
    });
  });

  describe('a flood of forged tokens (AUTH_MODE oidc)', () => {
    const SUBJECT = 'system:serviceaccount:shop:orders';
    let issuer: TestIssuer;
    before(async () => {
      issuer = await TestIssuer.start();
    });
    after(async () => {
      await issuer?.close();
    });
    const files = tempDirectory();
    after(() => files.remove());
    const app = useTestApp({
      store: embeddedHarness,
      maxInflight: 4,
      maxInflightPerCaller: 2,
      auth: () => {
        const grantsFile = join(files.path, 'grants.json');
        writeFileSync(grantsFile, JSON.stringify({ grants: [{ subject: SUBJECT, role: 'reader', instances: ['*'] }] }));
        return {
          config: { modes: ['oidc'], protectDocs: false, oidc: { issuer: issuer.issuer, audiences: [TEST_AUDIENCE], grantsFile } },
          oidcTiming: { clockToleranceSeconds: 30, cooldownMs: 0, refreshMs: 600_000, fetchTimeoutMs: 5000, retryAfterFailureMs: 0 },
        };
      },
    });

    it('leaves callers with valid tokens served, known and new ones, while one client floods bad signatures', async function () {
      this.timeout(60_000);
      const known = await issuer.sign(SUBJECT);
      expect(await reads(app(), 1, '127.0.0.1', [['authorization', `Bearer ${known}`]])).to.deep.equal([404]);
      // Signed with another key under the issuer's own kid: each costs a full signature check.
      const forged = await Promise.all(Array.from({ length: 16 }, (_, i) => issuer.sign(`attacker-${i}`, { strangerKid: 'rsa-1' })));
      let flooding = true;
      const floodStatuses: number[] = [];
      const flood = Array.from({ length: 32 }, async (_, lane) => {
        for (let i = lane; flooding; i += 32) {
          // Only verified tokens are remembered: each of these costs a signature check every time.
          const token = forged[i % forged.length] ?? '';
          const response = await sendRaw(app().baseUrl, {
            method: 'GET',
            path: `/v1/${app().instance}/readCellData?tableName=absent&id=r`,
            headers: [['authorization', `Bearer ${token}`]],
            localAddress: '127.0.0.9',
          });
          floodStatuses.push(response.status);
        }
      });
      try {
        await sleep(300);
        const knownStatuses = await reads(app(), 20, '127.0.0.1', [['authorization', `Bearer ${known}`]]);
        expect(knownStatuses).to.deep.equal(Array(20).fill(404));
        // A caller whose token the service has not seen yet, from another address, is checked too.
        const fresh = await issuer.sign(SUBJECT, { claims: { jti: 'fresh' } });
        expect(await reads(app(), 1, '127.0.0.2', [['authorization', `Bearer ${fresh}`]])).to.deep.equal([404]);
      } finally {
        flooding = false;
        await Promise.all(flood);
      }
      expect(floodStatuses.length).to.be.above(32);
      expect(new Set(floodStatuses)).to.satisfy((statuses: Set<number>) => [...statuses].every((status) => status === 401 || status === 503));
      // Forged tokens never took a slot of the callers (MAX_INFLIGHT).
      expect(await shedCount(app(), 'inflight', { authorization: `Bearer ${known}` })).to.equal(0);
    });

    it('checks at most a quarter of MAX_INFLIGHT_UNAUTHENTICATED new tokens from one address at once', async function () {
      this.timeout(30_000);
      // Tokens naming a key the issuer does not publish make the service fetch its keys again
      // (no cooldown here), and the issuer takes a second to answer: each check holds its place.
      issuer.delayMs = 1000;
      try {
        const tokens = await Promise.all(Array.from({ length: 8 }, (_, i) => issuer.sign(SUBJECT, { strangerKid: `unknown-${i}` })));
        const scraper = { authorization: `Bearer ${await issuer.sign(SUBJECT)}` };
        const before = await shedCount(app(), 'credential_checks', scraper);
        const answers = await Promise.all(
          tokens.map((token) =>
            sendRaw(app().baseUrl, { method: 'GET', path: `/v1/${app().instance}/readCellData?tableName=t&id=r`, headers: [['authorization', `Bearer ${token}`]], localAddress: '127.0.0.7' }, app().api),
          ),
        );
        // MAX_INFLIGHT_UNAUTHENTICATED is 16 by default: 4 at once per address.
        expect(answers.map((answer) => answer.status).sort()).to.deep.equal([401, 401, 401, 401, 503, 503, 503, 503]);
        expect(answers.filter((answer) => answer.status === 503).every((answer) => answer.body.code === 'OVERLOADED')).to.equal(true);
        expect((await shedCount(app(), 'credential_checks', scraper)) - before).to.equal(4);
      } finally {
        issuer.delayMs = 0;
      }
    });
  });
});

describe('one busy client, with the default bounds', () => {
  const defaults = loadConfig({ DATA_STORE: 'embedded' });
  const CONCURRENT = 200;
  // The embedded store answers a write faster than 200 requests arrive, so they would never all be
  // in flight at once; a backend with real latency cannot be had here. Each write waits until all
  // 200 have reached the store (or 10 s have passed), so the bound is tested at 200 in flight.
  let arrived = 0;
  let release: () => void = () => {};
  const allArrived = new Promise<void>((resolve) => (release = resolve));
  const app = useTestApp({
    store: embeddedHarness,
    maxInflight: defaults.maxInflight,
    maxInflightPerCaller: defaults.maxInflightPerCaller,
    wrapStore: (store) =>
      withOverrides(store, {
        mutateRow: async (...args) => {
          arrived += 1;
          if (arrived === CONCURRENT) release();
          await Promise.race([allArrived, sleep(10_000)]);
          return store.mutateRow(...args);
        },
      }),
  });

  it('answers every one of 200 concurrent small writes from one address: the service has room', async function () {
    this.timeout(60_000);
    expect([defaults.maxInflight, defaults.maxInflightPerCaller]).to.deep.equal([256, 128]);
    const tables = `/v2/stores/${app().storeName}/instances/${app().instance}/tables`;
    expect((await app().api.post(tables, { name: 'busy', families: [{ name: 'cf' }] })).status).to.equal(201);
    const body = (index: number) => new TextEncoder().encode(JSON.stringify({ cells: [{ family: 'cf', column: 'c', value: String(index) }] }));
    const answers = await Promise.all(
      Array.from({ length: CONCURRENT }, (_, index) =>
        sendRaw(app().baseUrl, { method: 'PUT', path: `${tables}/busy/rows/r${index}`, headers: [['content-type', 'application/json']], body: body(index), localAddress: '127.0.0.1' }),
      ),
    );
    const statuses = answers.map((answer) => answer.status);
    expect(statuses.filter((status) => status !== 200), 'statuses other than 200').to.deep.equal([]);
    expect(arrived, 'writes that reached the store').to.equal(CONCURRENT);
    expect(await shedCount(app(), 'inflight_per_caller')).to.equal(0);
  });
});
