import { execFile, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { ApiClient } from '../support/api-client.ts';
import { emulatorHost } from '../support/emulator.ts';
import { runService, serviceEnv } from '../support/service-process.ts';
import { randomInstanceId } from '../support/test-app.ts';

const execFileAsync = promisify(execFile);
const ROOT = new URL('../../', import.meta.url).pathname;
const SERVE = (JSON.parse(readFileSync(`${ROOT}package.json`, 'utf8')) as { scripts: Record<string, string> }).scripts['serve'] ?? '';

// Inside a private mount namespace, remount / read-only, prove that a write fails, then run the
// command: the container's `readOnlyRootFilesystem: true`, without a container engine.
const READ_ONLY_ROOT = 'mount -o remount,bind,ro / && ! touch /.kvcrud-write-check 2>/dev/null && exec "$@"';

/** Whether this machine lets us make a private mount namespace (root, or CAP_SYS_ADMIN). */
function canUnshare(): boolean {
  return spawnSync('unshare', ['--mount', 'sh', '-c', 'mount -o remount,bind,ro /'], { stdio: 'ignore' }).status === 0;
}

describe('the image start command with a read-only root filesystem', function () {
  this.timeout(180_000);

  before(function () {
    if (canUnshare()) return;
    if (process.env['CI'] === 'true') throw new Error('CI=true but `unshare --mount` is not permitted: cannot test a read-only root filesystem');
    process.stderr.write('\n  !!! `unshare --mount` is not permitted here (run as root): READ-ONLY ROOT FS TEST SKIPPED.\n\n');
    this.skip();
  });

  it('serves every endpoint and drains on SIGTERM, writing nothing outside mounted volumes', async function () {
    const emulator = emulatorHost(this);
    await execFileAsync('npm', ['run', 'build', '--silent'], { cwd: ROOT });
    const [, ...nodeArgs] = SERVE.split(' ');
    const instance = randomInstanceId();
    const service = await runService(serviceEnv(instance, emulator), [
      'unshare',
      '--mount',
      'sh',
      '-c',
      READ_ONLY_ROOT,
      'sh',
      process.execPath,
      ...nodeArgs,
    ]);
    try {
      const api = await ApiClient.connect(service.baseUrl);
      const v1 = `/v1/${instance}`;
      expect((await api.get('/readyz')).status).to.equal(200);
      expect((await fetch(`${service.baseUrl}/docs`)).status).to.equal(200);
      expect((await api.post(`${v1}/createTable`, { tableName: 't', columnFamily: 'cf' })).status).to.equal(201);
      const cells = [{ columnFamily: 'cf', columnName: 'c', columnValue: 'v' }];
      expect((await api.post(`${v1}/insertData`, { tableName: 't', rowKeyId: 'r', data: cells })).status).to.equal(200);
      expect((await api.get(`${v1}/readCellData?tableName=t&id=r`)).body.data[0].columnValue).to.equal('v');
      expect((await api.delete(`${v1}/deleteTable`, { tableList: ['t'] })).status).to.equal(200);
    } finally {
      expect(await service.stop('SIGTERM')).to.equal(0);
    }
    expect(service.output.filter((line) => /EROFS|read-only file system/i.test(line))).to.deep.equal([]);
  });
});
