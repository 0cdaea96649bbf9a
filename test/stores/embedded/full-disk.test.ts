import { execFileSync } from 'node:child_process';
import { appendFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { type ServiceProcess, cleanEnv, runService } from '../../support/service-process.ts';

/** Mounts a tmpfs of `size` at `dir`; false when this user may not (mounting needs root). */
function mountTmpfs(dir: string, size: string): boolean {
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${size}`, 'tmpfs', dir], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/** Appends to `file` until the file system has no room left. */
function fillUp(file: string): void {
  const chunk = Buffer.alloc(4096);
  for (;;) {
    try {
      appendFileSync(file, chunk);
    } catch {
      return;
    }
  }
}

/**
 * The embedded store on a file system that fills up: a real one, a 2 MiB tmpfs (no stand-in such
 * as SQLite's max_page_count), so SQLite meets ENOSPC as it would on a full volume, WAL included.
 */
describe('embedded store: a full disk', function () {
  this.timeout(120_000);
  let root: string;
  let mount: string;
  let mounted = false;
  let service: ServiceProcess | undefined;
  const tables = '/v2/stores/local/instances/local/tables';

  const call = async (method: string, path: string, body?: unknown) => {
    const response = await fetch(`${service?.baseUrl ?? ''}${path}`, {
      method,
      ...(body === undefined ? {} : { headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }),
    });
    const text = await response.text();
    return { status: response.status, retryAfter: response.headers.get('retry-after'), body: (text === '' ? {} : JSON.parse(text)) as Record<string, unknown> };
  };
  const put = (table: string, key: string, value: string) => call('PUT', `${tables}/${table}/rows/${key}`, { cells: [{ family: 'cf', column: 'c', value }] });

  before(function () {
    root = mkdtempSync(join(tmpdir(), 'kvcrud-full-disk-'));
    mount = join(root, 'volume');
    mkdirSync(mount);
    mounted = mountTmpfs(mount, '2m');
    if (!mounted) {
      if (process.env['CI'] === 'true') throw new Error('CI=true but a tmpfs cannot be mounted (the full-disk test needs root)');
      process.stderr.write('\n  !!! Cannot mount a tmpfs (needs root): THE FULL-DISK TEST IS SKIPPED.\n\n');
      this.skip();
    }
  });
  after(async () => {
    await service?.stop();
    if (mounted) execFileSync('umount', [mount]);
    rmSync(root, { recursive: true, force: true });
  });

  it('answers writes 507 INSUFFICIENT_STORAGE with Retry-After, keeps reading, deleting rows and readiness, and writes again once the volume grows', async () => {
    const dataDir = join(mount, 'data');
    const storesFile = join(root, 'stores.yaml');
    writeFileSync(storesFile, `default: local\nstores:\n  local: { driver: embedded, dataDir: ${dataDir}, instances: [local] }\n`);
    service = await runService(cleanEnv({ PORT: '0', STORES_FILE: storesFile }));

    expect((await call('POST', tables, { name: 'orders', families: [{ name: 'cf' }] })).status).to.equal(201);
    const value = 'v'.repeat(48_000);
    let written = 0;
    let refused: Awaited<ReturnType<typeof call>> | undefined;
    // 2 MiB hold about 40 such rows: the disk is full well before 200.
    while (written < 200) {
      const answer = await put('orders', `row-${written}`, value);
      if (answer.status !== 200) {
        refused = answer;
        break;
      }
      written++;
    }
    expect(written).to.be.above(2);
    expect(refused?.status).to.equal(507);
    expect(refused?.body['code']).to.equal('INSUFFICIENT_STORAGE');
    expect(refused?.retryAfter).to.equal('30');
    expect(String(refused?.body['detail'])).not.to.contain('disk is full');
    // Nothing of the refused write is there.
    expect((await call('GET', `${tables}/orders/rows/row-${written}`)).status).to.equal(404);

    // A refused write leaves its room in the write-ahead log to the next one, which may fit: with
    // the rest of the volume taken by another file (as on a volume others fill too), v1 inserts
    // are refused within a few as well.
    fillUp(join(mount, 'filler'));
    let v1: Awaited<ReturnType<typeof call>> | undefined;
    for (let attempt = 0; attempt < 5 && v1?.status !== 507; attempt++) {
      v1 = await call('POST', '/v1/local/insertData', { tableName: 'orders', rowKeyId: `v1-${attempt}`, data: [{ columnFamily: 'cf', columnName: 'c', columnValue: value }] });
    }
    expect([v1?.status, v1?.body['code']]).to.deep.equal([507, 'INSUFFICIENT_STORAGE']);

    // Reads and row deletes work; the pod stays ready (its reads are worth routing to).
    const read = await call('GET', `${tables}/orders/rows/row-0`);
    expect(read.status).to.equal(200);
    expect((await call('DELETE', `${tables}/orders/rows/row-1`)).status).to.equal(204);
    expect((await call('GET', '/readyz')).status).to.equal(200);
    const logged = service.output.filter((line) => line.includes('"status":507'));
    expect(logged.join('\n')).to.contain('database or disk is full').and.to.contain('RESOURCE_EXHAUSTED');

    // The operator grows the volume: writes succeed again, without a restart.
    execFileSync('mount', ['-o', 'remount,size=8m', mount]);
    expect((await put('orders', `row-${written}`, value)).status).to.equal(200);
    expect((await call('POST', tables, { name: 'more', families: [{ name: 'cf' }] })).status).to.equal(201);
    expect((await call('DELETE', `${tables}/orders`)).status).to.equal(204);
    expect(service.process.exitCode).to.equal(null);
  });
});
