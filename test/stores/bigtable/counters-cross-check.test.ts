import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { BigtableStore } from '../../../src/store/bigtable/bigtable-store.ts';
import { isStoreError } from '../../../src/store/errors.ts';
import type { Condition, ModifyRule, Mutation, TableRef } from '../../../src/store/store.ts';
import { cbt, cbtBytes } from '../../support/cbt.ts';
import { emulatorHost } from '../../support/emulator.ts';
import { TEST_PROJECT } from '../../support/test-app.ts';

/**
 * Counters and conditions as Google's own cbt CLI sees them: a counter the store increments is
 * Bigtable's 64-bit big-endian integer, byte for byte, which cbt also decodes as an INT64; a
 * condition is decided on cells cbt wrote, and what the branch wrote is what cbt reads back.
 */
describe('Bigtable store: counters and conditions, cross-checked with cbt', () => {
  let host: string;
  let instance: string;
  let store: BigtableStore;
  let ref: TableRef;
  let formats: string;

  const call = () => ({ deadline: Date.now() + 10_000 });
  const increment = (column: string, amount: bigint): ModifyRule => ({ type: 'increment', family: 'stats', column: Buffer.from(column), amount });
  const set = (family: string, column: string, value: string): Mutation => ({
    type: 'set',
    family,
    column: Buffer.from(column),
    value: Buffer.from(value),
    timestampMicros: BigInt(Date.now()) * 1000n,
  });
  const equals = (family: string, column: string, value: string): Condition => ({ type: 'columnEquals', family, column: Buffer.from(column), value: Buffer.from(value) });
  /** The latest value of one column as `cbt lookup` prints it, unquoted to its bytes. */
  const lookup = async (key: string, column: string, ...options: string[]) => {
    const output = await cbtBytes(host, instance, 'lookup', ref.table, key, `columns=${column}`, 'cells-per-column=1', ...options);
    return valuesIn(output);
  };

  before(async function () {
    host = emulatorHost(this);
    instance = `ctr-${randomBytes(4).toString('hex')}`;
    store = new BigtableStore({ projectId: TEST_PROJECT, instanceIds: [instance], emulatorHost: host });
    ref = { instance, table: 'counters' };
    await store.createTable(ref, [{ name: 'stats' }, { name: 'doc', maxVersions: 1 }], call());
    // cbt's format file: every column of `stats` is a big-endian INT64.
    formats = await mkdtemp(join(tmpdir(), 'cbt-formats-'));
    await writeFile(join(formats, 'int64.yaml'), 'families:\n  stats:\n    default_encoding: BigEndian\n    default_type: INT64\n');
  });
  after(async () => {
    await store?.close();
    if (formats !== undefined) await rm(formats, { recursive: true, force: true });
  });

  it('cbt reads a counter incremented through the store as its 8 big-endian bytes, and decodes it as an INT64', async () => {
    await store.readModifyWriteRow(ref, Buffer.from('page'), [increment('views', 41n)], call());
    await store.readModifyWriteRow(ref, Buffer.from('page'), [increment('views', 1n)], call());
    expect(await lookup('page', 'stats:views')).to.deep.equal([Buffer.from([0, 0, 0, 0, 0, 0, 0, 42])]);

    await store.readModifyWriteRow(ref, Buffer.from('page'), [increment('views', -100n)], call());
    expect(await lookup('page', 'stats:views')).to.deep.equal([Buffer.from([0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xc6])]);
    const decoded = await cbt(host, instance, 'lookup', ref.table, 'page', 'columns=stats:views', `format-file=${join(formats, 'int64.yaml')}`);
    expect(decoded.split('\n').map((line) => line.trim())).to.include('-58');

    // Wrapping past int64's largest value, as Bigtable does.
    await store.readModifyWriteRow(ref, Buffer.from('wrap'), [increment('n', 2n ** 63n - 1n), increment('n', 1n)], call());
    const wrapped = await cbt(host, instance, 'lookup', ref.table, 'wrap', 'columns=stats:n', `format-file=${join(formats, 'int64.yaml')}`);
    expect(wrapped.split('\n').map((line) => line.trim())).to.include('-9223372036854775808');
  });

  it('decides a condition on what cbt wrote, and cbt reads what the branch taken wrote', async () => {
    await cbt(host, instance, 'set', ref.table, 'post', 'doc:state=draft');
    expect(await store.checkAndMutateRow(ref, Buffer.from('post'), { conditions: [equals('doc', 'state', 'draft')], mutations: [set('doc', 'state', 'published')], otherwise: [] }, call())).to.equal(
      true,
    );
    expect((await lookup('post', 'doc:state')).map(String)).to.deep.equal(['published']);

    // cbt writes it back to draft; a condition on the value the store wrote no longer holds.
    await cbt(host, instance, 'set', ref.table, 'post', 'doc:state=draft');
    expect(
      await store.checkAndMutateRow(
        ref,
        Buffer.from('post'),
        { conditions: [equals('doc', 'state', 'published')], mutations: [set('doc', 'state', 'archived')], otherwise: [set('doc', 'conflicts', '1')] },
        call(),
      ),
    ).to.equal(false);
    expect((await lookup('post', 'doc:state')).map(String)).to.deep.equal(['draft']);
    expect((await lookup('post', 'doc:conflicts')).map(String)).to.deep.equal(['1']);
  });

  it('refuses to increment a value cbt wrote that is not 8 bytes, and cbt sees nothing written', async () => {
    await cbt(host, instance, 'set', ref.table, 'text', 'stats:label=hello');
    const error = await store.readModifyWriteRow(ref, Buffer.from('text'), [increment('other', 1n), increment('label', 1n)], call()).then(
      () => undefined,
      (failure: unknown) => failure,
    );
    expect(isStoreError(error, 'FAILED_PRECONDITION') && error.reason).to.equal('NOT_A_COUNTER');
    const output = (await cbtBytes(host, instance, 'lookup', ref.table, 'text')).toString('latin1');
    expect(output).to.contain('stats:label').and.contain('"hello"').and.not.contain('stats:other');
  });
});

/** The quoted values in cbt's output (Go's %q of the bytes), each unquoted back to its bytes. */
function valuesIn(output: Buffer): Buffer[] {
  const values: Buffer[] = [];
  const text = output.toString('latin1');
  for (const line of text.split('\n')) {
    const match = /^\s+"(.*)"$/s.exec(line);
    if (match?.[1] !== undefined) values.push(unquote(match[1]));
  }
  return values;
}

const ESCAPES: Record<string, number> = { a: 7, b: 8, f: 12, n: 10, r: 13, t: 9, v: 11, '\\': 92, '"': 34, "'": 39 };

/** Go's strconv.Quote undone, for the escapes it writes for bytes: \xHH and the single-letter ones. */
function unquote(quoted: string): Buffer {
  const bytes: number[] = [];
  for (let i = 0; i < quoted.length; i++) {
    const char = quoted[i] as string;
    if (char !== '\\') {
      bytes.push(char.charCodeAt(0));
      continue;
    }
    const next = quoted[i + 1] as string;
    if (next === 'x') {
      bytes.push(Number.parseInt(quoted.slice(i + 2, i + 4), 16));
      i += 3;
    } else if (next in ESCAPES) {
      bytes.push(ESCAPES[next] as number);
      i += 1;
    } else {
      throw new Error(`unexpected escape \\${next} in cbt output`);
    }
  }
  return Buffer.from(bytes);
}
