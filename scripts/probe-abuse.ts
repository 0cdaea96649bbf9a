/**
 * npm run probe:abuse [-- --dist DIR] [--items 1,2,...]
 *
 * Attacks the built service (node dist/index.js, embedded store in a temporary directory) as an
 * outside caller would, one class of abuse at a time, and prints one figure per class: latency,
 * body size, RSS, status codes or the success ratio of an honest caller. Each class gets a fresh
 * service process with the configuration the attack needs (MAX_INFLIGHT=4, AUTH_MODE apikey or
 * oidc with a local issuer, ...).
 *
 * --dist points at another build (e.g. a checkout of an older commit after `npm run build`), so
 * the same attacks can be run before and after a change.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { Agent, type IncomingHttpHeaders, type Server, createServer, request as httpRequest } from 'node:http';
import { type AddressInfo, connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { parseArgs } from 'node:util';
import { gzipSync } from 'node:zlib';
import { type CryptoKey, SignJWT, exportJWK, generateKeyPair } from 'jose';

const { values } = parseArgs({
  options: {
    dist: { type: 'string', default: new URL('../dist', import.meta.url).pathname },
    items: { type: 'string', default: '1,2,3,4,5,6,7,8,9,10,11' },
  },
});
const DIST = resolve(values.dist);
const ITEMS = new Set(values.items.split(',').map((item) => Number(item.trim())));

const sleep = (ms: number) => new Promise((done) => setTimeout(done, ms));
const median = (numbers: number[]) => [...numbers].sort((a, b) => a - b)[Math.floor(numbers.length / 2)] ?? NaN;
const kib = (bytes: number) => `${(bytes / 1024).toFixed(1)} KiB`;

// --- the service --------------------------------------------------------------------------------

interface Service {
  readonly url: string;
  readonly pid: number;
  readonly dir: string;
  stop(): Promise<void>;
}

async function startService(env: Record<string, string> = {}): Promise<Service> {
  const dir = mkdtempSync(join(tmpdir(), 'kvcrud-probe-'));
  const child: ChildProcess = spawn(process.execPath, [join(DIST, 'index.js')], {
    env: { PATH: process.env['PATH'] ?? '', HOME: dir, PORT: '0', DATA_DIR: join(dir, 'data'), LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const output: string[] = [];
  const port = await new Promise<number>((ready, fail) => {
    for (const stream of [child.stdout, child.stderr]) {
      if (stream === null) continue;
      createInterface({ input: stream }).on('line', (line) => {
        if (output.length < 50) output.push(line);
        const match = /"port":(\d+)/.exec(line);
        if (match?.[1] !== undefined && line.includes('listening')) ready(Number(match[1]));
      });
    }
    child.once('exit', (code) => fail(new Error(`the service exited (${code}) before listening:\n${output.join('\n')}`)));
  });
  return {
    url: `http://127.0.0.1:${port}`,
    pid: child.pid ?? 0,
    dir,
    async stop() {
      child.kill('SIGKILL');
      await new Promise((done) => child.once('exit', done));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Runs `probe` against a fresh service with `env`, and stops it whatever happens. */
async function withService<T>(env: Record<string, string>, probe: (service: Service) => Promise<T>): Promise<T> {
  const service = await startService(env);
  try {
    // Warm up: the first answers of a fresh process are slow while code is compiled.
    for (let i = 0; i < 20; i++) await send(service.url, { path: '/healthz' });
    return await probe(service);
  } finally {
    await service.stop();
  }
}

function memoryKiB(pid: number, field: 'VmRSS' | 'VmHWM'): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(new RegExp(`${field}:\\s+(\\d+)`).exec(status)?.[1] ?? NaN);
}

// --- HTTP ---------------------------------------------------------------------------------------

interface Answer {
  readonly status: number;
  readonly headers: IncomingHttpHeaders;
  readonly body: Buffer;
  readonly ms: number;
}

