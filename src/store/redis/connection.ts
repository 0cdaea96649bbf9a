import { readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import type { Logger } from 'pino';
import calculateSlot from 'cluster-key-slot';
import { type RedisArgument, type RedisClientOptions, RESP_TYPES, createClient, createCluster } from 'redis';
import { StoreError } from '../errors.ts';
import type { Script } from './scripts.ts';

/** How a Redis store reaches its server (see RedisSettings in driver.ts). */
export interface ConnectionOptions {
  readonly url: string;
  /** A Redis Cluster (Memorystore for Redis Cluster): `url` is one node or the discovery endpoint. */
  readonly cluster?: boolean;
  /** A file holding the AUTH string (password); read again on every (re)connection, so a rotated one is picked up. */
  readonly authStringFile?: string;
  /** A PEM file of the CA that signed the server's certificate (rediss:// only). */
  readonly caFile?: string;
  readonly logger: Logger;
}

/**
 * RedisConnection is how a Redis store talks to Redis: one connection to a server, or one per
 * primary of a cluster. node-redis pipelines every command sent on a connection, so concurrent
 * calls share it without waiting for each other.
 */
export interface RedisConnection {
  /**
   * Pending while the first connection attempt is under way. Calls made just after start-up wait
   * for it rather than fail; once it has succeeded or failed, a call on a connection that is down
   * fails at once.
   */
  readonly firstAttempt: Promise<void> | undefined;
  /** Calls `listener` each time the connection is (re)established (in a cluster: the connection to any primary). */
  onReady(listener: () => void): void;
  /**
   * Sends one command whose first argument after the name is its key (the key that routes it in
   * a cluster); replies come as Buffers, integers as numbers, nil as null.
   */
  send(args: readonly [string, RedisArgument, ...RedisArgument[]]): Promise<unknown>;
  /** Runs a script by its SHA1, loading it with EVAL when Redis does not have it (after a restart). */
  run(script: Script, keys: readonly [RedisArgument, ...RedisArgument[]], args: readonly RedisArgument[]): Promise<unknown>;
  /** Resolves when every server (every primary of a cluster) answers PING. */
  ping(): Promise<void>;
  /**
   * The keys matching a SCAN pattern, on the server or on every primary of a cluster, a page at
   * a time (1000 keys looked at per SCAN). A key may come twice, as SCAN allows.
   */
  scan(pattern: string): AsyncGenerator<Buffer[]>;
  /**
   * A connection of its own to the server (in a cluster: the primary of `key`'s slot), for a
   * blocking command, which would hold up every call pipelined behind it on the shared one.
   * UNAVAILABLE when it cannot be connected within CONNECT_TIMEOUT_MS.
   */
  openDedicated(key: string): Promise<DedicatedConnection>;
  /** Closes the connection at once; calls still waiting fail. */
  close(): void;
}

/** A connection of one caller's own; replies as RedisConnection.send's. */
export interface DedicatedConnection {
  send(args: readonly RedisArgument[]): Promise<unknown>;
  /** Closes it at once: a command waiting fails. */
  close(): void;
}

type NodeRedisClient = ReturnType<typeof createClient>;

/** Connects a duplicate of `client`, its own socket with the same options, within CONNECT_TIMEOUT_MS. */
async function connectDuplicate(client: Pick<NodeRedisClient, 'duplicate'>, errors: ErrorLog): Promise<DedicatedConnection> {
  const own = client.duplicate();
  let failure: unknown;
  own.on('error', (error: unknown) => {
    failure ??= error;
    errors.warn(error);
  });
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      own.connect(),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new StoreError('UNAVAILABLE', `redis: no connection within ${CONNECT_TIMEOUT_MS} ms`, { cause: failure })), CONNECT_TIMEOUT_MS);
      }),
    ]);
  } catch (error) {
    own.destroy();
    throw error instanceof StoreError ? error : new StoreError('UNAVAILABLE', 'redis: cannot connect', { cause: error });
  } finally {
    clearTimeout(timer);
  }
  return {
    send: (args) => own.sendCommand([...args], { typeMapping: BYTES }),
    close: () => {
      if (own.isOpen) own.destroy();
    },
  };
}

export function openConnection(options: ConnectionOptions): RedisConnection {
  return options.cluster === true ? new ClusterConnection(options) : new ServerConnection(options);
}

/** Replies as Buffers: keys, columns and values are bytes, not text. */
const BYTES = { [RESP_TYPES.BLOB_STRING]: Buffer, [RESP_TYPES.SIMPLE_STRING]: Buffer } as const;

