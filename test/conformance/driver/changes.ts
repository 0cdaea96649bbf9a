import { expect } from 'chai';
import type { ChangeEvent, ChangeStart, DataStore, Mutation, TableRef } from '../../../src/store/store.ts';
import { FEED_PROGRESS_MS } from '../../../src/store/store.ts';
import type { DriverHarnessFactory } from '../../support/driver-harness.ts';
import { call, deleteColumn, deleteFamily, deleteRow, expectStoreError, requireCapability, set, show, showCell, useFixture } from './fixtures.ts';

/** A change as `key: mutation; mutation`, readable in a diff. */
function showChange(event: ChangeEvent): string {
  if (event.type !== 'change') return `progress ${event.position}`;
  const mutations = event.change.mutations.map((mutation) => showMutation(mutation));
  return `${show(event.change.key)}: ${mutations.join('; ')}`;
}

function showMutation(mutation: Mutation): string {
  switch (mutation.type) {
    case 'set':
      return `set ${showCell(mutation)}`;
    case 'deleteColumn':
      return `deleteColumn ${mutation.family}:${show(mutation.column)}`;
    case 'deleteFamily':
      return `deleteFamily ${mutation.family}`;
    case 'deleteRow':
      return 'deleteRow';
  }
}

/**
 * A feed being read in the background: its events as they come, until stopped. `until` waits for
 * a number of changes.
 */
class Follower {
  readonly events: ChangeEvent[] = [];
  readonly #abort = new AbortController();
  readonly #done: Promise<unknown>;
  error: unknown;

