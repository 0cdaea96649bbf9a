import { connect } from 'node:net';
import { brotliCompressSync, deflateSync, gzipSync } from 'node:zlib';
import { expect } from 'chai';
import { sendRaw } from '../support/raw-http.ts';
import { harness as embeddedHarness } from '../support/harnesses/embedded.ts';
import { useTestApp } from '../support/test-app.ts';

const JSON_TYPE = ['content-type', 'application/json'] as const;

/** An insertData body whose row key is `prefix` followed by raw `bytes`. */
function withKeyBytes(prefix: string, bytes: number[]): Buffer {
  return Buffer.concat([
    Buffer.from(`{"tableName":"bodies","rowKeyId":"${prefix}`),
    Buffer.from(bytes),
    Buffer.from('","data":[{"columnFamily":"cf","columnName":"c","columnValue":"v"}]}'),
  ]);
}

describe('request bodies', () => {
  const app = useTestApp({ store: embeddedHarness, maxBodyBytes: 64 * 1024 });
  const path = () => `/v1/${app().instance}/insertData`;
  const insert = (rowKeyId: string, columnValue = 'v') => JSON.stringify({ tableName: 'bodies', rowKeyId, data: [{ columnFamily: 'cf', columnName: 'c', columnValue }] });
  const post = (body: Uint8Array, headers: ReadonlyArray<readonly [string, string]> = [JSON_TYPE]) =>
    sendRaw(app().baseUrl, { method: 'POST', path: path(), headers, body }, app().api);
  const rowExists = async (key: Buffer) =>
    (await app().store.readRows({ instance: app().instance, table: 'bodies' }, [key], { versions: 1 }, { deadline: Date.now() + 5000 }))[0] !== null;

  before(async () => {
    expect((await app().api.post(`/v1/${app().instance}/createTable`, { tableName: 'bodies', columnFamily: 'cf' })).status).to.equal(201);
  });

  describe('bytes that are not UTF-8', () => {
    // Overlong forms, UTF-16 surrogates, a code point past U+10FFFF, sequences cut short, stray bytes.
    const invalid: Record<string, number[]> = {
      'overlong "/"': [0xc0, 0xaf],
      'overlong NUL': [0xe0, 0x80, 0x80],
      'high surrogate': [0xed, 0xa0, 0x80],
      'low surrogate': [0xed, 0xbf, 0xbf],
      'past U+10FFFF': [0xf4, 0x90, 0x80, 0x80],
      'cut-short 3-byte': [0xe2, 0x82],
      'cut-short 4-byte': [0xf0, 0x9f, 0x98],
      'lone continuation': [0x80],
      'byte FF': [0xff],
      'byte FE': [0xfe],
    };

    for (const [name, bytes] of Object.entries(invalid)) {
      it(`refuses ${name} in a row key with 400 MALFORMED_JSON and writes nothing`, async () => {
        const response = await post(withKeyBytes('k', bytes));
        expect(response.status).to.equal(400);
        expect(response.body.code).to.equal('MALFORMED_JSON');
        expect(response.body.detail).to.match(/not valid UTF-8/);
        expect(await rowExists(Buffer.from('k\uFFFD'))).to.equal(false);
        expect(await rowExists(Buffer.concat([Buffer.from('k'), Buffer.from(bytes)]))).to.equal(false);
      });
    }

    it('keeps two callers who send keys differing only in invalid bytes apart: both are refused', async () => {
      for (const byte of [0xff, 0xfe]) expect((await post(withKeyBytes('x', [byte]))).status).to.equal(400);
      expect(await rowExists(Buffer.from('x\uFFFD'))).to.equal(false);
    });

    it('accepts every valid UTF-8 form, 4-byte ones and a byte order mark included', async () => {
      expect((await post(Buffer.from(insert('emoji-😀-ß-€')))).status).to.equal(200);
      expect(await rowExists(Buffer.from('emoji-😀-ß-€'))).to.equal(true);
      expect((await post(Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(insert('bom'))]))).status).to.equal(200);
    });
  });

  describe('content encodings', () => {
    it('reads gzip, deflate and br bodies, in any letter case', async () => {
      const cases: Array<[string, (bytes: Buffer) => Buffer]> = [
        ['gzip', gzipSync],
        ['deflate', deflateSync],
        ['br', brotliCompressSync],
        ['GZip', gzipSync],
      ];
      for (const [coding, compress] of cases) {
        const response = await post(compress(Buffer.from(insert(`coded-${coding}`))), [JSON_TYPE, ['content-encoding', coding]]);
        expect(response.status, coding).to.equal(200);
      }
    });

    it('answers 400 MALFORMED_JSON, never 500, for a body that does not match its Content-Encoding', async () => {
      const plain = Buffer.from(insert('mismatched'));
      const gzipped = gzipSync(plain);
      const cases: Array<[string, Buffer]> = [
        ['gzip', plain],
        ['deflate', plain],
        ['br', plain],
        ['gzip', gzipped.subarray(0, gzipped.length - 12)],
        ['gzip', gzipped.subarray(0, 10)],
        ['deflate', deflateSync(plain).subarray(0, 8)],
        ['br', brotliCompressSync(plain).subarray(0, 5)],
      ];
      for (const [coding, body] of cases) {
        const response = await post(body, [JSON_TYPE, ['content-encoding', coding]]);
        expect(response.status, `${coding}, ${body.length} bytes`).to.equal(400);
        expect(response.body.code).to.equal('MALFORMED_JSON');
        expect(response.body.detail).to.equal(`The body is not valid ${coding} data, as its Content-Encoding says it is.`);
      }
      expect(await rowExists(Buffer.from('mismatched'))).to.equal(false);
    });

    it('answers 415 for a Content-Encoding it cannot read', async () => {
      for (const coding of ['compress', 'zstd', 'gzip, gzip', 'x-custom']) {
        const response = await post(Buffer.from(insert('unknown-coding')), [JSON_TYPE, ['content-encoding', coding]]);
        expect(response.status, coding).to.equal(415);
        expect(response.body.code).to.equal('UNSUPPORTED_MEDIA_TYPE');
      }
    });

    it('stops a compressed body at the size limit once decompressed (413)', async () => {
      const bomb = gzipSync(Buffer.from(insert('bomb', 'x'.repeat(8 * 1024 * 1024))));
      expect(bomb.length).to.be.below(64 * 1024);
      const response = await post(bomb, [JSON_TYPE, ['content-encoding', 'gzip']]);
      expect(response.status).to.equal(413);
      expect(response.body.code).to.equal('PAYLOAD_TOO_LARGE');
    });
  });

  describe('JSON that is not valid', () => {
    const cases: Record<string, string> = {
      '{"tableName": }': ': unexpected "}".',
      '{"tableName" "x"}': ': it breaks at line 1, column 14 (character 14).',
      '[1,': ': it ends before the JSON does.',
      '{"__proto__": {}}': ': it has a "__proto__" key.',
    };
    for (const [body, reason] of Object.entries(cases)) {
      it(`says in its own words where ${body} breaks`, async () => {
        const response = await post(Buffer.from(body));
        expect((response.body as { code: string }).code).to.equal('MALFORMED_JSON');
        expect((response.body as { detail: string }).detail).to.equal(`The body is not a valid JSON object or array${reason}`);
      });
    }
  });

  it('names the characters a table name may hold in a sentence that ends once', async () => {
    const response = await app().api.post(`/v1/${app().instance}/createTable`, { tableName: 'a b', columnFamily: 'cf' });
    expect(response.body.detail).to.equal('tableName may hold letters, digits, _ - and dots, and must start with a letter, digit or _.');
  });

  describe('a GET with a JSON body', () => {
    const get = (path: string, body: string) => sendRaw(app().baseUrl, { method: 'GET', path, headers: [JSON_TYPE], body: Buffer.from(body) }, app().api);

    it('is told that the parameters belong in the query string', async () => {
      const response = await get(`/v1/${app().instance}/readCellData`, '{"tableName": "bodies", "id": "r"}');
      expect(response.status).to.equal(400);
      expect((response.body as { code: string }).code).to.equal('VALIDATION_FAILED');
      expect((response.body as { detail: string }).detail).to.contain('takes its parameters in the query string (?tableName=…&id=…)');
    });

    it('is answered as usual when its query is right: the body is not read', async () => {
      const response = await get(`/v1/${app().instance}/readCellData?tableName=bodies&id=absent`, '{"tableName": "other"}');
      expect(response.status).to.equal(404);
      expect((response.body as { code: string }).code).to.equal('ROW_NOT_FOUND');
    });

    it('gives no such hint without a body', async () => {
      const response = await app().api.get(`/v1/${app().instance}/readCellData`);
      expect(response.status).to.equal(400);
      expect(response.body.detail).to.not.contain('query string');
    });
  });

  it('answers 415 for a repeated Content-Type, whichever comes first', async () => {
    for (const types of [['application/json', 'text/plain'], ['text/plain', 'application/json'], ['application/json', 'application/json']]) {
      const response = await post(Buffer.from(insert('two-types')), types.map((type) => ['content-type', type] as const));
      expect(response.status, types.join(' then ')).to.equal(415);
      expect(response.body.detail).to.equal('Send one Content-Type header, not several.');
    }
  });
});

