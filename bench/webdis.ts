/**
 * Webdis, the C gateway from HTTP to Redis (Debian's `webdis`, scripts/install-webdis.sh): the
 * bench's Redis peer. The bench starts one of its own on its own redis-server and measures
 * `GET /HGETALL/<row hash>` of the rows kvcrud's v2 get reads.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { closedPort } from '../test/support/fake-backends.ts';

/** Debian's webdis; WEBDIS overrides it. */
export const WEBDIS = process.env['WEBDIS'] ?? '/usr/bin/webdis';

/** Whether webdis is installed. */
export function webdisAvailable(): boolean {
  return existsSync(WEBDIS);
}

export interface Webdis {
  readonly baseUrl: string;
  readonly process: ChildProcess;
  stop(): Promise<void>;
}

/**
 * spawnWebdis starts webdis in the foreground on a free port of 127.0.0.1 against the redis-server
 * on `redisPort`, with Debian's default of 2 threads, and resolves once it answers `GET /PING`.
 */
export async function spawnWebdis(redisPort: number): Promise<Webdis> {
  const dir = mkdtempSync(join(tmpdir(), 'kvcrud-webdis-'));
  const port = await closedPort();
  const config = join(dir, 'webdis.json');
  writeFileSync(
    config,
    JSON.stringify({
      redis_host: '127.0.0.1',
      redis_port: redisPort,
      redis_auth: null,
      http_host: '127.0.0.1',
      http_port: port,
      threads: 2,
      daemonize: false,
      database: 0,
      acl: [{ disabled: ['DEBUG'] }],
      verbosity: 1,
      logfile: join(dir, 'webdis.log'),
    }),
  );
  const child = spawn(WEBDIS, [config], { stdio: 'ignore' });
  const baseUrl = `http://127.0.0.1:${port}`;
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((done) => child.once('exit', done));
      child.kill('SIGTERM');
      await exited;
    }
    rmSync(dir, { recursive: true, force: true });
  };
  const started = Date.now();
  for (;;) {
    if (child.exitCode !== null) {
      await stop();
      throw new Error(`webdis exited (${child.exitCode}) before it answered`);
    }
    const answer = await fetch(`${baseUrl}/PING`).then((response) => response.text(), () => undefined);
    if (answer?.includes('PONG') === true) return { baseUrl, process: child, stop };
    if (Date.now() - started > 10_000) {
      await stop();
      throw new Error(`webdis did not answer on port ${port} within 10 s`);
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** Webdis's request for the HGETALL of a Redis key: the key is one path segment, so it is encoded. */
export function webdisHGetAllRequest(hashKey: string) {
  return { method: 'GET' as const, path: `/HGETALL/${encodeURIComponent(hashKey)}` };
}