// While Redis is down, commands fail at once (no offline queue) and the client reconnects every
// few hundred milliseconds, so the store answers UNAVAILABLE quickly and recovers within about a
// second of Redis coming back.
const RECONNECT_MAX_MS = 500;
const CONNECT_TIMEOUT_MS = 2000;
// Connection errors repeat on every reconnection attempt: log at most one per interval.
const ERROR_LOG_INTERVAL_MS = 10_000;

/** The client options every connection (to a server, or to each node of a cluster) shares. */
function clientOptions(options: ConnectionOptions): RedisClientOptions {
  return {
    RESP: 2,
    disableOfflineQueue: true,
    socket: {
      connectTimeout: CONNECT_TIMEOUT_MS,
      reconnectStrategy: (retries) => reconnectDelay(retries),
      ...(options.caFile === undefined ? {} : { tls: true as const, ca: readFileSync(options.caFile) }),
    },
    ...(options.authStringFile === undefined ? {} : { credentialsProvider: authStringProvider(options.authStringFile) }),
  };
}

function reconnectDelay(retries: number): number {
  return Math.min(50 * 2 ** Math.min(retries, 4), RECONNECT_MAX_MS) + Math.floor(Math.random() * 50);
}

function authStringProvider(path: string): NonNullable<RedisClientOptions['credentialsProvider']> {
  return {
    type: 'async-credentials-provider',
    credentials: async () => ({ password: (await readFile(path, 'utf8')).trim() }),
  };
}

class ErrorLog {
  readonly #logger: Logger;
  #last = 0;

  constructor(logger: Logger) {
    this.#logger = logger;
  }

  warn(error: unknown): void {
    const now = Date.now();
    if (now - this.#last < ERROR_LOG_INTERVAL_MS) return;
    this.#last = now;
    this.#logger.warn({ event: 'redis.error', err: error }, 'Redis connection error');
  }
}

const SCAN_COUNT = '1000';

/** SCAN from cursor 0 to the end on one server, a page of keys per call. */
async function* scanKeys(send: (args: readonly RedisArgument[]) => Promise<unknown>, pattern: string): AsyncGenerator<Buffer[]> {
  let cursor = '0';
  do {
    const [next, keys] = (await send(['SCAN', cursor, 'MATCH', pattern, 'COUNT', SCAN_COUNT])) as [Buffer, Buffer[]];
    cursor = next.toString();
    if (keys.length > 0) yield keys;
  } while (cursor !== '0');
}

async function runScript(
  send: (args: readonly RedisArgument[]) => Promise<unknown>,
  script: Script,
  keys: readonly RedisArgument[],
  args: readonly RedisArgument[],
): Promise<unknown> {
  const tail = [String(keys.length), ...keys, ...args];
  try {
    return await send(['EVALSHA', script.sha1, ...tail]);
  } catch (error) {
    if (!(error instanceof Error) || !error.message.startsWith('NOSCRIPT')) throw error;
    return send(['EVAL', script.source, ...tail]);
  }
}

/** A connection to one Redis server (Memorystore for Redis, standard or basic tier). */
class ServerConnection implements RedisConnection {
  readonly #client;
  readonly #errors: ErrorLog;
  readonly #url: string;
  #firstAttempt: Promise<void> | undefined;
  /** Set when the server turns out to be a cluster node: then every call fails with it. */
  #misconfigured: StoreError | undefined;