  constructor(store: DataStore, ref: TableRef, start: ChangeStart) {
    this.#done = (async () => {
      try {
        for await (const event of store.readChanges(ref, start, { signal: this.#abort.signal })) this.events.push(event);
      } catch (error) {
        this.error = error;
      }
    })();
  }

  get changes(): string[] {
    return this.events.filter((event) => event.type === 'change').map(showChange);
  }

  /** The position of the first event: where the feed starts. */
  async started(): Promise<string> {
    await this.#wait(() => this.events.length > 0 || this.error !== undefined, 'the first event');
    if (this.error !== undefined) throw this.error;
    const first = this.events[0] as ChangeEvent;
    expect(first.type, 'the first event').to.equal('progress');
    return first.position;
  }

  async until(changes: number, what = `${changes} changes`): Promise<string[]> {
    await this.#wait(() => this.changes.length >= changes || this.error !== undefined, what);
    return this.changes;
  }

  /** Waits for the feed to end on its own (an error), within `ms`. */
  async ended(ms = 30_000): Promise<unknown> {
    await this.#wait(() => this.error !== undefined, 'the end of the feed', ms);
    return this.error;
  }

  async stop(): Promise<void> {
    this.#abort.abort();
    await this.#done;
  }

  async #wait(ready: () => boolean, what: string, ms = 30_000): Promise<void> {
    const until = Date.now() + ms;
    while (!ready()) {
      if (Date.now() > until) throw new Error(`timed out waiting for ${what}; saw ${JSON.stringify(this.changes)} ${String(this.error)}`);
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  }
}

/** readChanges: every committed change after the start, in order per row, resumable at any position. */
export function changeFeedCases(factory: DriverHarnessFactory): void {
  describe('readChanges', () => {
    const fixture = useFixture(factory);
    let ref: TableRef;
    const followers: Follower[] = [];
    const follow = (start: ChangeStart, table = ref) => {
      const follower = new Follower(fixture().store, table, start);
      followers.push(follower);
      return follower;
    };

    beforeEach(async function () {
      requireCapability(this, fixture(), 'changeFeed');
      const { table, keepAll } = fixture();
      ref = await table([keepAll('a'), keepAll('b')]);
    });

    afterEach(async () => {
      await Promise.all(followers.splice(0).map((follower) => follower.stop()));
    });

    it('yields every change committed after the start, as applied, starting with a progress event', async function () {
      this.timeout(60_000);
      const { store, at } = fixture();
      await store.mutateRow(ref, Buffer.from('before'), [set('a', 'x', 'v', at(1))], call());
      const feed = follow({ type: 'now' });
      await feed.started();
      const key = Buffer.from([0, 0xff, 0x61]);
      await store.mutateRow(ref, key, [set('a', 'x', 'v1', at(1)), set('b', Buffer.from([0xfe]), Buffer.from([0, 1]), at(2))], call());
      await store.mutateRow(ref, key, [deleteColumn('a', 'x'), deleteFamily('b')], call());
      await store.mutateRow(ref, key, [deleteRow], call());
      expect(await feed.until(3)).to.deep.equal([
        `\\x00\\xffa: set a:x@${at(1)}=v1; set b:\\xfe@${at(2)}=\\x00\\x01`,
        '\\x00\\xffa: deleteColumn a:x; deleteFamily b',
        '\\x00\\xffa: deleteRow',
      ]);
      for (const event of feed.events) expect(event.position, 'a position is printable ASCII').to.match(/^[\x20-\x7e]{1,4096}$/);
    });

    it('yields each entry of a mutateRows, the branch a checkAndMutateRow applied and the sets of a readModifyWriteRow', async function () {
      this.timeout(60_000);
      const { store, at } = fixture();
      const feed = follow({ type: 'now' });
      await feed.started();
      await store.mutateRows(ref, [{ key: Buffer.from('r1'), mutations: [set('a', 'x', '1', at(1))] }, { key: Buffer.from('r2'), mutations: [set('a', 'x', '2', at(1))] }], call());
      const expected = ['r1: set a:x@' + String(at(1)) + '=1', 'r2: set a:x@' + String(at(1)) + '=2'];
      if (store.capabilities.checkAndMutate) {
        await store.checkAndMutateRow(ref, Buffer.from('r1'), { conditions: [{ type: 'rowExists', exists: true }], mutations: [set('b', 'y', 'yes', at(2))], otherwise: [] }, call());
        // A branch with nothing to apply is no change.
        await store.checkAndMutateRow(ref, Buffer.from('r3'), { conditions: [{ type: 'rowExists', exists: true }], mutations: [set('b', 'y', 'no', at(2))], otherwise: [] }, call());
        expected.push(`r1: set b:y@${at(2)}=yes`);
      }
      if (store.capabilities.readModifyWrite) {
        const row = await store.readModifyWriteRow(ref, Buffer.from('r2'), [{ type: 'append', family: 'a', column: Buffer.from('log'), value: Buffer.from('+') }], call());
        expected.push(`r2: set a:log@${row.cells[0]?.timestampMicros}=+`);
      }
      const changes = await feed.until(expected.length);
      // Rows r1 and r2 may come in either order where the store does not order across rows.
      expect([...changes].sort()).to.deep.equal([...expected].sort());
      expect(changes.filter((change) => change.startsWith('r1'))).to.deep.equal(expected.filter((change) => change.startsWith('r1')));
    });

    it('resumes after any position it yielded: nothing missed, nothing before it again', async function () {
      this.timeout(90_000);
      const { store, at } = fixture();
      const first = follow({ type: 'now' });
      await first.started();
      const writes = 12;
      for (let i = 0; i < writes; i += 1) await store.mutateRow(ref, Buffer.from(`k${i % 3}`), [set('a', 'n', String(i), at(i + 1))], call());
      const all = await first.until(writes);
      const changeEvents = first.events.filter((event) => event.type === 'change');
      for (const cut of [0, 5, writes - 1]) {
        const resumed = follow({ type: 'after', position: (changeEvents[cut] as ChangeEvent).position });
        await resumed.started();
        if (cut === writes - 1) {
          await store.mutateRow(ref, Buffer.from('last'), [set('a', 'n', 'end', at(1))], call());
          expect(await resumed.until(1)).to.deep.equal([`last: set a:n@${at(1)}=end`]);
        } else {
          expect(await resumed.until(writes - cut - 1)).to.deep.equal(all.slice(cut + 1));
        }
      }
      // From the first event's position: everything.
      const whole = follow({ type: 'after', position: (first.events[0] as ChangeEvent).position });
      await whole.started();
      expect((await whole.until(writes + 1)).slice(0, writes)).to.deep.equal(all);
    });

    it('keeps each row\'s changes in commit order under racing writers', async function () {
      this.timeout(90_000);
      const { store, at } = fixture();
      const feed = follow({ type: 'now' });
      await feed.started();
      const rows = 4;
      const perRow = 10;
      await Promise.all(
        Array.from({ length: rows }, async (_, r) => {
          for (let i = 0; i < perRow; i += 1) await store.mutateRow(ref, Buffer.from(`row${r}`), [set('a', 'n', String(i), at(i + 1))], call());
        }),
      );
      const changes = await feed.until(rows * perRow);
      for (let r = 0; r < rows; r += 1) {
        expect(changes.filter((change) => change.startsWith(`row${r}:`))).to.deep.equal(Array.from({ length: perRow }, (_, i) => `row${r}: set a:n@${at(i + 1)}=${i}`));
      }
    });

    it('starts at a time within the retention with `since`, including changes committed at or after it', async function () {
      this.timeout(60_000);
      const { store, at } = fixture();
      await store.mutateRow(ref, Buffer.from('old'), [set('a', 'x', 'old', at(1))], call());
      await new Promise((resolve) => setTimeout(resolve, 20));
      const since = BigInt(Date.now()) * 1000n;
      await new Promise((resolve) => setTimeout(resolve, 20));
      await store.mutateRow(ref, Buffer.from('new'), [set('a', 'x', 'new', at(1))], call());
      const feed = follow({ type: 'since', sinceMicros: since });
      await feed.started();
      expect(await feed.until(1)).to.deep.equal([`new: set a:x@${at(1)}=new`]);
    });

    it('fails with OUT_OF_RANGE for a start older than the retention', async () => {
      const { store } = fixture();
      const since = BigInt(Date.now() - (store.limits.changeRetentionSeconds + 3600) * 1000) * 1000n;
      const feed = follow({ type: 'since', sinceMicros: since });
      expectStoreError(await feed.ended(), { code: 'OUT_OF_RANGE' });
    });

    it('fails with INVALID_ARGUMENT for a position the store never made', async () => {
      const feed = follow({ type: 'after', position: 'not-a-position-of-this-store~' });
      expectStoreError(await feed.ended(), { code: 'INVALID_ARGUMENT' });
    });

    it('fails with NOT_FOUND table for a missing table, and ends with it when the table is deleted, after its last changes', async function () {
      this.timeout(60_000);
      const { store, at, instance } = fixture();
      const missing = follow({ type: 'now' }, { instance, table: 'no-such-table' });
      expectStoreError(await missing.ended(), { code: 'NOT_FOUND', resource: 'table', name: 'no-such-table' });

      const feed = follow({ type: 'now' });
      await feed.started();
      await store.mutateRow(ref, Buffer.from('last'), [set('a', 'x', 'v', at(1))], call());
      await feed.until(1);
      await store.deleteTable(ref, call());
      expectStoreError(await feed.ended(), { code: 'NOT_FOUND', resource: 'table', name: ref.table });
      expect(feed.changes).to.deep.equal([`last: set a:x@${at(1)}=v`]);
    });

    it('yields progress while idle, and stops promptly when its signal is aborted', async function () {
      this.timeout(60_000);
      const feed = follow({ type: 'now' });
      await feed.started();
      const started = Date.now();
      while (feed.events.length < 2 && Date.now() - started < FEED_PROGRESS_MS * 3) await new Promise((resolve) => setTimeout(resolve, 50));
      expect(feed.events.length, 'progress events while idle').to.be.greaterThanOrEqual(2);
      const stopping = Date.now();
      await feed.stop();
      expect(Date.now() - stopping, 'ms to stop').to.be.lessThan(5000);
      expect(feed.error).to.equal(undefined);
    });
  });
}
