import { status } from '@grpc/grpc-js';
import { expect } from 'chai';
import { checkCallable } from '../../src/store/bigtable/calls.ts';
import { toStoreError } from '../../src/store/bigtable/grpc-errors.ts';
import { type ReadRange, resumedScan } from '../../src/store/bigtable/resumed-scan.ts';
import { StoreError } from '../../src/store/errors.ts';
import type { KeyRange, Row } from '../../src/store/store.ts';

const row = (key: string): Row => ({ key: Buffer.from(key), cells: [] });
const unavailable = () => Object.assign(new Error('injected'), { code: status.UNAVAILABLE });
const fail = (error: unknown) => toStoreError(error, 'readRows', { resource: 'table', name: 't' });

async function collect(rows: AsyncIterable<Row>): Promise<{ keys: string[]; error?: unknown }> {
  const keys: string[] = [];
  try {
    for await (const each of rows) keys.push(each.key.toString());
    return { keys };
  } catch (error) {
    return { keys, error };
  }
}

/**
 * The Bigtable fault tests (test/stores/bigtable/) cover scans against the emulator; the race of
 * a timer that fires late on a busy process cannot be caused there on purpose, so here a stand-in
 * for the ReadRows call fails on cue.
 */
describe('resumedScan: a Bigtable scan resumed after transient failures', () => {
  it('resumes after the last row yielded, asking only for the rows still wanted', async () => {
    const calls: { start?: string; left: number }[] = [];
    // eslint-disable-next-line @typescript-eslint/require-await -- a stand-in for the call
    const read: ReadRange = async function* (range: KeyRange, left: number) {
      calls.push({ ...(range.start === undefined ? {} : { start: range.start.toString('hex') }), left });
      if (calls.length === 1) {
        yield row('a');
        throw unavailable();
      }
      yield row('b');
      yield row('c');
    };
    const { keys, error } = await collect(resumedScan({ range: {}, limit: 3, reverse: false }, read, { deadline: Date.now() + 5000 }, fail));
    expect(error).to.equal(undefined);
    expect(keys).to.deep.equal(['a', 'b', 'c']);
    expect(calls).to.deep.equal([{ left: 3 }, { start: Buffer.from('a\0').toString('hex'), left: 2 }]);
  });

  it('fails with the transient error when the deadline passes before a later call starts', async () => {
    let calls = 0;
    // eslint-disable-next-line @typescript-eslint/require-await -- a stand-in for the call
    const read: ReadRange = async function* () {
      calls += 1;
      if (calls === 1) {
        yield row('a');
        throw unavailable();
      }
      // The backoff found time left, but the process ran late: none is left when the call would start.
      checkCallable({ deadline: Date.now() - 1 });
    };
    const { keys, error } = await collect(resumedScan({ range: {}, limit: 10, reverse: false }, read, { deadline: Date.now() + 5000 }, fail));
    expect(calls).to.equal(2);
    expect(keys).to.deep.equal(['a']);
    expect(error).to.be.instanceOf(StoreError);
    expect((error as StoreError).code).to.equal('UNAVAILABLE');
  });

  it('fails with the transient error when the call itself runs out of time after one', async () => {
    let calls = 0;
    // eslint-disable-next-line @typescript-eslint/require-await, require-yield -- a stand-in for the call
    const read: ReadRange = async function* () {
      calls += 1;
      throw calls === 1 ? unavailable() : Object.assign(new Error('deadline'), { code: status.DEADLINE_EXCEEDED });
    };
    const { error } = await collect(resumedScan({ range: {}, limit: 10, reverse: false }, read, { deadline: Date.now() + 5000 }, fail));
    expect((error as StoreError).code).to.equal('UNAVAILABLE');
  });

  it('still reports a deadline passed before the first call: nothing failed transiently', async () => {
    // eslint-disable-next-line @typescript-eslint/require-await, require-yield -- a call that never starts
    const read: ReadRange = async function* () {
      checkCallable({ deadline: Date.now() - 1 });
    };
    const { error } = await collect(resumedScan({ range: {}, limit: 10, reverse: false }, read, { deadline: Date.now() + 5000 }, fail));
    expect((error as StoreError).code).to.equal('DEADLINE_EXCEEDED');
  });

  it('passes other failures to fail at once, without another call', async () => {
    let calls = 0;
    // eslint-disable-next-line @typescript-eslint/require-await, require-yield -- a stand-in for the call
    const read: ReadRange = async function* () {
      calls += 1;
      throw Object.assign(new Error('no such table'), { code: status.NOT_FOUND });
    };
    const { error } = await collect(resumedScan({ range: {}, limit: 10, reverse: false }, read, { deadline: Date.now() + 5000 }, fail));
    expect(calls).to.equal(1);
    expect((error as StoreError).code).to.equal('NOT_FOUND');
  });
});
