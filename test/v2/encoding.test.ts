import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { TALL_CHARS } from '../../src/http/json/tall-text.ts';
import { useTestApp } from '../support/test-app.ts';
import { createTable, problemOf, v2Paths } from '../support/v2.ts';

const bytes = (...values: number[]) => Buffer.from(values);
const b64 = (buffer: Buffer) => buffer.toString('base64');
const b64url = (buffer: Buffer) => buffer.toString('base64url');

describe('v2 bytes: base64 and text', () => {
  const app = useTestApp();
  const rows = () => v2Paths(app()).rows('bin');
  const binaryKey = bytes(0x00, 0xff, 0xfe, 0x3a, 0x2f);
  const binaryColumn = bytes(0xc3, 0x28);
  const binaryValue = bytes(0, 1, 2, 0xff);

  before(async () => {
    await createTable(app(), 'bin', [{ name: 'cf' }]);
  });

  it('with encoding=base64, takes and gives every key, column and value in base64 (base64url in the path)', async () => {
    const path = `${rows()}/${b64url(binaryKey)}?encoding=base64`;
    const written = await app().api.request('PUT', path, { json: { cells: [{ family: 'cf', column: b64(binaryColumn), value: b64(binaryValue) }] } });
    expect(written.status, JSON.stringify(written.body)).to.equal(200);
    expect(written.body).to.deep.equal({ key: b64(binaryKey), cellsWritten: 1 });

    const read = await app().api.get(path);
    expect(read.status).to.equal(200);
    expect(read.body.key).to.equal(b64(binaryKey));
    expect(read.body.cells).to.have.length(1);
    expect(read.body.cells[0]).to.include({ family: 'cf', column: b64(binaryColumn), value: b64(binaryValue) });
    expect(read.body.cells[0]).to.not.have.property('encoding');
  });

  it('without it, marks the keys and cells that are not UTF-8, and gives the rest as text', async () => {
    await app().api.request('PUT', `${rows()}/${encodeURIComponent('text')}`, { json: { cells: [{ family: 'cf', column: 'name', value: 'plain' }] } });
    const { body } = await app().api.get(`${rows()}?prefix=`);
    const binary = body.rows.find((row: { key: string }) => row.key === b64(binaryKey));
    expect(binary).to.deep.include({ key: b64(binaryKey), encoding: 'base64' });
    expect(binary.cells[0]).to.include({ column: b64(binaryColumn), value: b64(binaryValue), encoding: 'base64' });
    const text = body.rows.find((row: { key: string }) => row.key === 'text');
    expect(text).to.not.have.property('encoding');
    expect(text.cells[0]).to.include({ column: 'name', value: 'plain' }).and.not.have.property('encoding');
  });

  it('takes base64 for one cell or one batch entry marked with encoding, the rest as text', async () => {
    const mixed = await app().api.request('PUT', `${rows()}/mixed`, {
      json: {
        cells: [
          { family: 'cf', column: 'text', value: 'as is' },
          { family: 'cf', column: b64(binaryColumn), value: b64(binaryValue), encoding: 'base64' },
        ],
      },
    });
    expect(mixed.status, JSON.stringify(mixed.body)).to.equal(200);
    const batch = await app().api.post(`${rows()}:batchWrite`, {
      entries: [{ key: b64(bytes(0xff, 0x00)), encoding: 'base64', mutations: [{ set: { family: 'cf', column: 'c', value: 'v' } }] }],
    });
    expect(batch.body.results).to.deep.equal([{ index: 0, key: b64(bytes(0xff, 0x00)), encoding: 'base64', code: 'OK' }]);
    const got = await app().api.post(`${rows()}:batchGet?encoding=base64`, { keys: [b64(bytes(0xff, 0x00))] });
    expect(got.body.rows[0]).to.deep.include({ key: b64(bytes(0xff, 0x00)), found: true });
    expect(got.body.rows[0].cells[0]).to.include({ column: b64(Buffer.from('c')), value: b64(Buffer.from('v')) });
  });

  it('scans with base64url bounds and column selectors', async () => {
    const { body } = await app().api.get(`${rows()}?encoding=base64&start=${b64url(bytes(0x00))}&end=${b64url(bytes(0x01))}&columns=cf:${b64url(binaryColumn)}`);
    expect(body.rows.map((row: { key: string }) => row.key)).to.deep.equal([b64(binaryKey)]);
  });

  it('refuses base64 that is not, and text with lone surrogates, with 400 and nothing written', async () => {
    const put = (path: string, cell: Record<string, string>) => app().api.request('PUT', path, { json: { cells: [{ family: 'cf', ...cell }] } });
    const cases: Array<[string, Record<string, string>, string]> = [
      [`${rows()}/k?encoding=base64`, { column: 'not base64!', value: 'AA==' }, 'cells[0].column'],
      [`${rows()}/k`, { column: 'c', value: 'AA=', encoding: 'base64' }, 'cells[0].value'],
      [`${rows()}/k`, { column: '\ud800', value: 'v' }, 'cells[0].column'],
      [`${rows()}/${encodeURIComponent('a+b')}?encoding=base64`, { column: 'AA==', value: 'AA==' }, 'key'],
    ];
    for (const [path, cell, field] of cases) {
      const response = await put(path, cell);
      expect(problemOf(response), field).to.deep.equal({ status: 400, code: 'VALIDATION_FAILED' });
      expect(response.body.errors.map((error: { path: string }) => error.path), field).to.include(field);
    }
    expect(problemOf(await app().api.get(`${rows()}?encoding=base64&prefix=%2B%2F`))).to.deep.equal({ status: 400, code: 'VALIDATION_FAILED' });
  });

  it('refuses a JSON body whose bytes are not UTF-8', async () => {
    const body = Buffer.concat([Buffer.from('{"cells":[{"family":"cf","column":"c","value":"'), bytes(0xff), Buffer.from('"}]}')]);
    const response = await app().api.request('PUT', `${rows()}/latin1`, { body, headers: { 'content-type': 'application/json' } });
    expect(response.status).to.be.within(400, 415);
    expect((await app().api.get(`${rows()}/latin1`)).status).to.equal(404);
  });

  it('gives large values back as written, whether JSON holds them as they are or must escape them', async () => {
    const long = (text: string) => text.repeat(Math.ceil((64 * 1024) / Buffer.byteLength(text)) + 1);
    const texts: Record<string, string> = {
      plain: long('x'),
      multibyte: long('é✓\u2028\u007f ok '),
      quote: `${long('q')}"`,
      backslash: `\\${long('b')}`,
      newline: `${long('line')}\n${long('more')}`,
      control: `${long('c')}\u0001`,
    };
    const invalid = Buffer.concat([Buffer.from(long('i')), bytes(0xff)]);
    const path = (key: string) => `${v2Paths(app()).rows('large')}/${key}`;
    await createTable(app(), 'large', [{ name: 'cf' }]);
    for (const [key, value] of Object.entries(texts)) {
      const written = await app().api.request('PUT', path(key), { json: { cells: [{ family: 'cf', column: 'c', value }] } });
      expect(written.status, JSON.stringify(written.body)).to.equal(200);
    }
    const put = await app().api.request('PUT', path('invalid'), { json: { cells: [{ family: 'cf', column: b64(Buffer.from('c')), value: b64(invalid), encoding: 'base64' }] } });
    expect(put.status, JSON.stringify(put.body)).to.equal(200);
    const expected = (key: string) => (key === 'invalid' ? { value: b64(invalid), encoding: 'base64' } : { value: texts[key] });
    const keys = [...Object.keys(texts), 'invalid'];

    for (const key of keys) {
      const { status, body } = await app().api.get(path(key));
      expect(status, key).to.equal(200);
      expect(body.cells[0], key).to.deep.include(expected(key));
    }
    const got = await app().api.post(`${v2Paths(app()).rows('large')}:batchGet`, { keys });
    expect(got.body.rows.map((row: { cells: Array<Record<string, unknown>> }) => row.cells[0]?.value)).to.deep.equal(keys.map((key) => expected(key).value));
    const scanned = await app().api.get(`${v2Paths(app()).rows('large')}?pageSize=100`);
    const byKey = new Map(scanned.body.rows.map((row: { key: string; cells: unknown[] }) => [row.key, row.cells[0]]));
    for (const key of keys) expect(byKey.get(key), key).to.deep.include(expected(key));
    const inBase64 = await app().api.get(`${v2Paths(app()).rows('large')}/${b64url(Buffer.from('plain'))}?encoding=base64`);
    expect(inBase64.body.cells[0].value).to.equal(b64(Buffer.from(texts.plain as string)));
  });

  it('takes tall values, made into bytes a slice at a time, through write, mutate and batchWrite', async () => {
    // A pair of surrogates across a slice's end, and base64 of bytes that are not UTF-8.
    const text = `a${'😀'.repeat(TALL_CHARS / 2 + 1)}é`;
    const binary = Buffer.concat([randomBytes(TALL_CHARS), bytes(0xff)]);
    const rowsPath = v2Paths(app()).rows('tall');
    await createTable(app(), 'tall', [{ name: 'cf' }]);
    const requests: Array<[string, string, unknown]> = [
      ['PUT', `${rowsPath}/written`, { cells: [{ family: 'cf', column: 'text', value: text }, { family: 'cf', column: b64(Buffer.from('binary')), value: b64(binary), encoding: 'base64' }] }],
      ['POST', `${rowsPath}/mutated:mutate`, { mutations: [{ set: { family: 'cf', column: 'text', value: text } }, { set: { family: 'cf', column: b64(Buffer.from('binary')), value: b64(binary), encoding: 'base64' } }] }],
      ['POST', `${rowsPath}:batchWrite`, { entries: [{ key: 'batched', mutations: [{ set: { family: 'cf', column: 'text', value: text } }, { set: { family: 'cf', column: b64(Buffer.from('binary')), value: b64(binary), encoding: 'base64' } }] }] }],
    ];
    for (const [method, path, json] of requests) {
      const { status, body } = await app().api.request(method, path, { json });
      expect(status, `${method} ${path}: ${JSON.stringify(body)}`).to.equal(200);
    }
    for (const key of ['written', 'mutated', 'batched']) {
      const { status, body } = await app().api.get(`${rowsPath}/${key}`);
      expect(status, key).to.equal(200);
      const cells = new Map(body.cells.map((cell: { column: string }) => [cell.column, cell]));
      expect(cells.get('text'), key).to.deep.include({ value: text });
      expect(cells.get(b64(Buffer.from('binary'))), key).to.deep.include({ value: b64(binary), encoding: 'base64' });
    }
  });
});
