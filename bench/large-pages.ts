/**
 * `node bench/large-pages.ts [--concurrency 8] [--rounds 4] [--rows 80]`: the service's memory while several
 * callers scan the largest page the v2 API returns (16 MiB of keys, columns and values,
 * SERVICE_LIMITS.pageBytes), on the embedded store. The built service (`npm run build` first) runs
 * with no configuration; the table holds `--rows` rows of one 256 KiB cell, and each round sends
 * `--concurrency` scans asking for pages of as many rows at once, each answered with the first
 * page, 63 rows. Prints
 * the service's RSS before the scans and its peak during each round (sampled every 50 ms).
 *
 * Scan pages are built whole before they are sent, so this is the memory a page costs; compare
 * the peak with the 300 MB docs/performance.md asks for under load.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { cpus, loadavg, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { cleanEnv, runService } from '../test/support/service-process.ts';
import { memoryOf } from './proc-stats.ts';

const ROOT = new URL('../', import.meta.url).pathname;
const { values: args } = parseArgs({
  options: { concurrency: { type: 'string', default: '8' }, rounds: { type: 'string', default: '4' }, rows: { type: 'string', default: '80' } },
});
const concurrency = Number(args.concurrency);
const rounds = Number(args.rounds);
const ROWS = Number(args.rows);
const VALUE = 'x'.repeat(256 * 1024);

const dataDir = mkdtempSync(join(tmpdir(), 'kvcrud-bench-pages-'));
const service = await runService(cleanEnv({ PORT: '0', DATA_DIR: dataDir }), [process.execPath, join(ROOT, 'dist/index.js')]);
const pid = service.process.pid ?? 0;
try {
  const tables = `${service.baseUrl}/v2/stores/embedded/instances/local/tables`;
  const send = async (url: string, method: string, body: object) => {
    const response = await fetch(url, { method, headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    if (!response.ok) throw new Error(`${method} ${url}: ${response.status} ${await response.text()}`);
    await response.arrayBuffer();
  };
  await send(tables, 'POST', { name: 'pages', families: [{ name: 'cf', maxVersions: 1 }] });
  for (let row = 0; row < ROWS; row++) {
    await send(`${tables}/pages/rows/row-${String(row).padStart(3, '0')}`, 'PUT', { cells: [{ family: 'cf', column: 'v', value: VALUE }] });
  }
  process.stdout.write(
    `largest scan pages, ${concurrency} at once, on the embedded store: ${cpus().length} × ${cpus()[0]?.model ?? '?'}, ` +
      `${Math.round(totalmem() / 2 ** 30)} GB, Node ${process.version}, load average ${loadavg()[0]?.toFixed(2)}\n` +
      `  service RSS before the scans: ${memoryOf(pid).rssMb} MB\n`,
  );
  for (let round = 0; round < rounds; round++) {
    let peak = memoryOf(pid).rssMb;
    const sampler = setInterval(() => (peak = Math.max(peak, memoryOf(pid).rssMb)), 50);
    const started = performance.now();
    const pages = await Promise.all(
      Array.from({ length: concurrency }, async () => {
        const response = await fetch(`${tables}/pages/rows?pageSize=${ROWS}`);
        const page = (await response.json()) as { rows?: unknown[] };
        if (response.status !== 200) throw new Error(`scan: ${response.status}`);
        return page.rows?.length ?? 0;
      }),
    );
    clearInterval(sampler);
    const rows = pages[0] ?? 0;
    process.stdout.write(
      `  round ${round + 1}: ${concurrency} pages of ${rows} rows (${((rows * VALUE.length) / 2 ** 20).toFixed(0)} MiB of values each) ` +
        `in ${((performance.now() - started) / 1000).toFixed(1)} s, peak RSS ${peak} MB\n`,
    );
  }
} finally {
  await service.stop('SIGTERM');
  rmSync(dataDir, { recursive: true, force: true });
}