/** One request with node:http: headers may repeat, the path is sent as it is. */
function send(
  url: string,
  options: { method?: string; path: string; headers?: ReadonlyArray<readonly [string, string]>; body?: Uint8Array; localAddress?: string; agent?: Agent },
): Promise<Answer> {
  const { hostname, port } = new URL(url);
  const headers: Record<string, string[]> = {};
  for (const [name, value] of options.headers ?? []) (headers[name.toLowerCase()] ??= []).push(value);
  if (options.body !== undefined) headers['content-length'] ??= [String(options.body.length)];
  const started = performance.now();
  return new Promise((done, fail) => {
    const request = httpRequest(
      {
        host: hostname,
        port,
        method: options.method ?? 'GET',
        path: options.path,
        headers,
        agent: options.agent ?? false,
        ...(options.localAddress ? { localAddress: options.localAddress } : {}),
      },
      (response) => {
        const chunks: Buffer[] = [];
        response.on('data', (chunk: Buffer) => chunks.push(chunk));
        response.on('end', () => done({ status: response.statusCode ?? 0, headers: response.headers, body: Buffer.concat(chunks), ms: performance.now() - started }));
        response.on('error', fail);
      },
    );
    request.on('error', fail);
    request.end(options.body === undefined ? undefined : Buffer.from(options.body));
  });
}

const json = (body: unknown) => Buffer.from(JSON.stringify(body));
const JSON_TYPE = ['content-type', 'application/json'] as const;

/** The slowest /healthz answer while `work` runs (asked every 10 ms), and what `work` returned. */
async function healthzDuring<T>(url: string, work: () => Promise<T>): Promise<{ result: T; worstMs: number }> {
  let done = false;
  let worstMs = 0;
  const probe = (async () => {
    while (!done) {
      const started = performance.now();
      await send(url, { path: '/healthz' });
      worstMs = Math.max(worstMs, performance.now() - started);
      await sleep(10);
    }
  })();
  await sleep(20);
  const result = await work();
  done = true;
  await probe;
  return { result, worstMs };
}

async function createTable(url: string, headers: ReadonlyArray<readonly [string, string]> = []): Promise<void> {
  const answer = await send(url, { method: 'POST', path: '/v1/local/createTable', headers: [JSON_TYPE, ...headers], body: json({ tableName: 't', columnFamily: 'cf' }) });
  if (answer.status !== 201) throw new Error(`createTable answered ${answer.status}: ${answer.body.toString()}`);
}

/** A request whose body trickles a byte every 200 ms until the connection closes; resolves with the status line. */
async function slowBody(url: string, headers: string, stop: Promise<void>): Promise<string> {
  const { hostname, port } = new URL(url);
  const socket = connect(Number(port), hostname);
  let received = '';
  socket.on('data', (chunk: Buffer) => (received += chunk.toString('latin1')));
  socket.on('error', () => {});
  await new Promise((done) => socket.once('connect', done));
  socket.write(`POST /v1/local/createTable HTTP/1.1\r\nHost: x\r\n${headers}Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n{`);
  const trickle = setInterval(() => socket.write(' '), 200);
  await Promise.race([stop, new Promise((done) => socket.once('close', done))]);
  clearInterval(trickle);
  socket.destroy();
  return received.split('\r\n')[0] ?? '';
}

// --- credentials --------------------------------------------------------------------------------

function keysFile(dir: string, keys: Record<string, { key: string; instances: string[] }>): string {
  const path = join(dir, 'keys.json');
  const entries = Object.entries(keys).map(([name, { key, instances }]) => ({
    name,
    sha256: createHash('sha256').update(key).digest('hex'),
    role: 'admin',
    instances,
  }));
  writeFileSync(path, JSON.stringify({ keys: entries }));
  return path;
}

