import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { promisify } from 'node:util';
import { createServer } from 'node:net';
import { closedPort } from './fake-backends.ts';

/** Debian's redis-server and redis-cli (see DEVELOPERS.md); REDIS_SERVER and REDIS_CLI override them. */
export const REDIS_SERVER = process.env['REDIS_SERVER'] ?? '/usr/bin/redis-server';
export const REDIS_CLI = process.env['REDIS_CLI'] ?? '/usr/bin/redis-cli';

const run = promisify(execFile);
let warned = false;

/**
 * requireRedis skips the calling suite or test (loudly, once per run) when redis-server is not
 * installed, and fails it under CI=true. The Redis on 6379 is shared and never used by tests:
 * each suite starts its own with spawnRedis.
 */
export function requireRedis(context: Mocha.Context): void {
  if (redisAvailable()) return;
  if (process.env['CI'] === 'true') throw new Error(`CI=true but redis-server is not at ${REDIS_SERVER} (or redis-cli at ${REDIS_CLI})`);
  if (!warned) {
    warned = true;
    process.stderr.write(`\n  !!! No redis-server at ${REDIS_SERVER}: REDIS TESTS ARE SKIPPED. Install redis-server (Debian) or set REDIS_SERVER.\n\n`);
  }
  context.skip();
}

/** Whether redis-server and redis-cli are installed. */
export function redisAvailable(): boolean {
  return existsSync(REDIS_SERVER) && existsSync(REDIS_CLI);
}

export interface RedisServerOptions {
  /** The port to listen on; by default a free one. */
  readonly port?: number;
  /** More configuration, as redis-server arguments (`--maxmemory`, `100mb`). */
  readonly args?: readonly string[];
}

/** A redis-server of the test's own, in memory only, on 127.0.0.1. */
export interface RedisServer {
  readonly port: number;
  readonly url: string;
  readonly process: ChildProcess;
  /** Runs redis-cli against this server; resolves to its output (quoted form, as a person sees it). */
  cli(...args: string[]): Promise<string>;
  /** Stops it: SIGKILL for a crash, SIGTERM otherwise. */
  stop(signal?: NodeJS.Signals): Promise<void>;
}

/**
 * spawnRedis starts redis-server without persistence (--save "" --appendonly no) and with DEBUG
 * allowed (for DEBUG SLEEP), and waits until it accepts connections.
 */
export async function spawnRedis(options: RedisServerOptions = {}): Promise<RedisServer> {
  for (let attempt = 0; ; attempt++) {
    const port = options.port ?? (await closedPort());
    try {
      return await start(port, options.args ?? []);
    } catch (error) {
      // Another process took the free port between the probe and the start: try another.
      if (options.port !== undefined || attempt >= 4 || !/Address already in use/.test((error as Error).message)) throw error;
    }
  }
}

function start(port: number, args: readonly string[]): Promise<RedisServer> {
  const dir = mkdtempSync(join(tmpdir(), 'kvcrud-redis-'));
  const child = spawn(
    REDIS_SERVER,
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--enable-debug-command', 'yes', '--dir', dir, ...args],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  const output: string[] = [];
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`redis-server did not start on port ${port} within 10 s:\n${output.join('\n')}`));
    }, 10_000);
    child.once('error', reject);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`redis-server exited (${code}) before it was ready:\n${output.join('\n')}`));
    });
    createInterface({ input: child.stderr }).on('line', (line) => output.push(line));
    createInterface({ input: child.stdout }).on('line', (line) => {
      output.push(line);
      if (!line.includes('Ready to accept connections')) return;
      clearTimeout(timer);
      child.removeAllListeners('exit');
      resolve({
        port,
        url: `redis://127.0.0.1:${port}`,
        process: child,
        cli: (...cliArgs) => redisCli(port, cliArgs),
        async stop(signal = 'SIGTERM') {
          if (child.exitCode === null && child.signalCode === null) {
            const exited = new Promise((done) => child.once('exit', done));
            child.kill(signal);
            await exited;
          }
          rmSync(dir, { recursive: true, force: true });
        },
      });
    });
  });
}

/** redis-cli against 127.0.0.1:port; binary-safe arguments, output as redis-cli prints it. */
export async function redisCli(port: number, args: readonly string[]): Promise<string> {
  // --no-raw: the quoted form a person sees at a terminal, even without one (--raw asks otherwise).
  const format = args.includes('--raw') ? [] : ['--no-raw'];
  const { stdout } = await run(REDIS_CLI, ['-h', '127.0.0.1', '-p', String(port), ...format, ...args], { encoding: 'latin1', maxBuffer: 64 * 1024 * 1024 });
  return stdout;
}

/** A local Redis Cluster of the test's own: primaries only, each slot range on one node. */
export interface RedisCluster {
  readonly nodes: readonly RedisServer[];
  /** A node's URL: what a store is given (node-redis discovers the others from it). */
  readonly url: string;
  stop(): Promise<void>;
}

/**
 * spawnRedisCluster starts `size` redis-servers with --cluster-enabled yes, joins them with
 * `redis-cli --cluster create` (no replicas) and waits until every node reports cluster_state:ok.
 */
export async function spawnRedisCluster(size = 3): Promise<RedisCluster> {
  const nodes: RedisServer[] = [];
  try {
    for (let i = 0; i < size; i++) {
      const port = await clusterPort();
      nodes.push(await spawnRedis({ port, args: ['--cluster-enabled', 'yes', '--cluster-config-file', `nodes-${port}.conf`, '--cluster-node-timeout', '5000'] }));
    }
    await run(REDIS_CLI, ['--cluster', 'create', ...nodes.map((node) => `127.0.0.1:${node.port}`), '--cluster-replicas', '0', '--cluster-yes']);
    const started = Date.now();
    for (const node of nodes) {
      while (!(await node.cli('CLUSTER', 'INFO')).includes('cluster_state:ok')) {
        if (Date.now() - started > 20_000) throw new Error(`the cluster is not ok after 20 s: ${await node.cli('CLUSTER', 'INFO')}`);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    }
  } catch (error) {
    await Promise.all(nodes.map((node) => node.stop('SIGKILL')));
    throw error;
  }
  return {
    nodes,
    url: (nodes[0] as RedisServer).url,
    stop: async () => {
      await Promise.all(nodes.map((node) => node.stop('SIGKILL')));
    },
  };
}

/** A free port whose cluster bus port (port + 10000) is free too. */
async function clusterPort(): Promise<number> {
  for (let attempt = 0; attempt < 50; attempt++) {
    const port = 20_000 + Math.floor(Math.random() * 30_000);
    if ((await bindable(port)) && (await bindable(port + 10_000))) return port;
  }
  throw new Error('no free port pair for a cluster node');
}

function bindable(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}
