/**
 * `node bench/large-pages.ts [--concurrency 8] [--rounds 4] [--rows 80] [--batch-get | --get] [--binary] [--store embedded|bigtable]`:
 * the service's memory while several callers read the largest answers the v2 API gives (pages of
 * 16 MiB of keys, columns and values, SERVICE_LIMITS.pageBytes), on the embedded store or on a
 * Bigtable emulator of its own. The built service (`npm run build` first) runs with no
 * configuration but the store's; the table holds `--rows` rows of one
 * 256 KiB cell, text (or, with `--binary`, random bytes, which answers give in base64). Each round, `--concurrency` callers at once each scan the whole table, asking for
 * pages of as many rows and following the tokens (a full page holds 63 rows); with `--batch-get`,
 * each instead reads the first 63 rows in one batchGet; with `--get`, the table holds tall rows
 * instead, each of 64 cells of 256 KiB (16 MiB, written in four PUTs), and each caller reads one
 * whole row with a get (caller i row i). Prints the service's RSS before the reads,
 * and for each round its peak (sampled every 50 ms), the time, the answers' statuses and the
 * pages' sizes. Compare the peak with the 300 MB docs/performance.md asks for under load.
 *
 * Pages, batchGet answers and large rows hold their rows within the answer budget (answer-budget.ts): under
 * many scans at once, pages end early and there are more of them. Figures, and what each change
 * to the memory of large answers measured: docs/performance.md, "Memory under the largest scan
 * pages".
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { cpus, loadavg, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { spawnEmulator } from '../test/support/emulator.ts';
import { cleanEnv, runService } from '../test/support/service-process.ts';
import { memoryOf } from './proc-stats.ts';

const ROOT = new URL('../', import.meta.url).pathname;
const { values: args } = parseArgs({
  options: {
    concurrency: { type: 'string', default: '8' },
    rounds: { type: 'string', default: '4' },
    rows: { type: 'string', default: '80' },
    'batch-get': { type: 'boolean', default: false },
    get: { type: 'boolean', default: false },
    binary: { type: 'boolean', default: false },
    store: { type: 'string', default: 'embedded' },
  },
});
if (args.store !== 'embedded' && args.store !== 'bigtable') throw new Error('--store is embedded or bigtable');
/** The instance the table is in: the embedded store's own, or one on the emulator (Bigtable IDs have 6-33 characters). */
const INSTANCE = args.store === 'bigtable' ? 'bench-pages' : 'local';
const concurrency = Number(args.concurrency);
const rounds = Number(args.rounds);
const ROWS = Number(args.rows);
const batchGet = args['batch-get'];
const tallRows = args.get;
if (batchGet && tallRows) throw new Error('--batch-get or --get, not both');
/** With --get: cells per tall row, and how many go in one PUT (4 MiB, within the default body limit). */
const TALL_CELLS = 64;
const CELLS_PER_PUT = 16;
/** The value of every row: text, or bytes that are not UTF-8 (a leading 0xff), written in base64. */
const VALUE = args.binary ? Buffer.concat([Buffer.from([0xff]), randomBytes(256 * 1024 - 1)]).toString('base64') : 'x'.repeat(256 * 1024);
const CELL = args.binary
  ? { family: 'cf', column: Buffer.from('v').toString('base64'), value: VALUE, encoding: 'base64' }
  : { family: 'cf', column: 'v', value: VALUE };
/** As many rows as the largest page holds: 63 of 256 KiB in 16 MiB. */
const BATCH_KEYS = 63;
const keyOf = (row: number) => `row-${String(row).padStart(3, '0')}`;
/** Column `index` of a tall row, in the cell's encoding. */
const columnName = (index: number) => (args.binary ? Buffer.from(`v${index}`).toString('base64') : `v${index}`);

interface Caller {
  /** The status of each answer. */
  readonly statuses: number[];
  /** The rows of each page answered 200. */
  readonly pages: number[];
}

/** Scans the whole table a page at a time (pages asked for as many rows as it has), following the tokens. */
async function scanTable(tables: string): Promise<Caller> {
  const caller: Caller = { statuses: [], pages: [] };
  const keys: string[] = [];
  let token: string | undefined;
  do {
    const response = await fetch(`${tables}/pages/rows?pageSize=${ROWS}${token === undefined ? '' : `&pageToken=${token}`}`);
    const page = (await response.json()) as { rows?: Array<{ key: string }>; nextPageToken?: string };
    caller.statuses.push(response.status);
    if (response.status !== 200) throw new Error(`scan: ${response.status} ${JSON.stringify(page)}`);
    keys.push(...(page.rows ?? []).map((row) => row.key));
    caller.pages.push(page.rows?.length ?? 0);
    token = page.nextPageToken;
  } while (token !== undefined);
  if (keys.join() !== Array.from({ length: ROWS }, (_, row) => keyOf(row)).join()) throw new Error('the scan did not return every row once, in order');
  return caller;
}

