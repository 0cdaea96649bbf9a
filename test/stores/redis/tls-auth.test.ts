import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { type Logger, pino } from 'pino';
import { isStoreError } from '../../../src/store/errors.ts';
import { RedisStore } from '../../../src/store/redis/redis-store.ts';
import type { CallOptions } from '../../../src/store/store.ts';
import { createLogger } from '../../../src/telemetry/logger.ts';
import { closedPort } from '../../support/fake-backends.ts';
import { type RedisServer, requireRedis, spawnRedis } from '../../support/redis-server.ts';

const run = promisify(execFile);
const silent = pino({ level: 'silent' });
const call = (): CallOptions => ({ deadline: Date.now() + 5000 });
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const t = { instance: 'inst', table: 't' };

/** A CA of the test's own, and a server certificate it signed for 127.0.0.1, as Memorystore's in-transit encryption has. */
async function certificates(dir: string): Promise<{ ca: string; cert: string; key: string }> {
  const file = (name: string) => join(dir, name);
  const openssl = (...args: string[]) => run('openssl', args);
  await openssl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '1', '-subj', '/CN=kvcrud test CA', '-keyout', file('ca.key'), '-out', file('ca.pem'));
  await openssl('req', '-newkey', 'rsa:2048', '-nodes', '-subj', '/CN=127.0.0.1', '-keyout', file('server.key'), '-out', file('server.csr'));
  writeFileSync(file('san.ext'), 'subjectAltName=IP:127.0.0.1\n');
  await openssl('x509', '-req', '-in', file('server.csr'), '-CA', file('ca.pem'), '-CAkey', file('ca.key'), '-CAcreateserial', '-days', '1', '-extfile', file('san.ext'), '-out', file('server.pem'));
  return { ca: file('ca.pem'), cert: file('server.pem'), key: file('server.key') };
}

describe('redis store: TLS with a CA file and an AUTH string from a file (Memorystore in-transit encryption and AUTH)', () => {
  let dir: string;
  let server: RedisServer;
  let url: string;
  let ca: string;
  const stores: RedisStore[] = [];
  const open = (options: { caFile?: string; authStringFile?: string; logger?: Logger }) => {
    const store = RedisStore.open({ url, instances: ['inst'], logger: silent, ...options });
    stores.push(store);
    return store;
  };

  before(async function () {
    this.timeout(60_000);
    requireRedis(this);
    if (!existsSync('/usr/bin/openssl')) {
      if (process.env['CI'] === 'true') throw new Error('CI=true but openssl is not installed (scripts/install-redis.sh installs it)');
      process.stderr.write('\n  !!! No openssl: THE REDIS TLS TESTS ARE SKIPPED. Run scripts/install-redis.sh.\n\n');
      this.skip();
    }
    dir = mkdtempSync(join(tmpdir(), 'kvcrud-redis-tls-'));
    const files = await certificates(dir);
    ca = files.ca;
    const port = await closedPort();
    // TLS only (no plain port), clients not asked for certificates, and an AUTH string.
    server = await spawnRedis({
      port,
      args: ['--port', '0', '--tls-port', String(port), '--tls-cert-file', files.cert, '--tls-key-file', files.key, '--tls-ca-cert-file', files.ca, '--tls-auth-clients', 'no', '--requirepass', 'the-auth-string'],
    });
    url = `rediss://127.0.0.1:${port}`;
  });
  after(async () => {
    await Promise.all(stores.map((store) => store.close()));
    await server?.stop();
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  });

  it('serves over TLS, trusting the CA of caFile, authenticated by the AUTH string of authStringFile', async () => {
    const authStringFile = join(dir, 'auth');
    writeFileSync(authStringFile, 'the-auth-string\n');
    const store = open({ caFile: ca, authStringFile });
    await store.createTable(t, [{ name: 'cf' }], call());
    await store.mutateRow(t, Buffer.from('k'), [{ type: 'set', family: 'cf', column: Buffer.from('c'), value: Buffer.from('over TLS'), timestampMicros: 1n }], call());
    const [row] = await store.readRows(t, [Buffer.from('k')], { versions: 1 }, call());
    expect(row?.cells[0]?.value.toString()).to.equal('over TLS');
  });

  it('refuses a server whose certificate its CA did not sign: UNAVAILABLE, nothing sent', async () => {
    const authStringFile = join(dir, 'auth-untrusted');
    writeFileSync(authStringFile, 'the-auth-string\n');
    const store = open({ authStringFile });
    await sleep(300);
    const error = await store.listTables('inst', call()).catch((caught: unknown) => caught);
    expect(isStoreError(error, 'UNAVAILABLE')).to.equal(true);
  });

  it('answers UNAVAILABLE with a wrong AUTH string, logging WRONGPASS and not the string, and picks up the right one written to the file without a restart', async function () {
    this.timeout(20_000);
    const authStringFile = join(dir, 'auth-rotated');
    writeFileSync(authStringFile, 'an-old-auth-string\n');
    // The service's own logger, so that its serializer of errors is the one under test.
    const lines: string[] = [];
    const store = open({ caFile: ca, authStringFile, logger: createLogger('info', { write: (line: string) => void lines.push(line) }) });
    await sleep(300);
    const refused = await store.listTables('inst', call()).catch((caught: unknown) => caught);
    expect(isStoreError(refused, 'UNAVAILABLE')).to.equal(true);
    const logged = lines.map((line) => JSON.parse(line) as { event?: string; err?: { message?: string } }).find((line) => line.event === 'redis.error');
    expect(logged?.err?.message).to.match(/^WRONGPASS /);
    expect(lines.join('\n')).to.not.include('auth-string');
    // The file is read again on every connection attempt, as a rotated Secret is remounted.
    writeFileSync(authStringFile, 'the-auth-string\n');
    const started = Date.now();
    for (;;) {
      const outcome = await store.listTables('inst', call()).catch((caught: unknown) => caught);
      if (Array.isArray(outcome)) break;
      if (Date.now() - started > 10_000) expect.fail(`still ${String(outcome)} 10 s after the AUTH string was rotated`);
      await sleep(100);
    }
  });
});
