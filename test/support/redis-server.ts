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
  /** Kills it (SIGKILL), keeping its directory, so that restartEmpty can bring it back. */
  crash(): Promise<void>;
  /**
   * Kills it (SIGKILL) if it runs, and starts it again on the same port and directory: it comes
   * back empty, having no persistence, and a cluster node keeps its nodes.conf, so its node ID
   * and slots.
   */
  restartEmpty(): Promise<void>;
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

async function start(port: number, args: readonly string[]): Promise<RedisServer> {
  const dir = mkdtempSync(join(tmpdir(), 'kvcrud-redis-'));
  let child: ChildProcess;
  try {
    child = await launch(port, args, dir);
  } catch (error) {
    rmSync(dir, { recursive: true, force: true });
    throw error;
  }
  const kill = async (signal: NodeJS.Signals) => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((done) => child.once('exit', done));
    child.kill(signal);
    await exited;
  };
  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    get process() {
      return child;
    },
    cli: (...cliArgs) => redisCli(port, cliArgs),
    crash: () => kill('SIGKILL'),
    async restartEmpty() {
      await kill('SIGKILL');
      child = await launch(port, args, dir);
    },
    async stop(signal = 'SIGTERM') {
      await kill(signal);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Starts redis-server in `dir` and resolves once it accepts connections. */
function launch(port: number, args: readonly string[], dir: string): Promise<ChildProcess> {
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
      resolve(child);
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
  /** The node serving `key`'s slot. */
  nodeFor(key: string): Promise<RedisServer>;
  /** Resolves when every node reports cluster_state:ok (after a node was restarted, say). */
  healthy(): Promise<void>;
  stop(): Promise<void>;
}

export interface RedisClusterOptions {
  /** cluster-node-timeout: how long a node may be unreachable before the others mark it failed. */
  readonly nodeTimeoutMs?: number;
}

/**
 * spawnRedisCluster starts `size` redis-servers with --cluster-enabled yes, joins them with
 * `redis-cli --cluster create` (no replicas) and waits until every node reports cluster_state:ok.
 */
export async function spawnRedisCluster(size = 3, options: RedisClusterOptions = {}): Promise<RedisCluster> {
  const nodes: RedisServer[] = [];
  const healthy = async () => {
    const started = Date.now();
    for (const node of nodes) {
      for (;;) {
        const info = await node.cli('CLUSTER', 'INFO').catch((error: unknown) => String(error));
        if (info.includes('cluster_state:ok')) break;
        if (Date.now() - started > 20_000) throw new Error(`the cluster is not ok after 20 s: ${info}`);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    }
  };
  try {
    for (let i = 0; i < size; i++) {
      const port = await clusterPort();
      const args = ['--cluster-enabled', 'yes', '--cluster-config-file', `nodes-${port}.conf`, '--cluster-node-timeout', String(options.nodeTimeoutMs ?? 5000)];
      nodes.push(await spawnRedis({ port, args }));
    }
    await run(REDIS_CLI, ['--cluster', 'create', ...nodes.map((node) => `127.0.0.1:${node.port}`), '--cluster-replicas', '0', '--cluster-yes']);
    await healthy();
  } catch (error) {
    await Promise.all(nodes.map((node) => node.stop('SIGKILL')));
    throw error;
  }
  const first = nodes[0] as RedisServer;
  return {
    nodes,
    url: first.url,
    async nodeFor(key) {
      const asked = nodes.find((node) => node.process.exitCode === null && node.process.signalCode === null) ?? first;
      const slot = Number((await asked.cli('--raw', 'CLUSTER', 'KEYSLOT', key)).trim());
      for (const line of (await asked.cli('--raw', 'CLUSTER', 'NODES')).trim().split('\n')) {
        const [, address = '', , , , , , , ...ranges] = line.split(' ');
        for (const range of ranges) {
          const [from = -1, to = from] = range.split('-').map(Number);
          const port = Number(address.split(/[:@]/)[1]);
          const node = nodes.find((candidate) => candidate.port === port);
          if (slot >= from && slot <= to && node !== undefined) return node;
        }
      }
      throw new Error(`no node serves slot ${slot}`);
    },
    healthy,
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
