import type { Logger } from 'pino';
import type { RedisConnection } from './connection.ts';
import { catalogKeys, parseReclaimMember, rowKey, tableKeys } from './keys.ts';
import { CLAIM_RECLAIM } from './scripts.ts';

/** Row hashes removed per round trip: each UNLINK and ZREM stays small, so Redis never stalls on a large table. */
export const RECLAIM_BATCH = 256;
/** Generations looked at per instance and sweep. */
const DUE_PER_SWEEP = 16;
/** How often every instance is swept, to finish what a process that died mid-reclaim left behind. */
const SWEEP_INTERVAL_MS = 60_000;

/**
 * Reclaimer removes the keys of deleted table generations (and of creations that never
 * committed) in the background, in bounded batches: first the meta key, so that every later
 * call sees the generation as gone, then the row hashes by pages of the index, then the entry in
 * the instance's reclaim set. Every step can be repeated, so a process that dies mid-reclaim
 * leaves the rest to the next sweep of any process serving that instance: on connecting to Redis,
 * after a deletion, and once a minute.
 */
export class Reclaimer {
  readonly #connection: RedisConnection;
  readonly #instances: readonly string[];
  readonly #logger: Logger;
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<void> | undefined;
  #again = false;
  #stopped = false;

  constructor(connection: RedisConnection, instances: readonly string[], logger: Logger) {
    this.#connection = connection;
    this.#instances = instances;
    this.#logger = logger;
  }

  /** Sweeps every minute, and whenever the connection is (re)established. */
  start(): void {
    this.#timer = setInterval(() => this.kick(), SWEEP_INTERVAL_MS);
    this.#timer.unref();
    this.#connection.onReady(() => this.kick());
  }

  /** Sweeps every instance soon; a sweep already running is followed by one more. */
  kick(): void {
    if (this.#stopped) return;
    if (this.#running !== undefined) {
      this.#again = true;
      return;
    }
    this.#running = this.#sweepAll().finally(() => {
      this.#running = undefined;
      if (this.#again) {
        this.#again = false;
        this.kick();
      }
    });
  }

  /** Resolves when no sweep is running (tests and close use it). */
  async idle(): Promise<void> {
    while (this.#running !== undefined) await this.#running;
  }

  /** Stops between two batches (or when the command in flight fails); what is left is finished by a later sweep. */
  async stop(): Promise<void> {
    this.#stopped = true;
    clearInterval(this.#timer);
    await this.#running;
  }

  async #sweepAll(): Promise<void> {
    for (const instance of this.#instances) {
      if (this.#stopped) return;
      try {
        await this.#sweep(instance);
      } catch (error) {
        if (this.#stopped) return;
        this.#logger.warn({ event: 'redis.reclaim.failed', instance, err: error }, 'reclaiming deleted tables failed; the next sweep retries');
      }
    }
  }

  async #sweep(instance: string): Promise<void> {
    const catalog = catalogKeys(instance);
    const due = (await this.#connection.send([
      'ZRANGE',
      catalog.reclaim,
      '-inf',
      String(Date.now()),
      'BYSCORE',
      'LIMIT',
      '0',
      String(DUE_PER_SWEEP),
    ])) as Buffer[];
    for (const member of due.map((entry) => entry.toString())) {
      const parsed = parseReclaimMember(member);
      if (parsed === undefined || this.#stopped) continue;
      const claimed = await this.#connection.run(CLAIM_RECLAIM, [catalog.tables, catalog.reclaim], [member, parsed.table, parsed.generation]);
      if (claimed !== 1) continue;
      const rows = await this.#reclaim(tableKeys(instance, parsed.table, parsed.generation));
      if (rows === undefined) return; // stopped
      await this.#connection.send(['ZREM', catalog.reclaim, member]);
      this.#logger.info({ event: 'redis.reclaimed', instance, table: parsed.table, generation: parsed.generation, rows }, 'reclaimed a deleted table');
    }
  }

  /** Removes one generation's keys; resolves to the rows removed, or undefined when stopped before the end. */
  async #reclaim(keys: ReturnType<typeof tableKeys>): Promise<number | undefined> {
    await this.#connection.send(['UNLINK', keys.meta]);
    let removed = 0;
    for (;;) {
      if (this.#stopped) return undefined;
      const members = (await this.#connection.send(['ZRANGE', keys.rows, '0', String(RECLAIM_BATCH - 1)])) as Buffer[];
      if (members.length === 0) return removed;
      const [first, ...rest] = members.map((member) => rowKey(keys, member)) as [Buffer, ...Buffer[]];
      await this.#connection.send(['UNLINK', first, ...rest]);
      await this.#connection.send(['ZREM', keys.rows, ...members]);
      removed += members.length;
    }
  }
}