  constructor(options: ConnectionOptions) {
    this.#errors = new ErrorLog(options.logger);
    this.#url = options.url;
    this.#client = createClient({ ...clientOptions(options), url: options.url });
    this.#client.on('error', (error: unknown) => this.#errors.warn(error));
    this.#client.on('ready', () => {
      options.logger.info({ event: 'redis.ready' }, 'connected to Redis');
      void this.#refuseClusterNode(options.logger);
    });
    this.#firstAttempt = new Promise<void>((resolve) => {
      this.#client.once('ready', resolve);
      this.#client.once('error', resolve);
    }).then(() => {
      this.#firstAttempt = undefined;
    });
    this.#client.connect().catch((error: unknown) => this.#errors.warn(error));
  }

  get firstAttempt(): Promise<void> | undefined {
    return this.#firstAttempt;
  }

  onReady(listener: () => void): void {
    this.#client.on('ready', listener);
  }

  send(args: readonly RedisArgument[]): Promise<unknown> {
    if (this.#misconfigured !== undefined) return Promise.reject(this.#misconfigured);
    return this.#client.sendCommand(args, { typeMapping: BYTES });
  }

  run(script: Script, keys: readonly RedisArgument[], args: readonly RedisArgument[]): Promise<unknown> {
    return runScript((command) => this.send(command), script, keys, args);
  }

  async ping(): Promise<void> {
    await this.send(['PING']);
  }

  scan(pattern: string): AsyncGenerator<Buffer[]> {
    return scanKeys((args) => this.send(args), pattern);
  }

  openDedicated(): Promise<DedicatedConnection> {
    if (this.#misconfigured !== undefined) return Promise.reject(this.#misconfigured);
    return connectDuplicate(this.#client, this.#errors);
  }

  close(): void {
    if (this.#client.isOpen) this.#client.destroy();
  }

  /**
   * A cluster node answers only for its own slots, and a store would fail on every other key
   * with MOVED: say plainly what to configure instead.
   */
  async #refuseClusterNode(logger: Logger): Promise<void> {
    try {
      const info = (await this.#client.sendCommand<Buffer>(['INFO', 'cluster'], { typeMapping: BYTES })).toString();
      if (!/cluster_enabled:1/.test(info)) return;
      const message = `${this.#url} is a Redis Cluster node: set "cluster: true" for this store`;
      this.#misconfigured = new StoreError('INTERNAL', message);
      logger.error({ event: 'redis.misconfigured' }, message);
    } catch {
      // The connection dropped again: the next 'ready' checks once more.
    }
  }
}

// A cluster's topology is discovered again after this long when no node could be reached.
const DISCOVERY_RETRY_MS = 500;

/** The node-redis cluster client, as every cluster connection makes it. */
function createClusterClient(options: ConnectionOptions) {
  const defaults = clientOptions(options);
  return createCluster({
    rootNodes: [{ url: options.url }],
    defaults: { ...defaults, ...(defaults.socket === undefined ? {} : { socket: defaults.socket }) },
    RESP: 2,
    minimizeConnections: true,
  });
}

type Cluster = ReturnType<typeof createClusterClient>;
type ClusterNode = Cluster['masters'][number];

/**
 * A connection to a Redis Cluster (Memorystore for Redis Cluster): node-redis discovers the
 * primaries from `url` (any node, or the discovery endpoint), keeps a connection to each and
 * sends each command to the primary of its key's slot, following MOVED and ASK as slots move.
 *
 * Discovery needs only the node it asks: the connections to the primaries are opened after it,
 * each on its own, so that a primary that is down does not keep a process from serving the
 * tables of the others. A command for a primary whose connection has never been established
 * waits for it only until its first attempt fails (or CONNECT_TIMEOUT_MS), then fails as
 * UNAVAILABLE, as a command for a primary that dropped its connection fails at once.
 */
class ClusterConnection implements RedisConnection {
  readonly #cluster: Cluster;
  readonly #errors: ErrorLog;
  readonly #logger: Logger;
  readonly #readyListeners: Array<() => void> = [];
  /** The node clients whose every (re)connection is reported to the ready listeners. */
  readonly #watched = new WeakSet<object>();
  #firstAttempt: Promise<void> | undefined;
  #closed = false;
  /** Whether the topology has been discovered once: until then no command can be routed. */
  #discovered = false;

  constructor(options: ConnectionOptions) {
    this.#errors = new ErrorLog(options.logger);
    this.#logger = options.logger;
    this.#cluster = createClusterClient(options);
    this.#cluster.on('error', (error: unknown) => this.#errors.warn(error));
    this.#cluster.on('node-error', (error: unknown) => this.#errors.warn(error));
    // node-redis reports a node client's first connection only: its reconnections are watched here.
    this.#cluster.on('node-ready', (node: { host: string; port: number }) => {
      const client = this.#cluster.nodeByAddress.get(`${node.host}:${node.port}`)?.client;
      if (client !== undefined && !this.#watched.has(client)) {
        this.#watched.add(client);
        client.on('ready', () => this.#notifyReady());
      }
      this.#notifyReady();
    });
    this.#firstAttempt = this.#connect(true);
  }

  get firstAttempt(): Promise<void> | undefined {
    return this.#firstAttempt;
  }

  onReady(listener: () => void): void {
    this.#readyListeners.push(listener);
  }

  async send(args: readonly [string, RedisArgument, ...RedisArgument[]]): Promise<unknown> {
    await this.#reachable(args[1]);
    return this.#cluster.sendCommand(args[1], false, [...args] as RedisArgument[], { typeMapping: BYTES });
  }

  async run(script: Script, keys: readonly [RedisArgument, ...RedisArgument[]], args: readonly RedisArgument[]): Promise<unknown> {
    await this.#reachable(keys[0]);
    return runScript((command) => this.#cluster.sendCommand(keys[0], false, [...command] as RedisArgument[], { typeMapping: BYTES }), script, keys, args);
  }

  async ping(): Promise<void> {
    const masters = this.#masters();
    if (masters.length === 0) throw new StoreError('UNAVAILABLE', 'redis: the cluster has no primaries');
    await Promise.all(masters.map(async (master) => (await this.#nodeClient(master)).sendCommand(['PING'])));
  }

  async *scan(pattern: string): AsyncGenerator<Buffer[]> {
    for (const master of this.#masters()) {
      const client = await this.#nodeClient(master);
      yield* scanKeys((args) => client.sendCommand([...args] as RedisArgument[], { typeMapping: BYTES }), pattern);
    }
  }

  async openDedicated(key: string): Promise<DedicatedConnection> {
    if (!this.#discovered) throw unreachableCluster();
    const master = this.#cluster.getSlotMaster(calculateSlot(key));
    if (master === undefined) throw new StoreError('UNAVAILABLE', 'redis: no primary serves the slot');
    return connectDuplicate(await this.#nodeClient(master), this.#errors);
  }

  close(): void {
    this.#closed = true;
    if (this.#cluster.isOpen) this.#cluster.destroy();
  }

  #masters(): ClusterNode[] {
    if (!this.#discovered) throw unreachableCluster();
    return this.#cluster.masters;
  }

  /** Fails as UNAVAILABLE, soon, when the primary of `key`'s slot has never been connected to and cannot be. */
  async #reachable(key: RedisArgument): Promise<void> {
    if (!this.#discovered) throw unreachableCluster();
    const master = this.#cluster.getSlotMaster(calculateSlot(key));
    if (master !== undefined) await this.#nodeClient(master);
  }

  /** The node's client, once connected; UNAVAILABLE as soon as a first connection fails, or after CONNECT_TIMEOUT_MS. */
  async #nodeClient(node: ClusterNode): Promise<Awaited<ReturnType<Cluster['nodeClient']>>> {
    // Connected (or reconnecting, when a command fails at once): node-redis answers without waiting.
    if (node.client !== undefined && node.connectPromise === undefined) return this.#cluster.nodeClient(node);
    const connecting = this.#cluster.nodeClient(node);
    const client = node.client;
    let onError: ((error: unknown) => void) | undefined;
    let timer: NodeJS.Timeout | undefined;
    try {
      return await Promise.race([
        connecting,
        new Promise<never>((_, reject) => {
          onError = (error: unknown) => reject(new StoreError('UNAVAILABLE', `redis: cannot connect to the primary ${node.host}:${node.port}`, { cause: error }));
          client?.once('error', onError);
          timer = setTimeout(() => reject(new StoreError('UNAVAILABLE', `redis: no connection to the primary ${node.host}:${node.port} within ${CONNECT_TIMEOUT_MS} ms`)), CONNECT_TIMEOUT_MS);
        }),
      ]);
    } finally {
      clearTimeout(timer);
      if (onError !== undefined) client?.off('error', onError);
    }
  }

  /** Discovers the cluster, again and again until it answers; the first attempt resolves the promise either way. */
  async #connect(first: boolean): Promise<void> {
    try {
      await this.#cluster.connect();
      this.#discovered = true;
      this.#logger.info({ event: 'redis.ready', primaries: this.#cluster.masters.length }, 'connected to the Redis Cluster');
      // Each primary connected on its own: one that is down is retried by its client, and reported in the log.
      for (const master of this.#cluster.masters) this.#cluster.nodeClient(master).catch((error: unknown) => this.#errors.warn(error));
    } catch (error) {
      this.#errors.warn(error);
      if (!this.#closed) setTimeout(() => void this.#connect(false), DISCOVERY_RETRY_MS).unref();
    } finally {
      if (first) this.#firstAttempt = undefined;
    }
  }

  #notifyReady(): void {
    for (const listener of this.#readyListeners) listener();
  }
}

function unreachableCluster(): StoreError {
  return new StoreError('UNAVAILABLE', 'redis: no node of the cluster could be reached');
}
