import { expect } from 'chai';
import { mergeRowChunks } from '../../src/store/bigtable/row-chunks.ts';

const bytes = (text: string) => Buffer.from(text);

describe('mergeRowChunks', () => {
  it('returns null when no row was sent', () => {
    expect(mergeRowChunks([])).to.equal(null);
  });

  it('carries family and qualifier over to the chunks that omit them', () => {
    const cells = mergeRowChunks([
      { rowKey: bytes('r'), familyName: { value: 'f' }, qualifier: { value: bytes('a') }, timestampMicros: '2000', value: bytes('1') },
      { qualifier: { value: bytes('b') }, timestampMicros: '1000', value: bytes('2') },
      { familyName: { value: 'g' }, qualifier: { value: Buffer.from([0xff]) }, timestampMicros: 3000, value: bytes('3'), commitRow: true },
    ]);
    expect(cells?.map((cell) => [cell.family, cell.qualifier.toString('hex'), cell.value.toString(), cell.timestampMicros])).to.deep.equal([
      ['f', '61', '1', 2000n],
      ['f', '62', '2', 1000n],
      ['g', 'ff', '3', 3000n],
    ]);
  });

  it('joins a value split over several chunks', () => {
    const cells = mergeRowChunks([
      { rowKey: bytes('r'), familyName: { value: 'f' }, qualifier: { value: bytes('q') }, timestampMicros: '5', value: bytes('hel'), valueSize: 10 },
      { value: bytes('lo wo'), valueSize: 10 },
      { value: bytes('rld'), commitRow: true },
    ]);
    expect(cells).to.have.length(1);
    expect(cells?.[0]?.value.toString()).to.equal('hello world');
    expect(cells?.[0]?.timestampMicros).to.equal(5n);
  });

  it('discards what came before a reset', () => {
    const cells = mergeRowChunks([
      { rowKey: bytes('r'), familyName: { value: 'f' }, qualifier: { value: bytes('old') }, value: bytes('x') },
      { resetRow: true },
      { rowKey: bytes('r'), familyName: { value: 'f' }, qualifier: { value: bytes('new') }, value: bytes('y'), commitRow: true },
    ]);
    expect(cells?.map((cell) => cell.qualifier.toString())).to.deep.equal(['new']);
  });

  it('accepts bytes as base64 strings and typed arrays, and 64-bit timestamps beyond 2^53', () => {
    const cells = mergeRowChunks([
      {
        rowKey: 'cg==',
        familyName: { value: 'f' },
        qualifier: { value: new Uint8Array([1, 2]) },
        timestampMicros: { toString: () => '9223372036854775000' } as never,
        value: 'AAE=',
        commitRow: true,
      },
    ]);
    expect(cells?.[0]?.qualifier).to.deep.equal(Buffer.from([1, 2]));
    expect(cells?.[0]?.value).to.deep.equal(Buffer.from([0, 1]));
    expect(cells?.[0]?.timestampMicros).to.equal(9223372036854775000n);
  });

  it('rejects a stream that ends in the middle of a row', () => {
    expect(() => mergeRowChunks([{ familyName: { value: 'f' }, qualifier: { value: bytes('q') }, value: bytes('x') }])).to.throw(/ended in the middle/);
  });

  it('rejects a cell without a family or qualifier', () => {
    expect(() => mergeRowChunks([{ value: bytes('x'), commitRow: true }])).to.throw(/without family or qualifier/);
    expect(() => mergeRowChunks([{ familyName: { value: 'f' }, value: bytes('x'), commitRow: true }])).to.throw(/without family or qualifier/);
  });

  it('rejects a second row', () => {
    const chunk = { familyName: { value: 'f' }, qualifier: { value: bytes('q') }, value: bytes('x'), commitRow: true };
    expect(() => mergeRowChunks([chunk, { ...chunk, rowKey: bytes('other') }])).to.throw(/more than the one row/);
  });
});
