import { Readable } from 'node:stream';
import { expect } from 'chai';
import type { Database } from '@google-cloud/spanner';
import { follow } from '../../../src/store/spanner/change-feed.ts';
import type { ChangeEvent } from '../../../src/store/store.ts';

/**
 * The feed reader against scripted partitions of a change stream, for what the emulator does not
 * do: partitions that end with child partitions (a split, then a merge of two parents into one
 * child), records of other tables, and a deletion of the catalog row. The records are shaped as
 * READ_<stream> returns them (GoogleSQL), as the emulator was seen to.
 */
const TABLE = 'f'.repeat(32);
const at = (second: number) => `2026-01-01T00:00:${String(second).padStart(2, '0')}.000000000Z`;
const nanosAt = (second: number) => BigInt(Date.parse(at(second))) * 1_000_000n;

const changeRow = (second: number, key: string, value: string, table = TABLE) => ({
  data_change_record: [
    {
      commit_timestamp: at(second),
      table_name: 'kvcrud_changes',
      mod_type: 'INSERT',
      mods: [
        {
          keys: { table_id: table, row_key: Buffer.from(key).toString('base64'), committed: '9999-12-31T23:59:59Z', part: '0' },
          new_values: { changes: Buffer.from(JSON.stringify([[{ t: 'set', f: 'f', c: Buffer.from('c').toString('base64'), v: Buffer.from(value).toString('base64'), ts: '1' }]])).toString('base64') },
        },
      ],
    },
  ],
});
const heartbeat = (second: number) => ({ heartbeat_record: [{ timestamp: at(second) }] });
const split = (second: number, children: Array<{ token: string; parents: string[] }>) => ({
  child_partitions_record: [{ start_timestamp: at(second), child_partitions: children.map((child) => ({ token: child.token, parent_partition_tokens: child.parents })) }],
});
const deleted = (second: number, name: string) => ({ data_change_record: [{ commit_timestamp: at(second), table_name: 'kvcrud_tables', mod_type: 'DELETE', mods: [{ keys: { name }, new_values: {} }] }] });

/** A database whose change stream serves `script`: each partition's records, in order, then its end (unless `open`). */
function scripted(script: Record<string, { records: object[]; open?: boolean }>) {
  const started: string[] = [];
  const live = new Set<string>();
  const database = {
    createSession: () =>
      Promise.resolve([
        {
          delete: () => Promise.resolve(),
          snapshot: () => ({
            runStream: (query: { params: { token: string | null } }) => {
              const token = query.params.token ?? 'initial';
              started.push(token);
              live.add(token);
              const part = script[token] ?? { records: [] };
              const records = [...part.records];
              const stream = new Readable({
                objectMode: true,
                read() {
                  setTimeout(() => {
                    const next = records.shift();
                    if (next !== undefined) this.push({ ChangeRecord: [next] });
                    else if (part.open !== true) this.push(null);
                  }, 5);
                },
                destroy(error, callback) {
                  live.delete(token);
                  callback(error);
                },
              });
              stream.on('end', () => live.delete(token));
              return stream;
            },
          }),
        },
      ]),
  };
  return { database: database as unknown as Database, started, live };
}

describe('spanner: the change feed reader over partitions that split and merge', () => {
  it('yields changes in commit order across partitions, starts a merged child once after both parents end, and ends at the deletion', async () => {
    const { database, started, live } = scripted({
      initial: { records: [split(1, [{ token: 'A', parents: [] }, { token: 'B', parents: [] }])] },
      // A's change at 4 comes before B's at 3 in arrival order: the feed must wait for B.
      A: { records: [changeRow(4, 'a', 'from A'), changeRow(4, 'x', 'other table', 'e'.repeat(32)), heartbeat(6), split(7, [{ token: 'C', parents: ['A', 'B'] }])] },
      B: { records: [heartbeat(2), heartbeat(2), changeRow(3, 'b', 'from B'), heartbeat(6), split(7, [{ token: 'C', parents: ['A', 'B'] }])] },
      C: { records: [changeRow(8, 'c', 'from C'), deleted(9, 'tbl'), changeRow(10, 'd', 'after the deletion'), heartbeat(11)], open: true },
    });
    const events: ChangeEvent[] = [];
    let failure: (Error & { code?: string }) | undefined;
    const abort = new AbortController();
    try {
      for await (const event of follow({ database, name: 'tbl', tableId: TABLE }, { tableId: TABLE, nanos: nanosAt(1) - 1n }, abort.signal)) events.push(event);
    } catch (error) {
      failure = error as Error & { code?: string };
    }
    const changes = events.flatMap((event) => (event.type === 'change' ? [event] : []));
    expect(changes.map((event) => [event.change.key.toString(), event.change.mutations[0]?.type === 'set' ? event.change.mutations[0].value.toString() : ''])).to.deep.equal([
      ['b', 'from B'],
      ['a', 'from A'],
      ['c', 'from C'],
    ]);
    expect(changes.map((event) => event.position)).to.deep.equal([`s1.${TABLE}.${nanosAt(3)}.1`, `s1.${TABLE}.${nanosAt(4)}.1`, `s1.${TABLE}.${nanosAt(8)}.1`]);
    expect(failure?.code).to.equal('NOT_FOUND');
    expect(started).to.deep.equal(['initial', 'A', 'B', 'C']);
    expect([...live], 'queries left open').to.deep.equal([]);
  });

  it('resumes inside a commit: after the first of its changes, only the others come', async () => {
    const both = {
      data_change_record: [
        {
          ...changeRow(4, 'k1', 'one').data_change_record[0],
          mods: [...changeRow(4, 'k2', 'two').data_change_record[0]!.mods, ...changeRow(4, 'k1', 'one').data_change_record[0]!.mods],
        },
      ],
    };
    const { database, live } = scripted({
      initial: { records: [split(4, [{ token: 'A', parents: [] }])] },
      A: { records: [both, heartbeat(5)], open: true },
    });
    const abort = new AbortController();
    const seen: string[] = [];
    for await (const event of follow({ database, name: 'tbl', tableId: TABLE }, { tableId: TABLE, nanos: nanosAt(4), seen: 1 }, abort.signal)) {
      if (event.type === 'change') seen.push(event.change.key.toString());
      if (event.type === 'progress' && event.position === `s1.${TABLE}.${nanosAt(5)}`) break;
    }
    expect(seen).to.deep.equal(['k2']);
    expect([...live], 'queries left open').to.deep.equal([]);
  });
});