/** A local OpenID provider: discovery and JWKS over HTTP, signing RS256 tokens. */
async function startIssuer(): Promise<{ issuer: string; sign: (claims: Record<string, unknown>, forged?: boolean) => Promise<string>; close: () => Promise<void> }> {
  const { privateKey, publicKey } = await generateKeyPair('RS256', { extractable: true });
  const stranger: CryptoKey = (await generateKeyPair('RS256')).privateKey;
  const jwk = { ...(await exportJWK(publicKey)), kid: 'k1', alg: 'RS256', use: 'sig' };
  const server: Server = createServer((request, response) => {
    const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    if (request.url === '/.well-known/openid-configuration') {
      response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ issuer, jwks_uri: `${issuer}/keys` }));
    } else if (request.url === '/keys') {
      response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ keys: [jwk] }));
    } else {
      response.writeHead(404).end();
    }
  });
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    issuer,
    sign: (claims, forged = false) => {
      const now = Math.floor(Date.now() / 1000);
      return new SignJWT({ iss: issuer, aud: 'kvcrud', iat: now, exp: now + 600, ...claims })
        .setProtectedHeader({ alg: 'RS256', kid: 'k1', typ: 'JWT' })
        .sign(forged ? stranger : privateKey);
    },
    close: () => new Promise((done) => server.close(() => done())),
  };
}

function oidcEnv(dir: string, issuer: string, subject: string): Record<string, string> {
  const grants = join(dir, 'grants.json');
  writeFileSync(grants, JSON.stringify({ grants: [{ subject, role: 'admin', instances: ['*'] }] }));
  return { AUTH_MODE: 'oidc', AUTH_OIDC_ISSUER: issuer, AUTH_OIDC_AUDIENCE: 'kvcrud', AUTH_OIDC_GRANTS_FILE: grants };
}

// --- the probes ---------------------------------------------------------------------------------

type Figure = [item: number, what: string, value: string];
const figures: Figure[] = [];
function report(item: number, what: string, value: string): void {
  figures.push([item, what, value]);
  process.stdout.write(`${String(item).padStart(2)}  ${what}: ${value}\n`);
}