describe('a body that arrives too slowly', () => {
  // 1 KiB/s needed after the grace second; the slow client sends 1 byte every 100 ms.
  const app = useTestApp({ store: embeddedHarness, minBodyBytesPerSecond: 1024 });

  it('is refused with 408 REQUEST_TIMEOUT after the grace second and its connection closed, while others are served', async () => {
    const { hostname, port } = new URL(app().baseUrl);
    const socket = connect(Number(port), hostname);
    let received = '';
    socket.on('data', (chunk: Buffer) => (received += chunk.toString('latin1')));
    socket.on('error', () => {});
    const closed = new Promise<number>((resolve) => socket.once('close', () => resolve(performance.now())));
    await new Promise((resolve) => socket.once('connect', resolve));
    const started = performance.now();
    socket.write(`POST /v1/${app().instance}/createTable HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{`);
    const trickle = setInterval(() => socket.write(' '), 100);
    try {
      // Meanwhile a fast caller is served.
      expect((await app().api.get(`/v1/${app().instance}/readCellData?tableName=none&id=r`)).status).to.equal(404);
      const closedAt = await closed;
      expect(closedAt - started).to.be.within(900, 10_000);
    } finally {
      clearInterval(trickle);
    }
    expect(received).to.match(/^HTTP\/1\.1 408 /);
    expect(received).to.match(/\r\nconnection: close\r\n/i);
    expect(received).to.contain('"code":"REQUEST_TIMEOUT"');
    const metrics = await app().api.get('/metrics');
    expect(metrics.body).to.match(/kvcrud_http_requests_shed_total\{limit="body_rate"\} 1/);
  });

  it('accepts a body that arrives at once', async () => {
    expect((await app().api.post(`/v1/${app().instance}/createTable`, { tableName: 'fast', columnFamily: 'cf' })).status).to.equal(201);
  });
});
