import { expect } from 'chai';
import { parseQuery } from '../../src/http/validation/query.ts';
import { ApiError } from '../../src/service/errors.ts';

describe('parseQuery', () => {
  it('decodes percent-encoding and + as space', () => {
    expect(parseQuery('tableName=t&id=a%20b+c%2Bd%F0%9F%98%80')).to.deep.equal({ tableName: 't', id: 'a b c+d😀' });
  });

  it('keeps empty values and names without a value', () => {
    expect(parseQuery('a=&b&&c=1')).to.deep.equal({ a: '', b: '', c: '1' });
  });

  it('collects a repeated parameter into an array', () => {
    expect(parseQuery('id=a&id=b&id=c')).to.deep.equal({ id: ['a', 'b', 'c'] });
  });

  it('makes __proto__ an ordinary key', () => {
    const query = parseQuery('__proto__=x&constructor=y');
    expect(Object.keys(query)).to.deep.equal(['__proto__', 'constructor']);
    expect(Object.getPrototypeOf(query)).to.equal(Object.prototype);
  });

  it('rejects bytes that are not UTF-8, naming the parameter', () => {
    for (const query of ['id=%FF', 'id=%C3', 'id=%ED%A0%80', 'id=%zz']) {
      try {
        parseQuery(query);
        expect.fail(`accepted ${query}`);
      } catch (error) {
        expect(error).to.be.instanceOf(ApiError);
        expect((error as ApiError).code).to.equal('VALIDATION_FAILED');
        expect((error as ApiError).extensions['errors']).to.deep.equal([{ path: 'id', message: 'id is not valid percent-encoded UTF-8' }]);
      }
    }
  });

  it('refuses more parameters than the limit, before decoding the rest', () => {
    const query = Array.from({ length: 65 }, (_, i) => `p${i}=1`).join('&');
    expect(() => parseQuery(query.split('&').slice(0, 64).join('&'))).to.not.throw();
    const error = caught(() => parseQuery(`${query}&bad=%FF`));
    expect(error.code).to.equal('VALIDATION_FAILED');
    expect(error.detail).to.equal('The query has more than 64 parameters.');
    expect(error.extensions['errors']).to.deep.equal([{ path: '', message: 'the query has more than 64 parameters' }]);
    expect(caught(() => parseQuery('a=1&b=2&c=3', { maxParameters: 2, maxRepeats: 16 })).detail).to.equal('The query has more than 2 parameters.');
  });

  it('refuses a parameter repeated more often than the limit', () => {
    expect(parseQuery(Array(16).fill('id=x').join('&'))['id']).to.have.length(16);
    const error = caught(() => parseQuery(Array(17).fill('id=x').join('&')));
    expect(error.detail).to.equal('Query parameter "id" appears more than 16 times.');
    expect(error.extensions['errors']).to.deep.equal([{ path: 'id', message: 'id appears more than 16 times' }]);
  });

  it('quotes at most 100 characters of a parameter name back', () => {
    const name = 'n'.repeat(60_000);
    const error = caught(() => parseQuery(`${name}=%FF`));
    expect(JSON.stringify(error.extensions).length + error.detail.length).to.be.below(500);
  });

  it('takes time linear in the length of the query', () => {
    // A quadratic parser takes seconds on the larger of these; a linear one a few milliseconds.
    // The fastest of 5 parses: on a loaded machine one of them may wait for a core.
    const timed = (count: number) => {
      const query = Array(count).fill('id=x').join('&');
      let fastest = Infinity;
      for (let i = 0; i < 5; i++) {
        const started = performance.now();
        caught(() => parseQuery(query, { maxParameters: Infinity, maxRepeats: Infinity }), false);
        fastest = Math.min(fastest, performance.now() - started);
      }
      return fastest;
    };
    timed(1000); // warm up
    const small = Math.max(timed(2000), 0.2);
    const large = timed(32_000);
    expect(large / small, `${large.toFixed(1)} ms vs ${small.toFixed(1)} ms`).to.be.below(16 * 6);
  });
});

function caught(run: () => unknown, expectThrow = true): ApiError {
  try {
    run();
  } catch (error) {
    expect(error).to.be.instanceOf(ApiError);
    return error as ApiError;
  }
  if (expectThrow) expect.fail('no error thrown');
  return new ApiError('INTERNAL', 'none');
}