/** Reads the first BATCH_KEYS rows in one batchGet. */
async function getRows(tables: string): Promise<Caller> {
  const keys = Array.from({ length: BATCH_KEYS }, (_, row) => keyOf(row));
  const response = await fetch(`${tables}/pages/rows:batchGet`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ keys }) });
  await response.arrayBuffer();
  return { statuses: [response.status], pages: [] };
}

/** Reads tall row `row` whole with a get. */
async function getTallRow(tables: string, row: number): Promise<Caller> {
  const response = await fetch(`${tables}/pages/rows/${keyOf(row)}`);
  const body = (await response.json()) as { cells?: unknown[] };
  if (response.status === 200 && body.cells?.length !== TALL_CELLS) throw new Error(`get: ${body.cells?.length} cells, not ${TALL_CELLS}`);
  return { statuses: [response.status], pages: [] };
}

const dataDir = mkdtempSync(join(tmpdir(), 'kvcrud-bench-pages-'));
const emulator = args.store === 'bigtable' ? await spawnEmulator() : undefined;
const storeVars: Record<string, string> =
  emulator === undefined ? { DATA_DIR: dataDir } : { GOOGLE_CLOUD_PROJECT: 'kvcrud-bench', INSTANCE_IDS: INSTANCE, BIGTABLE_EMULATOR_HOST: emulator.host };
const service = await runService(cleanEnv({ PORT: '0', ...storeVars }), [process.execPath, join(ROOT, 'dist/index.js')]).catch((error: unknown) => {
  emulator?.process.kill('SIGTERM');
  throw error;
});
const pid = service.process.pid ?? 0;
try {
  const { stores } = (await (await fetch(`${service.baseUrl}/v2/stores`)).json()) as { stores: Array<{ name: string; default: boolean }> };
  const store = stores.find((each) => each.default)?.name ?? '';
  const tables = `${service.baseUrl}/v2/stores/${store}/instances/${INSTANCE}/tables`;
  const send = async (url: string, method: string, body: object) => {
    const response = await fetch(url, { method, headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    if (!response.ok) throw new Error(`${method} ${url}: ${response.status} ${await response.text()}`);
    await response.arrayBuffer();
  };
  await send(tables, 'POST', { name: 'pages', families: [{ name: 'cf', maxVersions: 1 }] });
  if (tallRows) {
    for (let row = 0; row < concurrency; row++) {
      for (let first = 0; first < TALL_CELLS; first += CELLS_PER_PUT) {
        const cells = Array.from({ length: CELLS_PER_PUT }, (_, index) => ({ ...CELL, column: columnName(first + index) }));
        await send(`${tables}/pages/rows/${keyOf(row)}`, 'PUT', { cells });
      }
    }
  } else {
    for (let row = 0; row < ROWS; row++) {
      await send(`${tables}/pages/rows/${keyOf(row)}`, 'PUT', { cells: [CELL] });
    }
  }
  process.stdout.write(
    `largest ${batchGet ? 'batchGet answers' : tallRows ? 'rows read by get' : 'scan pages'}${args.binary ? ' of binary values' : ''}, ${concurrency} at once, on the ${args.store === 'bigtable' ? 'Bigtable emulator' : 'embedded store'}: ${cpus().length} × ${cpus()[0]?.model ?? '?'}, ` +
      `${Math.round(totalmem() / 2 ** 30)} GB, Node ${process.version}, load average ${loadavg()[0]?.toFixed(2)}\n` +
      `  service RSS before the scans: ${memoryOf(pid).rssMb} MB\n`,
  );
  for (let round = 0; round < rounds; round++) {
    let peak = memoryOf(pid).rssMb;
    const sampler = setInterval(() => (peak = Math.max(peak, memoryOf(pid).rssMb)), 50);
    const started = performance.now();
    const callers = await Promise.all(Array.from({ length: concurrency }, (_, index) => (batchGet ? getRows(tables) : tallRows ? getTallRow(tables, index) : scanTable(tables))));
    clearInterval(sampler);
    const seconds = ((performance.now() - started) / 1000).toFixed(1);
    const statuses = new Map<number, number>();
    for (const status of callers.flatMap((caller) => caller.statuses)) statuses.set(status, (statuses.get(status) ?? 0) + 1);
    const answered = [...statuses].map(([status, count]) => `${status}×${count}`).join(' ');
    const pages = callers.flatMap((caller) => caller.pages);
    const what = batchGet
      ? `${concurrency} batchGets of ${BATCH_KEYS} rows`
      : tallRows
        ? `${concurrency} gets of rows of ${TALL_CELLS} cells`
        : `${concurrency} scans of ${ROWS} rows in ${pages.length} pages of ${Math.min(...pages)}-${Math.max(...pages)} rows ` +
        `(first pages ${Math.min(...callers.map((caller) => caller.pages[0] ?? 0))}-${Math.max(...callers.map((caller) => caller.pages[0] ?? 0))})`;
    process.stdout.write(`  round ${round + 1}: ${what} in ${seconds} s, answers ${answered}, peak RSS ${peak} MB\n`);
  }
} finally {
  await service.stop('SIGTERM');
  emulator?.process.kill('SIGTERM');
  rmSync(dataDir, { recursive: true, force: true });
}
