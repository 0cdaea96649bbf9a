import { expect } from 'chai';
import type { protos } from '@google-cloud/bigtable';
import { type MergedRow, RowMerger, sortCells, sortCellsInSlices } from '../../src/store/bigtable/row-chunks.ts';
import { Turns } from '../../src/lib/turns.ts';

type CellChunk = protos.google.bigtable.v2.ReadRowsResponse.ICellChunk;

const bytes = (text: string) => Buffer.from(text);

/** Feeds every chunk to one merger and returns the rows it committed; checks the stream's end. */
function merge(chunks: CellChunk[]): MergedRow[] {
  const merger = new RowMerger();
  const rows = chunks.map((chunk) => merger.push(chunk)).filter((row) => row !== undefined);
  merger.end();
  return rows;
}

describe('RowMerger', () => {
  it('commits no row for an empty stream', () => {
    expect(merge([])).to.deep.equal([]);
  });

  it('carries family and qualifier over to the chunks that omit them', () => {
    const [row] = merge([
      { rowKey: bytes('r'), familyName: { value: 'f' }, qualifier: { value: bytes('a') }, timestampMicros: '2000', value: bytes('1') },
      { qualifier: { value: bytes('b') }, timestampMicros: '1000', value: bytes('2') },
      { familyName: { value: 'g' }, qualifier: { value: Buffer.from([0xff]) }, timestampMicros: 3000, value: bytes('3'), commitRow: true },
    ]);
    expect(row?.key.toString()).to.equal('r');
    expect(row?.cells.map((cell) => [cell.family, cell.column.toString('hex'), cell.value.toString(), cell.timestampMicros])).to.deep.equal([
      ['f', '61', '1', 2000n],
      ['f', '62', '2', 1000n],
      ['g', 'ff', '3', 3000n],
    ]);
  });

  it('commits several rows of one stream, each with its own key', () => {
    const rows = merge([
      { rowKey: bytes('a'), familyName: { value: 'f' }, qualifier: { value: bytes('q') }, value: bytes('1'), commitRow: true },
      { rowKey: bytes('b'), familyName: { value: 'f' }, qualifier: { value: bytes('q') }, value: bytes('2') },
      { qualifier: { value: bytes('r') }, value: bytes('3'), commitRow: true },
    ]);
    expect(rows.map((row) => [row.key.toString(), row.cells.map((cell) => cell.value.toString())])).to.deep.equal([
      ['a', ['1']],
      ['b', ['2', '3']],
    ]);
  });

  it('joins a value split over several chunks', () => {
    const [row] = merge([
      { rowKey: bytes('r'), familyName: { value: 'f' }, qualifier: { value: bytes('q') }, timestampMicros: '5', value: bytes('hel'), valueSize: 10 },
      { value: bytes('lo wo'), valueSize: 10 },
      { value: bytes('rld'), commitRow: true },
    ]);
    expect(row?.cells).to.have.length(1);
    expect(row?.cells[0]?.value.toString()).to.equal('hello world');
    expect(row?.cells[0]?.timestampMicros).to.equal(5n);
  });

  it('discards what came before a reset', () => {
    const [row] = merge([
      { rowKey: bytes('r'), familyName: { value: 'f' }, qualifier: { value: bytes('old') }, value: bytes('x') },
      { resetRow: true },
      { rowKey: bytes('r'), familyName: { value: 'f' }, qualifier: { value: bytes('new') }, value: bytes('y'), commitRow: true },
    ]);
    expect(row?.cells.map((cell) => cell.column.toString())).to.deep.equal(['new']);
  });

  it('accepts bytes as base64 strings and typed arrays, and 64-bit timestamps beyond 2^53', () => {
    const [row] = merge([
      {
        rowKey: 'cg==',
        familyName: { value: 'f' },
        qualifier: { value: new Uint8Array([1, 2]) },
        timestampMicros: { toString: () => '9223372036854775000' } as never,
        value: 'AAE=',
        commitRow: true,
      },
    ]);
    expect(row?.key).to.deep.equal(Buffer.from('r'));
    expect(row?.cells[0]?.column).to.deep.equal(Buffer.from([1, 2]));
    expect(row?.cells[0]?.value).to.deep.equal(Buffer.from([0, 1]));
    expect(row?.cells[0]?.timestampMicros).to.equal(9223372036854775000n);
  });

  it('rejects a stream that ends in the middle of a row', () => {
    expect(() => merge([{ rowKey: bytes('r'), familyName: { value: 'f' }, qualifier: { value: bytes('q') }, value: bytes('x') }])).to.throw(/ended in the middle/);
  });

  it('rejects a cell without a row key, family or qualifier', () => {
    expect(() => merge([{ familyName: { value: 'f' }, qualifier: { value: bytes('q') }, value: bytes('x'), commitRow: true }])).to.throw(/without a row key/);
    expect(() => merge([{ rowKey: bytes('r'), value: bytes('x'), commitRow: true }])).to.throw(/without family or qualifier/);
    expect(() => merge([{ rowKey: bytes('r'), familyName: { value: 'f' }, value: bytes('x'), commitRow: true }])).to.throw(/without family or qualifier/);
  });

  it('rejects a new row key before the row is committed', () => {
    const chunk = { familyName: { value: 'f' }, qualifier: { value: bytes('q') }, value: bytes('x') };
    expect(() => merge([{ ...chunk, rowKey: bytes('a') }, { ...chunk, rowKey: bytes('b'), commitRow: true }])).to.throw(/inside another/);
  });
});

describe('sortCells', () => {
  it('orders by family name, then column bytes, then newest first', () => {
    const cell = (family: string, column: number[], timestampMicros: bigint) => ({ family, column: Buffer.from(column), value: Buffer.alloc(0), timestampMicros });
    const sorted = sortCells([cell('g', [1], 1n), cell('f', [0xff], 1n), cell('f', [0x01], 1n), cell('f', [0x01], 3n)]);
    expect(sorted.map((c) => `${c.family}:${c.column.toString('hex')}@${c.timestampMicros}`)).to.deep.equal(['f:01@3', 'f:01@1', 'f:ff@1', 'g:01@1']);
  });
});

describe('sortCellsInSlices', () => {
  const cell = (family: string, column: string, timestampMicros: bigint) => ({ family, column: Buffer.from(column), value: Buffer.alloc(0), timestampMicros });
  const label = (c: { family: string; column: Buffer; timestampMicros: bigint }) => `${c.family}:${c.column.toString()}@${c.timestampMicros}`;
  // Wide enough that the check pauses between slices.
  const columns = Array.from({ length: 3000 }, (_, i) => `c${String(i).padStart(5, '0')}`);

  it('orders the families of a row by name and keeps each family in stream order', async () => {
    const stream = ['z', 'a', 'm'].flatMap((family) => columns.flatMap((column) => [cell(family, column, 2n), cell(family, column, 1n)]));
    const sorted = await sortCellsInSlices([...stream], new Turns());
    expect(sorted.map(label)).to.deep.equal(sortCells([...stream]).map(label));
    expect(sorted[0]?.family).to.equal('a');
  });

  it('sorts the whole row when a family comes out of contract order, or in two runs', async () => {
    const wide = columns.map((column) => cell('f', column, 1n));
    for (const stream of [[...wide, cell('f', 'a', 1n)], [...wide, cell('e', 'b', 1n), cell('f', 'a', 1n)]]) {
      expect((await sortCellsInSlices([...stream], new Turns())).map(label)).to.deep.equal(sortCells([...stream]).map(label));
    }
  });
});
