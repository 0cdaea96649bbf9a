import { randomBytes, randomInt } from 'node:crypto';
import { expect } from 'chai';
import type { DriverHarnessFactory } from '../support/driver-harness.ts';
import { harness as bigtableHarness } from '../support/harnesses/bigtable.ts';
import { harness as embeddedHarness } from '../support/harnesses/embedded.ts';
import { harness as redisHarness } from '../support/harnesses/redis.ts';
import { type TestApp, useTestApp } from '../support/test-app.ts';
import { createTable, v2Paths } from '../support/v2.ts';

const ROWS = 10_000;
const PAGE_SIZE = 100;

/** Distinct random binary keys of 1-24 bytes: byte order, not text order, decides. */
function randomKeys(count: number, exclude: ReadonlySet<string> = new Set()): Buffer[] {
  const keys = new Map<string, Buffer>();
  while (keys.size < count) {
    const key = randomBytes(randomInt(1, 25));
    const hex = key.toString('hex');
    if (!exclude.has(hex)) keys.set(hex, key);
  }
  return [...keys.values()];
}

async function writeKeys(app: TestApp, keys: readonly Buffer[], value: string): Promise<void> {
  for (let start = 0; start < keys.length; start += 500) {
    const entries = keys.slice(start, start + 500).map((key) => ({ key: key.toString('base64'), mutations: [{ set: { family: 'cf', column: 'Yw==', value: Buffer.from(value).toString('base64') } }] }));
    const response = await app.api.post(`${v2Paths(app).rows('big')}:batchWrite?encoding=base64`, { entries });
    expect(response.status).to.equal(200);
    expect(response.body.results.every((result: { code: string }) => result.code === 'OK')).to.equal(true);
  }
}

/** Every key of the table, page by page (binary, via encoding=base64). */
async function scanAll(app: TestApp): Promise<{ keys: Buffer[]; pages: number[] }> {
  const keys: Buffer[] = [];
  const pages: number[] = [];
  let token: string | undefined;
  do {
    const response = await app.api.get(`${v2Paths(app).rows('big')}?encoding=base64&pageSize=${PAGE_SIZE}${token === undefined ? '' : `&pageToken=${token}`}`);
    expect(response.status).to.equal(200);
    keys.push(...response.body.rows.map((row: { key: string }) => Buffer.from(row.key, 'base64')));
    pages.push(response.body.rows.length);
    token = response.body.nextPageToken;
  } while (token !== undefined);
  return { keys, pages };
}

function expectAscending(keys: readonly Buffer[]): void {
  for (let index = 1; index < keys.length; index += 1) {
    if (Buffer.compare(keys[index - 1] as Buffer, keys[index] as Buffer) >= 0) {
      throw new Error(`keys ${index - 1} and ${index} out of order or repeated: ${keys[index - 1]?.toString('hex')} ${keys[index]?.toString('hex')}`);
    }
  }
}

function scanOf10k(name: string, store: DriverHarnessFactory): void {
  describe(`v2: a scan of ${ROWS} rows in pages of ${PAGE_SIZE} (${name})`, function () {
    this.timeout(300_000);
    const app = useTestApp({ store });
    let original: Buffer[];

    before(async () => {
      // One version per column: what every store keeps, and all a scan reads.
      await createTable(app(), 'big', [{ name: 'cf', maxVersions: 1 }]);
      original = randomKeys(ROWS);
      await writeKeys(app(), original, 'original');
    });

    it('returns each row exactly once, in key byte order', async () => {
      const { keys, pages } = await scanAll(app());
      expect(keys.length).to.equal(ROWS);
      expectAscending(keys);
      expect(keys.map((key) => key.toString('hex'))).to.deep.equal([...original].sort((a, b) => Buffer.compare(a, b)).map((key) => key.toString('hex')));
      expect(pages).to.deep.equal([...Array<number>(ROWS / PAGE_SIZE).fill(PAGE_SIZE), 0].slice(0, pages.length));
    });

    it('returns each row that exists throughout exactly once while rows are written, in byte order, and a new one at most once', async () => {
      const added = randomKeys(2000, new Set(original.map((key) => key.toString('hex'))));
      let next = 0;
      let scanning = true;
      // While the scan runs: new rows all over the key space, and new versions of existing rows.
      const writer = (async () => {
        while (scanning && next < added.length) {
          const batch = added.slice(next, next + 10);
          next += batch.length;
          const rewritten = Array.from({ length: 10 }, () => original[randomInt(original.length)] as Buffer);
          await writeKeys(app(), [...batch, ...rewritten], 'during the scan');
        }
      })();
      const { keys } = await scanAll(app()).finally(() => {
        scanning = false;
      });
      await writer;
      expectAscending(keys);
      const seen = new Set(keys.map((key) => key.toString('hex')));
      for (const key of original) expect(seen.has(key.toString('hex')), key.toString('hex')).to.equal(true);
      const addedHex = new Set(added.map((key) => key.toString('hex')));
      const originalHex = new Set(original.map((key) => key.toString('hex')));
      for (const key of seen) expect(originalHex.has(key) || addedHex.has(key), key).to.equal(true);
      expect(next).to.be.above(0);
    });
  });
}

scanOf10k('embedded', embeddedHarness);
scanOf10k('bigtable', bigtableHarness);
scanOf10k('redis', redisHarness);
