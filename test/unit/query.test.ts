import { expect } from 'chai';
import { parseQuery } from '../../src/http/query.ts';
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
});