const probes: Record<number, () => Promise<void>> = {
  1: async () => {
    // A 60 KB query: one parameter repeated 12,000 times.
    await withService({}, async ({ url }) => {
      const path = `/v1/local/readCellData?tableName=t${'&id=x'.repeat(12_000)}`;
      const baseline = await healthzDuring(url, () => sleep(300));
      const runs = [];
      for (let i = 0; i < 3; i++) runs.push(await healthzDuring(url, () => send(url, { path })));
      report(1, 'status of a 60 KB query repeating one parameter', String(runs[0]?.result.status));
      report(1, 'its answer time (median of 3)', `${median(runs.map((run) => run.result.ms)).toFixed(0)} ms`);
      report(1, '/healthz worst latency meanwhile (median of 3)', `${median(runs.map((run) => run.worstMs)).toFixed(0)} ms (idle: ${baseline.worstMs.toFixed(0)} ms)`);
    });
  },
  2: async () => {
    const invalidCells = (count: number) => Buffer.from(`{"tableName":"t","rowKeyId":"r","data":[${Array(count).fill('{}').join(',')}]}`);
    await withService({}, async ({ url }) => {
      await createTable(url);
      const body = invalidCells(40_000);
      const { result: answer, worstMs } = await healthzDuring(url, () => send(url, { method: 'POST', path: '/v1/local/insertData', headers: [JSON_TYPE], body }));
      report(2, `40,000 invalid cells (${kib(body.length)}): status, problem size, time`, `${answer.status}, ${kib(answer.body.length)}, ${answer.ms.toFixed(0)} ms`);
      report(2, '/healthz worst latency meanwhile', `${worstMs.toFixed(0)} ms`);
      const crash = await send(url, { method: 'POST', path: '/v1/local/insertData', headers: [JSON_TYPE], body: invalidCells(50_000) });
      report(2, '50,000 invalid cells: status and code', `${crash.status} ${String((JSON.parse(crash.body.toString()) as { code?: string }).code)}`);
      const unknown = await send(url, { path: `/v1/local/readCellData?tableName=t&id=r${Array.from({ length: 6000 }, (_, i) => `&u${i}=1`).join('')}` });
      report(2, '6,000 unknown query parameters: status, problem size', `${unknown.status}, ${kib(unknown.body.length)}`);
    });
    await withService({}, async ({ url, pid }) => {
      await createTable(url);
      const before = memoryKiB(pid, 'VmRSS');
      const body = invalidCells(40_000);
      const answers = await Promise.all(Array.from({ length: 16 }, () => send(url, { method: 'POST', path: '/v1/local/insertData', headers: [JSON_TYPE], body })));
      report(2, '16 such requests at once: RSS before -> peak', `${(before / 1024).toFixed(0)} -> ${(memoryKiB(pid, 'VmHWM') / 1024).toFixed(0)} MiB (statuses ${[...new Set(answers.map((a) => a.status))].join(',')})`);
    });
  },
  3: async () => {
    await withService({}, async ({ url }) => {
      await createTable(url);
      const write = (byte: number, value: string) =>
        send(url, {
          method: 'POST',
          path: '/v1/local/insertData',
          headers: [JSON_TYPE],
          body: Buffer.concat([Buffer.from('{"tableName":"t","rowKeyId":"k'), Buffer.from([byte]), Buffer.from(`","data":[{"columnFamily":"cf","columnName":"c","columnValue":"${value}"}]}`)]),
        });
      const first = await write(0xff, 'from-caller-1');
      const second = await write(0xfe, 'from-caller-2');
      const read = await send(url, { path: '/v1/local/readCellData?tableName=t&id=k%EF%BF%BD' });
      const value = read.status === 200 ? (JSON.parse(read.body.toString()) as { data: Array<{ columnValue: string }> }).data[0]?.columnValue : '-';
      report(3, 'row keys k\\xff and k\\xfe: write statuses', `${first.status}, ${second.status}`);
      report(3, 'row k\\uFFFD afterwards: status (value)', `${read.status} (${value ?? '-'})`);
    });
  },
  4: async () => {
    await withService({}, async ({ url }) => {
      await createTable(url);
      const plain = json({ tableName: 't', rowKeyId: 'r', data: [{ columnFamily: 'cf', columnName: 'c', columnValue: 'v' }] });
      const cases: Array<[string, string, Buffer]> = [
        ['plain JSON as gzip', 'gzip', plain],
        ['plain JSON as deflate', 'deflate', plain],
        ['truncated gzip', 'gzip', gzipSync(plain).subarray(0, 20)],
      ];
      const statuses = [];
      for (const [, coding, body] of cases) {
        const answer = await send(url, { method: 'POST', path: '/v1/local/insertData', headers: [JSON_TYPE, ['content-encoding', coding]], body });
        statuses.push(`${answer.status} ${String((JSON.parse(answer.body.toString()) as { code?: string }).code)}`);
      }
      report(4, `statuses for ${cases.map(([name]) => name).join(' / ')}`, statuses.join(' / '));
    });
  },
  5: async () => {
    // MAX_INFLIGHT=4; one key holds 4 trickling bodies, another reads.
    const abuser = randomBytes(24).toString('base64url');
    const victim = randomBytes(24).toString('base64url');
    const dir = mkdtempSync(join(tmpdir(), 'kvcrud-probe-keys-'));
    try {
      const env = { MAX_INFLIGHT: '4', AUTH_MODE: 'apikey', AUTH_API_KEYS_FILE: keysFile(dir, { abuser: { key: abuser, instances: ['*'] }, victim: { key: victim, instances: ['*'] } }) };
      await withService(env, async ({ url }) => {
        let release = () => {};
        const stop = new Promise<void>((done) => (release = done));
        const attack = Array.from({ length: 4 }, () => slowBody(url, `X-API-Key: ${abuser}\r\n`, stop));
        await sleep(300);
        const statuses: number[] = [];
        const until = performance.now() + 5000;
        while (performance.now() < until) {
          statuses.push((await send(url, { path: '/v1/local/readCellData?tableName=absent&id=r', headers: [['x-api-key', victim]] })).status);
          await sleep(100);
        }
        release();
        const lines = await Promise.all(attack);
        const served = statuses.filter((status) => status === 404).length;
        report(5, 'another caller during 5 s of 4 slow bodies (MAX_INFLIGHT=4): served', `${served}/${statuses.length} (${[...new Set(statuses)].join(',')})`);
        report(5, 'what the slow bodies got', lines.map((line) => line.replace('HTTP/1.1 ', '') || '(no answer)').join(' / '));
      });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  },
  6: async () => {
    const issuer = await startIssuer();
    const dir = mkdtempSync(join(tmpdir(), 'kvcrud-probe-oidc-'));
    try {
      const env = { MAX_INFLIGHT: '4', ...oidcEnv(dir, issuer.issuer, 'victim') };
      await withService(env, async ({ url }) => {
        const valid = await issuer.sign({ sub: 'victim' });
        await send(url, { path: '/v1/local/readCellData?tableName=absent&id=r', headers: [['authorization', `Bearer ${valid}`]] });
        const forged = await Promise.all(Array.from({ length: 16 }, (_, i) => issuer.sign({ sub: `forger-${i}` }, true)));
        // 64 keep-alive connections from one client, each sending its next forged token at once.
        const agent = new Agent({ keepAlive: true, maxSockets: 64, localAddress: '127.0.0.9' });
        let flooding = true;
        const flood = Array.from({ length: 64 }, async (_, lane) => {
          for (let i = lane; flooding; i += 64) {
            await send(url, { path: '/v1/local/readCellData?tableName=absent&id=r', headers: [['authorization', `Bearer ${forged[i % 16] ?? ''}`]], agent }).catch(() => {});
          }
        });
        await sleep(500);
        const statuses: number[] = [];
        for (let i = 0; i < 30; i++) {
          statuses.push((await send(url, { path: '/v1/local/readCellData?tableName=absent&id=r', headers: [['authorization', `Bearer ${valid}`]] })).status);
        }
        flooding = false;
        await Promise.all(flood);
        agent.destroy();
        const served = statuses.filter((status) => status === 404).length;
        report(6, 'a valid token during a flood of forged ones (MAX_INFLIGHT=4): served', `${served}/${statuses.length} (${[...new Set(statuses)].join(',')})`);
      });
    } finally {
      await issuer.close();
      rmSync(dir, { recursive: true, force: true });
    }
  },
  7: async () => {
    const good = randomBytes(24).toString('base64url');
    const dir = mkdtempSync(join(tmpdir(), 'kvcrud-probe-keys-'));
    try {
      await withService({ AUTH_MODE: 'apikey', AUTH_API_KEYS_FILE: keysFile(dir, { ops: { key: good, instances: ['*'] } }) }, async ({ url }) => {
        const bad = randomBytes(24).toString('base64url');
        const path = '/v1/local/readCellData?tableName=absent&id=r';
        const goodFirst = await send(url, { path, headers: [['authorization', `Bearer ${good}`], ['authorization', `Bearer ${bad}`]] });
        const badFirst = await send(url, { path, headers: [['authorization', `Bearer ${bad}`], ['authorization', `Bearer ${good}`]] });
        report(7, 'two Authorization headers, good-then-bad / bad-then-good', `${goodFirst.status} / ${badFirst.status}`);
      });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  },
  8: async () => {
    const issuer = await startIssuer();
    const dir = mkdtempSync(join(tmpdir(), 'kvcrud-probe-oidc-'));
    try {
      await withService(oidcEnv(dir, issuer.issuer, 'big'), async ({ url }) => {
        let padding = 12_000;
        let token = await issuer.sign({ sub: 'big', groups: 'g'.repeat(padding) });
        while (token.length > 16 * 1024) {
          padding -= 100;
          token = await issuer.sign({ sub: 'big', groups: 'g'.repeat(padding) });
        }
        const answer = await send(url, { path: '/v1/local/readCellData?tableName=absent&id=r', headers: [['authorization', `Bearer ${token}`]] });
        report(8, `a valid token of ${kib(token.length)}: status`, `${answer.status} ${String((JSON.parse(answer.body.toString()) as { code?: string }).code)}`);
      });
    } finally {
      await issuer.close();
      rmSync(dir, { recursive: true, force: true });
    }
  },
  9: async () => {
    const key = randomBytes(24).toString('base64url');
    const dir = mkdtempSync(join(tmpdir(), 'kvcrud-probe-keys-'));
    const served = ['alpha', 'beta', 'gamma'];
    const named = (body: Buffer) => served.filter((instance) => body.toString().includes(`\`${instance}\``) || body.toString().includes(`"${instance}"`));
    try {
      const keys = keysFile(dir, { one: { key, instances: ['alpha'] } });
      await withService({ AUTH_MODE: 'apikey', AUTH_API_KEYS_FILE: keys, INSTANCE_IDS: served.join(',') }, async ({ url }) => {
        const open = await send(url, { path: '/openapi.json' });
        report(9, '/openapi.json without a credential (docs open): instances named', named(open.body).join(',') || 'none');
      });
      await withService({ AUTH_MODE: 'apikey', AUTH_API_KEYS_FILE: keys, INSTANCE_IDS: served.join(','), AUTH_PROTECT_DOCS: 'true' }, async ({ url }) => {
        const granted = await send(url, { path: '/openapi.json', headers: [['x-api-key', key]] });
        report(9, '/openapi.json to a caller granted alpha only (AUTH_PROTECT_DOCS): instances named', named(granted.body).join(',') || 'none');
      });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  },
  10: async () => {
    const key = randomBytes(24).toString('base64url');
    const dir = mkdtempSync(join(tmpdir(), 'kvcrud-probe-keys-'));
    try {
      const env = { AUTH_MODE: 'apikey', AUTH_API_KEYS_FILE: keysFile(dir, { ops: { key, instances: ['*'] } }), AUTH_PROTECT_DOCS: 'true' };
      await withService(env, async ({ url }) => {
        const anonymous = await send(url, { path: '/metrics' });
        const withKey = await send(url, { path: '/metrics', headers: [['x-api-key', key]] });
        report(10, '/metrics on the API port with auth on: without / with a credential', `${anonymous.status} (${kib(anonymous.body.length)}) / ${withKey.status}`);
      });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  },
  11: async () => {
    const key = randomBytes(24).toString('base64url');
    const dir = mkdtempSync(join(tmpdir(), 'kvcrud-probe-keys-'));
    try {
      const path = keysFile(dir, { ops: { key, instances: ['*'] } });
      await withService({ AUTH_MODE: 'apikey', AUTH_API_KEYS_FILE: path }, async ({ url }) => {
        // An edit with a trailing comma: it never loads.
        writeFileSync(path, `${readFileSync(path, 'utf8')},`);
        await sleep(5000);
        const metrics = (await send(url, { path: '/metrics', headers: [['x-api-key', key]] })).body.toString();
        const failures = /kvcrud_access_file_failures_total\{file="AUTH_API_KEYS_FILE",reason="invalid"\} (\d+)/.exec(metrics)?.[1];
        const last = /kvcrud_access_file_last_success_timestamp_seconds\{file="AUTH_API_KEYS_FILE"\} ([\d.e+]+)/.exec(metrics)?.[1];
        report(
          11,
          '5 s after a keys-file edit that fails to load: what /metrics shows',
          failures === undefined ? 'nothing (no metric)' : `${failures} failed reads; last valid read ${(Date.now() / 1000 - Number(last)).toFixed(0)} s ago`,
        );
      });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  },
};

process.stdout.write(`kvcrud abuse probe: ${DIST}\n`);
for (const item of [...ITEMS].sort((a, b) => a - b)) {
  const probe = probes[item];
  if (probe === undefined) continue;
  try {
    await probe();
  } catch (error) {
    report(item, 'probe failed', error instanceof Error ? error.message.split('\n')[0] ?? '' : String(error));
  }
}
